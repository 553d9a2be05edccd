"""A platform worker: lease episodes from the queue, play them on the engine, write what came of them.

One worker plays one batch at a time (one submission's episodes) in its main thread, where the engine's call
guard works; a thread renews the lease meanwhile. Policies and benchmarks are built once and kept for the next
batch of the same run. A failed episode fails its run with the kind of failure it was (`lifecycle` decides
who pays).

A vigil thread beats for the worker all its life, playing or not (so a long batch never reads as "no worker
alive"), and watches the engine's deadline beacon: a call stuck past its limit where the alarm cannot reach
it (C code, signals blocked) fails its episode with that call's own timeout kind, hands the rest of the batch
back, and ends the process, for its supervisor to replace.

`stop` (SIGTERM, SIGINT, the parent's death) ends the worker within moments: the episode in play is cut
where the engine is (never inside a write of ours) and handed back with the rest of the batch.

While a batch plays, the renewing thread also reads its run's status twice a second: a run cancelled (or
failed elsewhere) has its box killed at once (`Player.cancel`), and an episode played in this process cut
where the engine is (`CUT_SIGNAL`), rather than left to play out: a policy that hangs would otherwise hold
the worker until its call's limit while other runs wait.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import secrets
import shutil
import signal
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError, OperationalError

from yardstick.core import lifecycle
from yardstick.core.install import open_artifact_store
from yardstick.core.ledger import Ledger
from yardstick.core.runs import EndpointTarget
from yardstick.core.settings import Settings
from yardstick.engine.cpu_wait import Overdue
from yardstick.engine.failures import FailureKind
from yardstick.engine.guard import Call, CallBeacon
from yardstick.engine.mp4 import NotAVideo
from yardstick.engine.recording import Recording, describe_video, episode_folder
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import BuildError, Component
from yardstick.store.db import Database
from yardstick.store.models import Run, WorkerBeat, utcnow
from yardstick.store.queue import EpisodeQueue, LeasedEpisode
from yardstick.store.states import ACTIVE_RUNS, RunStatus
from yardstick.worker.act_server.host import ActHost
from yardstick.worker.players import Masking, Player, Players, boxed_player, played_on

log = logging.getLogger("yardstick.worker")
# What an episode's recorded files are, to the store: videos, scenes (glTF binary); the rest is gzip.
GLB = "model/gltf-binary"
CONTENT_TYPES = {".mp4": "video/mp4", ".glb": GLB}
T = TypeVar("T")

# Well inside the 30 s after which the platform counts a worker gone (liveness.WORKER_ALIVE_S).
BEAT_EVERY_S = 5.0
KEPT_RUNTIMES = 2
# Episodes a worker on a Ray cluster leases at a time: enough to keep a few machines' actors playing.
RAY_BATCH = 32
# How often the vigil looks at the beacon; how long past a call's limit it waits for the alarm to cut it.
VIGIL_EVERY_S = 0.5
HANG_GRACE_S = 5.0
# How often an idle worker looks whether episodes arrived (a read), between its rounds every `poll_s` (a
# write): a run starts within this time of being filed, not within a round.
IDLE_LOOK_S = 0.05
# The exit status of a worker that ended itself over a call that would not yield (its supervisor replaces it).
EXIT_WEDGED = 75
# How often a worker playing a batch reads whether its run is still active.
RUN_WATCH_S = 0.5


# The signal the renewing thread sends the main thread to cut the episode of a run that ended.
CUT_SIGNAL = signal.SIGUSR2


class RunEnded(SystemExit):
    """Raised in the main thread to cut the episode in play when its run ended (cancelled, or failed
    elsewhere). A SystemExit, so the engine's guard lets it through rather than counting it as the policy's
    crash; not a `Stopped`: the worker goes on to the next run."""


class Stopped(SystemExit):
    """Raised in the main thread to cut the episode in play when the worker is asked to stop. A SystemExit,
    so the engine's guard lets it through rather than counting it as the policy's crash."""


@dataclass(frozen=True)
class BatchWork:
    """What a leased batch of one run needs to be played."""

    run_id: int
    benchmark: Component
    endpoints: dict[str, EndpointTarget]  # by name
    recording: Recording | None = None


class PlatformWorker:
    def __init__(
        self,
        settings: Settings,
        ledger: Ledger,
        *,
        name: str | None = None,
        batch: int = 8,
        poll_s: float = 0.5,
    ) -> None:
        self.settings = settings
        self.db = Database(settings.database)
        self.store = open_artifact_store(settings)
        self.queue = EpisodeQueue(self.db, lease_s=settings.lease_s, max_attempts=settings.max_attempts)
        self.lifecycle = lifecycle.Lifecycle(self.db, self.store, ledger)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.batch = max(batch, RAY_BATCH) if settings.ray_address is not None else batch
        self.poll_s = poll_s
        self.call_timeout_s = settings.call_timeout_s
        self.stopping = threading.Event()
        self._interrupted = False  # a signal asked for a stop (`interrupt`); the main thread makes it one
        self._warm: set[str] = set()  # tasks this worker has played: their worlds are built
        # Episodes record here, then their files go to the artifact store and leave this folder.
        self._recordings = Path(tempfile.mkdtemp(prefix="yardstick-recording-"))
        self._beaten_at = -math.inf
        # What the vigil reads: the engine's deadline (and its call), the batch in hand and what is in play.
        self.beacon = CallBeacon()
        self._overdue = Overdue(None, HANG_GRACE_S)  # this process's main thread, where the engine calls
        self.players = Players(settings, self.db, call_timeout_s=settings.call_timeout_s, beacon=self.beacon)
        self._run_id: int | None = None
        self._pending: dict[int, LeasedEpisode] = {}
        self._playing: dict[int, LeasedEpisode] = {}
        self._player: Player | None = None  # what plays the batch now: cancelled when its run ends
        self._in_engine = False
        self._cut = False  # the batch's run ended: the engine is to be left at once (`RunEnded`)
        self._cuttable = False  # `CUT_SIGNAL` has its handler (only `run` in the main thread installs it)
        # A database failure mid-batch may leave episodes leased to this worker that it will not play: the
        # batch's own release may have failed too, and an episode played but not recorded is still leased.
        self._leases_left = False

    def run(self) -> None:
        """Until `stop()`: sweep abandoned runs, lease, play, and wait out a database that fails; the vigil
        beats meanwhile."""
        vigil = threading.Thread(target=self._vigil, name="yardstick-vigil", daemon=True)
        vigil.start()
        before = None
        if threading.current_thread() is threading.main_thread():
            before = signal.signal(CUT_SIGNAL, self._on_cut)
            self._cuttable = True
        # Robots on deployments are served beside the batches, on a thread of their own.
        acts = ActHost(self.settings, self.db, self.name) if self.settings.secret_file.exists() else None
        if acts is not None:
            acts.start()
        try:
            while not self._stop_asked():
                try:
                    played = self.step()
                except OperationalError as exc:
                    # The database went away (a restart, a connection cut): what this worker held goes back
                    # once the database answers again, and it carries on.
                    log.warning("worker %s: the database failed (%s); retrying", self.name, exc.orig)
                    self._leases_left = True
                    played = False
                if not played:
                    self._idle()
        except Stopped:
            pass
        finally:
            self.stopping.set()
            if acts is not None:
                acts.stop()
            self.players.close()
            vigil.join(timeout=5)
            self.db.close()
            shutil.rmtree(self._recordings, ignore_errors=True)
            if self._cuttable:
                self._cuttable = False
                signal.signal(CUT_SIGNAL, before)

    def stop(self) -> None:
        self.stopping.set()

    def _stop_asked(self) -> bool:
        """Whether the worker is to stop; a stop a signal asked for (`interrupt`) is made `stop()` here,
        outside the handler."""
        if self._interrupted:
            self.stop()
        return self.stopping.is_set()

    def _idle(self) -> None:
        """Wait up to `poll_s` for the next round, or until the count of queued episodes changes (a run
        filed, episodes handed back), looking every `IDLE_LOOK_S` (also for a stop a signal asked for).
        Nothing to play: its policy containers go first."""
        self.players.rest()
        deadline = time.monotonic() + self.poll_s
        try:
            before = self.queue.queued()
        except OperationalError:  # the database is away: wait the round out, as the loop would
            before = None
        while not self._stop_asked() and time.monotonic() < deadline:
            self.stopping.wait(min(IDLE_LOOK_S, max(0.0, deadline - time.monotonic())))
            try:
                if before is not None and self.queue.queued() != before:
                    return
            except OperationalError:
                before = None

    def interrupt(self) -> None:
        """`stop`, from a signal handler in the main thread: the episode in play is cut at once (it is
        handed back with the rest of the batch), unless the worker is in a write of its own, which ends
        first and is followed by no other. It takes no lock: the signal may land while the main thread holds
        the one `stopping.set()` takes (at the start of its `stopping.wait`), and a handler waiting for it
        hung the worker for good. The main thread makes it a `stop()` at its next look."""
        self._interrupted = True
        if self._in_engine and threading.current_thread() is threading.main_thread():
            raise Stopped(0)

    def _on_cut(self, signum: int, frame: object) -> None:
        # Only inside the engine: a write of ours runs to its end, and `_engine` looks at the flag next.
        if self._cut and self._in_engine:
            raise RunEnded(0)

    def step(self) -> bool:
        """One round; True if it played anything."""
        if self._leases_left:
            # Handed back now, uncounted (the worker was not lost), rather than left for their leases to run
            # out: a minute of a run standing still for a second's cut.
            self.queue.release_all(self.name)
            self._leases_left = False
        self._sweep()
        leased = self.queue.lease(self.name, self.batch, frozenset(self._warm))
        if not leased:
            return False
        self._play(leased)
        return True

    def _vigil(self) -> None:
        """All the worker's life, in a thread of its own: beat, and watch for a call stuck past its limit.
        The first beat is at once, so a worker is seen alive as soon as it is up."""
        while not self.stopping.is_set():
            try:
                self._beat()
                if self._overdue.stuck(self.beacon.value):
                    self._wedged(self.beacon.call)
            except OperationalError as exc:
                log.warning("worker %s: could not beat (%s)", self.name, exc.orig)
            self.stopping.wait(VIGIL_EVERY_S)

    def _beat(self) -> None:
        # Every few seconds, not every poll: a beat is a write.
        now = time.monotonic()
        if now - self._beaten_at < BEAT_EVERY_S:
            return
        self._beaten_at = now
        with self.db.writing() as session:
            beat = session.get(WorkerBeat, self.name)
            if beat is None:
                session.add(WorkerBeat(name=self.name, host=socket.gethostname(), seen_at=utcnow()))
            else:
                beat.seen_at = utcnow()

    def _wedged(self, call: Call | None) -> None:
        """The main thread is stuck in `call` past its limit and the alarm cannot cut it: fail what is in
        play with the call's own timeout kind, hand back the rest of the batch, and end this process (the
        stuck call with it) for the supervisor to replace."""
        what = call.name if call is not None else "a guarded call"
        kind = call.timeout if call is not None else FailureKind.WORKER_LOST
        reason = (
            f"{what} ran past its limit and did not yield to the alarm (stuck where no signal reaches it, "
            "as in C code); the worker process playing it was replaced"
        )
        log.error("worker %s: %s", self.name, reason)
        try:
            run_id, playing = self._run_id, list(self._playing.values())
            for episode in playing:
                record = {"index": episode.index, "failure": kind, "error": reason, "worker": self.name}
                self.queue.fail(self.name, episode.id, reason, record)
            if run_id is not None:
                where = (
                    f"episode {playing[0].index} ({playing[0].task_id}, endpoint {playing[0].endpoint}, seed "
                    f"{playing[0].seed}): "
                    if playing
                    else ""
                )
                self.lifecycle.fail(run_id, kind, where + reason)
            self.queue.release_all(self.name)
        finally:
            os._exit(EXIT_WEDGED)

    def _sweep(self) -> None:
        for run_id in self.queue.unfinished():
            # Once: the run's status decides who ends it; two sweeps in the same moment may both write its
            # result.json row, and the second's insert is refused.
            with contextlib.suppress(IntegrityError):
                self.lifecycle.finish(run_id)
        for run_id, error in self.queue.abandoned():
            self.lifecycle.fail(
                run_id,
                FailureKind.PLATFORM_LOST,
                f"the platform lost the workers playing an episode: {error}",
            )

    def _play(self, leased: list[LeasedEpisode]) -> None:
        pending = self._pending = {e.id: e for e in leased}
        self._cut = False
        self._run_id = leased[0].submission_id
        renewing = threading.Event()
        renewer = threading.Thread(
            target=self._renew, args=(leased[0].submission_id, pending, renewing), daemon=True
        )
        renewer.start()
        try:
            work = self._batch_work(leased[0].submission_id)
            if work is None:
                return
            for endpoint in dict.fromkeys(e.endpoint for e in leased):
                if not self._play_endpoint(work, [e for e in leased if e.endpoint == endpoint], pending):
                    return
        finally:
            renewing.set()
            renewer.join()
            self._player = None
            self._playing.clear()
            self._run_id = None
            # Whatever was not played (stopping, the run ended, the database failed) goes back; a run that
            # ended drops it. If the database fails this too, the next round hands it back (`step`).
            self.queue.release(self.name, list(pending))

    def _renew(self, run_id: int, pending: dict[int, LeasedEpisode], done: threading.Event) -> None:
        """Renew the batch's lease every third of it, and watch its run: one that ended has what plays it
        cancelled (a box killed now, not when its episode would have ended)."""
        renewed = time.monotonic()
        while not done.wait(RUN_WATCH_S):
            try:
                if time.monotonic() - renewed >= self.settings.lease_s / 3:
                    renewed = time.monotonic()
                    self.queue.renew(self.name, list(pending))
                if not self._run_active(run_id):
                    boxed = boxed_player(self._player)
                    if boxed is not None:
                        log.info("worker %s: run %s ended as it played; box stopped", self.name, run_id)
                        boxed.cancel()
                    else:
                        self._cut = True
                        main = threading.main_thread().ident
                        if main is not None and self._in_engine and self._cuttable:
                            log.info("worker %s: run %s ended as it played; episode cut", self.name, run_id)
                            signal.pthread_kill(main, CUT_SIGNAL)
                    return
            except OperationalError as exc:  # the next renewal may reach the database again
                log.warning("worker %s: could not renew its lease (%s)", self.name, exc.orig)

    def _run_active(self, run_id: int) -> bool:
        return self._run_status(run_id) in ACTIVE_RUNS

    def _run_status(self, run_id: int) -> str | None:
        with self.db.reading() as session:
            run = session.get(Run, run_id)
            return None if run is None else run.status

    def _batch_work(self, run_id: int) -> BatchWork | None:
        with self.db.reading() as session:
            run = session.get(Run, run_id)
        if run is None or run.status not in ACTIVE_RUNS:
            return None
        recorded = run.recording
        recording = (
            Recording(
                video=bool(recorded.get("video")),
                trajectory=bool(recorded.get("trajectory")),
                folder=str(self._recordings),
                fps=recorded.get("fps"),
                # A 3D replay where the benchmark declares one (the Sequences contract's default, `3d`).
                replay=bool(recorded.get("replay")),
                replay_if_declared=True,
            )
            if recorded
            else None
        )
        return BatchWork(
            run_id,
            Component(run.benchmark, dict(run.benchmark_params)),
            {name: EndpointTarget.from_json(name, data) for name, data in run.endpoints.items()},
            recording,
        )

    def _play_endpoint(
        self, batch: BatchWork, episodes: list[LeasedEpisode], pending: dict[int, LeasedEpisode]
    ) -> bool:
        """Play one endpoint's episodes of the batch; False once the run has ended (failed or cancelled)."""
        try:
            target = batch.endpoints[episodes[0].endpoint]
            player = self._engine(lambda: self.players.player(batch.benchmark, target, batch.recording))
        except RunEnded:  # it ended as its endpoint was started: nothing of it is played
            pending.clear()
            return False
        except BuildError as exc:
            self.lifecycle.fail(
                batch.run_id, exc.kind, f"endpoint {episodes[0].endpoint!r} could not be started: {exc}"
            )
            pending.clear()
            return False
        except OperationalError:
            raise  # the database's fault, not the run's: `run` waits for it, and the batch goes back
        except Exception as exc:  # the worker's own fault: the run says so, and the worker goes on
            log.exception("worker %s: starting endpoint %r failed", self.name, episodes[0].endpoint)
            self.lifecycle.fail(
                batch.run_id,
                FailureKind.WORKER_LOST,
                f"endpoint {episodes[0].endpoint!r} could not be started by worker {self.name}:"
                f" {type(exc).__name__}: {exc}",
            )
            pending.clear()
            return False
        by_index = {e.index: e for e in episodes}
        self._player = player
        self._warm.update(e.task_id for e in episodes)
        specs = [
            EpisodeSpec(
                index=e.index,
                task=e.benchmark_task,
                trial=e.trial,
                seed=e.seed,
                cap_s=e.cap_s,
                limit_s=target.max_seconds,
            )
            for e in episodes
        ]
        try:
            return self._play_results(batch, player, specs, by_index, pending)
        finally:
            self._keep_printed(batch.run_id, player, episodes[0].endpoint)

    def _keep_printed(self, run_id: int, player: Masking, endpoint: str) -> None:
        """What the boxes printed since it was last kept, as one of the run's log files (`logs/`, one JSON
        line each: time, side, machine, arm): before each episode lands, so a run's lines are kept before
        it can end, and once more as the batch ends. Logs are a help, never the run's fate: a failure to
        keep them is logged and the batch goes on."""
        printed = player.take_printed()
        if not printed:
            return
        arm = endpoint.removeprefix("arm-")
        rows = [
            {
                "ts": at,
                "side": side,
                "machine_name": self.name,
                "arm": int(arm) if arm.isdigit() else None,
                "line": text,
            }
            for at, side, text in printed
        ]
        key = f"{lifecycle.LOGS}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.jsonl"
        data = "".join(json.dumps(row) + "\n" for row in rows).encode()
        try:
            self.store.put(run_id, key, data, "application/x-ndjson", durable=False)
        except (OSError, ValueError) as exc:
            log.warning("worker %s: the lines of run %d could not be kept: %s", self.name, run_id, exc)

    def _play_results(
        self,
        batch: BatchWork,
        player: Masking,
        specs: list[EpisodeSpec],
        by_index: dict[int, LeasedEpisode],
        pending: dict[int, LeasedEpisode],
    ) -> bool:
        results = player.run(self._until(specs, by_index))
        while (result := self._next_result(batch, player, results, pending)) is not None:
            episode = by_index[result.index]
            # Its lines first: an episode that lands (or fails) may end the run, and `--follow` ends with it.
            self._keep_printed(batch.run_id, player, episode.endpoint)
            self._playing.pop(result.index, None)
            pending.pop(episode.id, None)
            record = {
                **result.to_dict(),
                "task_id": episode.task_id,
                "endpoint": episode.endpoint,
                "attempt": episode.attempt,
                "worker": self.name,
            }
            if (node := played_on(player, result.index)) is not None:
                record["ray_node"] = node
            if result.failure is not None:
                shutil.rmtree(episode_folder(self._recordings, result.index), ignore_errors=True)
                if self.queue.fail(self.name, episode.id, result.error or "", record):
                    self.lifecycle.fail(
                        batch.run_id,
                        result.failure,
                        f"episode {episode.index} ({episode.task_id}, endpoint {episode.endpoint}, seed "
                        f"{episode.seed}): {result.error}",
                        {"episode": record},
                    )
                pending.clear()
                self._drop_box(player)
                return False
            try:
                files = self._upload_recording(batch.run_id, result, record)
                key = lifecycle.episode_key(episode.index)
                raw = json.dumps(record, default=str).encode()
                size = self.store.put(batch.run_id, key, raw, "application/json", durable=False)
            except OSError as exc:
                # A full or failing artifact store: the platform's fault, so the run errors and is refunded.
                # A put is all or nothing, so no part of a file is left to be served.
                reason = f"episode {episode.index} played, and its results could not be stored: {exc}"
                if self.queue.fail(self.name, episode.id, reason, record):
                    self.lifecycle.fail(batch.run_id, FailureKind.STORAGE_FAILED, reason)
                pending.clear()
                self._drop_box(player)
                return False
            landed = self.queue.complete(
                self.name, episode.id, record, [*files, (key, size, "application/json")]
            )
            if landed.last:
                self.lifecycle.finish(batch.run_id)
            if not landed.active:
                pending.clear()
                self._drop_box(player)
                return False
        status = self._run_status(batch.run_id)
        if status not in ACTIVE_RUNS:
            pending.clear()
            if status != RunStatus.FINISHED:  # cancelled as it played (its box was stopped), or failed
                self._drop_box(player)
            return False
        return True

    def _drop_box(self, player: Player) -> None:
        """A run that failed or was cancelled keeps no box warm: what its code left running there (a fork
        bomb's children, a thread) goes with it. An in-process player is the platform's own, and is kept."""
        if boxed_player(player) is not None:
            self.players.forget(player)

    def _upload_recording(
        self, submission_id: int, result: EpisodeResult, record: dict[str, Any]
    ) -> list[tuple[str, int, str]]:
        """Move an episode's recorded files into the artifact store, next to its record, and describe its
        videos in the record (camera, file, size, duration) for the pages. The local copies go."""
        written: list[tuple[str, int, str]] = []
        videos: list[dict[str, Any]] = []
        for relative in result.artifacts:
            path = self._recordings / relative
            content_type = CONTENT_TYPES.get(path.suffix, "application/gzip")
            key = f"{lifecycle.ATTEMPT}{relative}"
            if content_type == GLB and self.store.exists(submission_id, key):
                continue  # a scene (named by its sha256) is kept once a run, whichever episode brought it
            size = self.store.put(submission_id, key, path.read_bytes(), content_type, durable=False)
            written.append((key, size, content_type))
            if content_type == "video/mp4":
                try:
                    videos.append(describe_video(path))
                except NotAVideo as wrong:  # checked as it left its box; a recording of ours is sound
                    log.warning("worker %s: %s is no video: %s", self.name, relative, wrong)
        shutil.rmtree(episode_folder(self._recordings, result.index), ignore_errors=True)
        if videos:
            record["videos"] = videos
        return written

    def _next_result(
        self,
        batch: BatchWork,
        player: Player,
        results: Iterator[EpisodeResult],
        pending: dict[int, LeasedEpisode],
    ) -> EpisodeResult | None:
        """The next result, or None when the batch is done. The engine fails episodes for what policies and
        benchmarks do; an exception out of it is the worker's own fault, which ends the run with its reason
        (handing the episodes back would replay the same fault for ever)."""
        try:
            return self._engine(lambda: next(results, None))
        except RunEnded:
            # Cut mid-episode: what the player holds (a session mid-answer, a world mid-step) is not to be
            # played on, so it is built afresh for the next run.
            self.players.forget(player)
            pending.clear()
            return None
        except Exception as exc:
            log.exception("worker %s: playing run %s failed", self.name, batch.run_id)
            self.players.forget(player)
            self.lifecycle.fail(
                batch.run_id,
                FailureKind.WORKER_LOST,
                f"worker {self.name} failed playing it: {type(exc).__name__}: {exc}",
            )
            pending.clear()
            return None

    def _engine(self, step: Callable[[], T]) -> T:
        """`step()`, in the engine: where `interrupt` may cut it."""
        self._in_engine = True
        try:
            if self._stop_asked():
                raise Stopped(0)
            if self._cut:
                raise RunEnded(0)
            return step()
        finally:
            self._in_engine = False

    def _until(self, specs: list[EpisodeSpec], leased: dict[int, LeasedEpisode]) -> Iterator[EpisodeSpec]:
        """The episodes, one by one, until the worker is asked to stop; each in play once handed out."""
        for spec in specs:
            if self._stop_asked():
                return
            self._playing[spec.index] = leased[spec.index]
            yield spec
