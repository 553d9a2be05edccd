"""Episodes on a Ray cluster: `yardstick eval run --executor ray`, and a platform worker started with
`--executor ray` (`RayPlayer`, kept between the batches of a run).

The process pool's way, with Ray actors for processes: each actor builds the benchmark and the policy once
(one CPU each, on whichever node Ray places it) and plays the episodes this driver hands it one at a time,
staying on one task while it can (`pool.Dispenser`), so a result never depends on who played it. What an
episode records (videos, a trajectory) comes back with its result, so an actor on another machine records as
one here does.

What Ray gives and what this adds. An actor whose process or node dies fails the call it was playing with
`RayActorError`; Ray itself retries nothing here (`max_restarts=0`, `max_task_retries=0`), because an
actor's restart would rebuild the benchmark anyway and a retried call could land twice. Instead the
episode goes back to the dispenser and a new actor is made in the dead one's place: an episode is played
again elsewhere, and counted once (a result whose episode already landed is dropped: at-least-once
delivery, deduplicated on the episode's index). An episode that has taken down `MOST_LOSSES` actors is
failed `worker_lost` rather than played forever (a policy that kills its process). How soon a dead node is
noticed is Ray's: a SIGKILLed actor process at once; a whole node once the GCS's health checks fail
(`health_check_period_ms` 3 s × `health_check_failure_threshold` 5 by default: about 15 s).

A policy served on a unix socket of this machine (a deployment's box, an image's container) is reachable
from this machine only: its actors are placed on this node (`here`). A deployment served as replicas on the
cluster (`worker.ray_replicas`) is a socket on each of several nodes (`policies`): actors are spread over
those nodes, each dialling a replica on its own.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from yardstick.distribution import install_hint
from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.guard import describe
from yardstick.engine.pool import Dispenser
from yardstick.engine.replay_track import SCENE_FILE, SCENES
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import BuildError, Runtime, Work
from yardstick.engine.threads import limit_threads

__all__ = ["MOST_LOSSES", "RayExecutor", "RayPlayer", "check_answers", "connect", "portable", "served_here"]

MOST_LOSSES: Final = 3
# How long actors may take to build before the run gives up on the cluster (an interpreter, the imports,
# a simulator, on a loaded node).
BUILD_WAIT_S: Final = 600.0
POLL_S: Final = 0.5
UNIX_SCHEMES: Final = ("ws+unix:", "unix:")


class _Player:
    """An actor's body: a Runtime built once, then one episode a call, with what it recorded."""

    def __init__(self, work: Work) -> None:
        import ray

        limit_threads(1)  # one CPU each (the actor's reservation)
        self.node = ray.get_runtime_context().get_node_id()
        self.runtime: Runtime | None = None
        self.failed: tuple[str, str] | None = None
        self.folder: Path | None = None
        self.scenes_sent: set[str] = set()  # a scene travels back once an actor; the driver keeps it
        if work.recording is not None and work.recording.active:
            # The driver's folder may be on another machine: episodes record here, and travel back.
            self.folder = Path(tempfile.mkdtemp(prefix="ys-ray-recording-"))
            work = dataclasses.replace(
                work, recording=dataclasses.replace(work.recording, folder=str(self.folder))
            )
        try:
            self.runtime = Runtime(work)
        except BuildError as failure:
            self.failed = (failure.reason, failure.kind.value)
        except Exception as exc:  # anything else that broke the build: the run's, as the pool reports it
            self.failed = (describe("building the run", exc), FailureKind.WORKER_LOST.value)

    def built(self) -> tuple[str, str] | float:
        """The build's failure, or its cold start in seconds."""
        if self.failed is not None:
            return self.failed
        assert self.runtime is not None
        return self.runtime.cold_start_s

    def play(self, episode: EpisodeSpec) -> tuple[dict[str, Any], dict[str, bytes], str]:
        """The episode's result, the files it recorded (by their path in the recording folder), and this
        actor's node."""
        assert self.runtime is not None
        result = next(iter(self.runtime.run([episode])))
        files: dict[str, bytes] = {}
        if self.folder is not None:
            for relative in result.artifacts:
                if relative not in self.scenes_sent:
                    files[relative] = (self.folder / relative).read_bytes()
            self.scenes_sent.update(name for name in result.artifacts if SCENE_FILE.fullmatch(name))
            for left in self.folder.iterdir():  # one episode at a time: all of it went with this one
                if left.name != SCENES:  # but the scenes, named by their hash: written here once
                    shutil.rmtree(left, ignore_errors=True)
        return result.to_dict(), files, self.node


@dataclass(eq=False)
class _Actor:
    handle: Any
    node: str | None = None  # the node it was pinned to, if any
    task: str | None = None  # the task it is on (the dispenser's affinity)
    ready: bool = False
    busy: bool = False  # an episode in hand


@dataclass(frozen=True)
class _InHand:
    """An episode handed to an actor, and when."""

    actor: _Actor
    episode: EpisodeSpec
    since: float = field(default_factory=time.monotonic)


def connect(address: str) -> bool:
    """This process connected to the cluster at `address` (`auto`, or a head's HOST:PORT); True when it
    connected now (and so should disconnect when done). BuildError when Ray is not installed."""
    # Ray's own handler of fatal signals would dump a stack for the SIGTERM that stops a worker cleanly;
    # it is read as Ray is imported, so it is set first.
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        import ray
    except ModuleNotFoundError:
        raise BuildError(
            f"--executor ray: Ray is not installed here: {install_hint('cluster')}",
            FailureKind.INSTALL_INCOMPLETE,
        ) from None
    if ray.is_initialized():
        return False
    check_answers(address)
    ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    return True


class RayPlayer:
    """Actors built for one run's work, kept between its batches: `run` plays the episodes handed to it on
    them, `close` ends them. `workers` actors at most (0: one per CPU of the cluster); `here` places them on
    this process's node; `episode_timeout_s` the wall-clock time an episode may take on its actor before the
    actor is ended and the episode failed (a hang no alarm reaches: no supervisor watches an actor's calls
    as the pool's does). The process must be connected to the cluster (`connect`)."""

    def __init__(
        self,
        work: Work,
        workers: int = 0,
        *,
        here: bool = False,
        episode_timeout_s: float | None = None,
        policies: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        import ray

        self.ray: Any = ray  # untyped where this code calls it
        self.work = portable(work)
        self.episode_timeout_s = episode_timeout_s
        if here:
            policies = {self.ray.get_runtime_context().get_node_id(): [self.work.policy.ref]}
        # Node → the policy references its actors dial (a replica's socket there), taken in turn; none: one
        # policy for every actor, wherever Ray places it.
        self.policies = {node: list(refs) for node, refs in (policies or {}).items() if refs}
        self._cpus: dict[str, int] = {}
        if self.policies:  # no more actors than those nodes' CPUs: others could never be placed
            alive = {n["NodeID"]: int(n["Resources"].get("CPU", 0)) for n in self.ray.nodes() if n["Alive"]}
            self._cpus = {node: alive.get(node, 0) for node in self.policies}
            room = sum(self._cpus.values())
            self.workers = min(workers or room, max(1, room))
        else:
            self.workers = workers or max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        self.cold_starts: list[float] = []
        self.replayed = 0  # episodes whose actor was lost mid-episode, handed out again
        self.nodes: dict[int, str] = {}  # the node that played each episode that landed
        options: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0, "max_task_retries": 0}
        self._remote = ray.remote(**options)(_Player)
        self._actors: list[_Actor] = []
        self._building: dict[Any, _Actor] = {}

    def start(self, actors: int | None = None, *, every: bool = False) -> None:
        """Make actors up to `actors` (default: `workers`) and wait until one has built (`every`: all, or
        as many as built by the build's deadline): a run that cannot be built is refused here (BuildError
        with its kind), before any episode is handed out."""
        self._grow(actors or self.workers)
        deadline = time.monotonic() + BUILD_WAIT_S

        def started() -> bool:
            ready = any(actor.ready for actor in self._actors)
            if every and ready and time.monotonic() < deadline:
                return not self._building
            return ready

        while not started():
            if not self._building:
                raise BuildError("no actor is left to play the run", FailureKind.WORKER_LOST)
            done, _ = self.ray.wait(list(self._building), num_returns=1, timeout=POLL_S)
            for ref in done:
                self._built(ref, self._building.pop(ref))
            if not any(actor.ready for actor in self._actors):  # one built by then is enough to go on
                self._refuse_past(deadline)

    def run(self, episodes: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        ray = self.ray
        episodes = list(episodes)
        if not episodes:
            return
        self._grow(min(self.workers, len(episodes)))
        todo = Dispenser(episodes)
        losses: dict[int, int] = {}
        landed: set[int] = set()
        playing: dict[Any, _InHand] = {}
        deadline = time.monotonic() + BUILD_WAIT_S
        try:
            while len(landed) < len(episodes):
                for actor in self._actors:
                    if actor.ready and not actor.busy and todo:
                        episode = todo.next_for(actor)
                        playing[actor.handle.play.remote(episode)] = _InHand(actor, episode)
                        actor.busy = True
                for ref in self._overdue(playing):
                    held = playing.pop(ref)
                    self._end(held.actor)
                    landed.add(held.episode.index)
                    yield EpisodeResult.failed(held.episode, self._timed_out(held.episode))
                    if todo:
                        self._make()
                if len(landed) == len(episodes):
                    break
                waiting = list(self._building) + list(playing)
                if not waiting:
                    raise BuildError("no actor is left to play the run", FailureKind.WORKER_LOST)
                done, _ = ray.wait(waiting, num_returns=1, timeout=POLL_S)
                for ref in done:
                    if ref in self._building:
                        self._built(ref, self._building.pop(ref))
                        continue
                    held = playing.pop(ref)
                    actor, episode = held.actor, held.episode
                    actor.busy = False
                    try:
                        data, files, node = ray.get(ref)
                    except ray.exceptions.RayActorError as exc:
                        self._actors.remove(actor)
                        losses[episode.index] = losses.get(episode.index, 0) + 1
                        if losses[episode.index] >= MOST_LOSSES:
                            landed.add(episode.index)
                            yield EpisodeResult.failed(episode, _lost(exc, losses[episode.index]))
                        else:
                            todo.put_back(episode)
                            self.replayed += 1
                        if todo:
                            self._make()
                        continue
                    result = EpisodeResult.from_dict(data)
                    if result.index not in landed:  # delivered at least once: counted once
                        landed.add(result.index)
                        self._keep(files)
                        self.nodes[result.index] = node
                        yield result
                if not any(a.ready for a in self._actors):
                    self._refuse_past(deadline)
        finally:
            # Left before its episodes landed (the caller stopped, or failed): the actors still playing go,
            # so the next run starts on actors with nothing in hand.
            for held in playing.values():
                self._end(held.actor)

    def _overdue(self, playing: dict[Any, _InHand]) -> list[Any]:
        if self.episode_timeout_s is None:
            return []
        now = time.monotonic()
        return [ref for ref, held in playing.items() if now - held.since > self.episode_timeout_s]

    def _refuse_past(self, deadline: float) -> None:
        """BuildError once past `deadline` with actors still building and none built."""
        if self._building and time.monotonic() > deadline:
            raise BuildError(
                f"no actor of the cluster built the run within {BUILD_WAIT_S:g} s", FailureKind.WORKER_LOST
            )

    def _timed_out(self, episode: EpisodeSpec) -> Failed:
        return Failed(
            f"episode {episode.index} ran past its {self.episode_timeout_s:g} s of wall-clock time on its "
            "Ray actor, which was ended",
            FailureKind.WORKER_LOST,
        )

    def close(self) -> None:
        for actor in list(self._actors):
            self._end(actor)
        self._building.clear()

    def _grow(self, wanted: int) -> None:
        alive = self._alive() if self.policies else set()  # asked of the control store once, not an actor
        while len(self._actors) < wanted and self._make(alive):
            pass

    def _alive(self) -> set[str]:
        return {n["NodeID"] for n in self.ray.nodes() if n["Alive"]}

    def _make(self, alive: set[str] | None = None) -> bool:
        """One more actor (placed among the `alive` nodes, asked when not given); False when there is no
        room for it (every node serving the policy busy or gone: the actors left play on, and a run with
        none left fails saying so)."""
        if not self.policies:
            fresh = _Actor(self._remote.remote(self.work))
        else:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            placed = self._placed(self._alive() if alive is None else alive)
            if placed is None:
                return False
            node, ref = placed
            work = dataclasses.replace(self.work, policy=dataclasses.replace(self.work.policy, ref=ref))
            strategy = NodeAffinitySchedulingStrategy(node, soft=False)
            fresh = _Actor(self._remote.options(scheduling_strategy=strategy).remote(work), node=node)
        self._actors.append(fresh)
        self._building[fresh.handle.built.remote()] = fresh
        return True

    def _placed(self, alive: set[str]) -> tuple[str, str] | None:
        """The node the next actor goes to (of those with a policy to dial, alive and with a CPU free, the
        least busy for its CPUs: an actor pinned to a node with none free would never be placed) and the
        reference it dials there (that node's policies in turn); None when no such node is left."""
        on = {node: sum(1 for actor in self._actors if actor.node == node) for node in self.policies}
        open_ = [node for node in self.policies if node in alive and on[node] < self._cpus.get(node, 0)]
        if not open_:
            return None
        node = min(open_, key=lambda n: on[n] / self._cpus[n])
        refs = self.policies[node]
        return node, refs[on[node] % len(refs)]

    def _end(self, actor: _Actor) -> None:
        if actor in self._actors:
            self._actors.remove(actor)
        self.ray.kill(actor.handle, no_restart=True)

    def _built(self, ref: Any, actor: _Actor) -> None:
        try:
            built = self.ray.get(ref)
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.ActorUnschedulableError):
            # Its node went while it built, or went before it could be placed there: another takes its place.
            self._actors.remove(actor)
            self._make()
            return
        if isinstance(built, tuple | list):
            reason, kind = built
            raise BuildError(reason, FailureKind(kind))
        actor.ready = True
        self.cold_starts.append(float(built))

    def _keep(self, files: dict[str, bytes]) -> None:
        """What an episode recorded on its actor's machine, written where this run records."""
        recording = self.work.recording
        if not files or recording is None or recording.folder is None:
            return
        for relative, data in files.items():
            path = Path(recording.folder) / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


class RayExecutor:
    """A whole run on the cluster (`yardstick eval run --executor ray`): connect, play, disconnect.

    `kept` (an eval in rounds, `rounds.py`): the actors are built at the first round and kept for the next
    ones, until `close`; a round then costs no actor's start-up (its interpreter, imports and build: seconds
    a round). `share`: how many kept executors hold the cluster at once (eval compare's two policies, each
    with its own actors), so each makes one in `share` of the cluster's CPUs: actors kept by one would
    otherwise hold every CPU and the other's never be placed."""

    name = "ray"

    def __init__(
        self, address: str = "auto", workers: int | None = None, *, kept: bool = False, share: int = 1
    ) -> None:
        self.address = address
        self.workers = workers or 0  # 0: one actor per CPU of the cluster, known once connected
        self.cold_starts: list[float] = []  # the player's own list, as it fills, once it plays
        self.kept = kept
        self.share = max(1, share)
        self._player: RayPlayer | None = None
        self._started_here = False
        self._replayed_before = 0  # by the players already closed: the count outlives them

    @property
    def replayed(self) -> int:
        """Episodes whose actor was lost mid-episode, handed out again (this executor's runs, all told)."""
        return self._replayed_before + (self._player.replayed if self._player is not None else 0)

    def run(self, work: Work, episodes: Sequence[EpisodeSpec]) -> Iterator[EpisodeResult]:
        if self._player is None or portable(work) != self._player.work:
            self._close_player()
            self._started_here = connect(self.address) or self._started_here
            self._player = RayPlayer(work, self.workers or self._cluster_share())
            self.workers, self.cold_starts = self._player.workers, self._player.cold_starts
        else:
            self.cold_starts = []  # this round built nothing: its actors were kept from the one before
        finished = False
        try:
            yield from self._player.run(episodes)
            finished = True
        finally:
            if not (self.kept and finished):
                self.close()

    def close(self) -> None:
        """End the actors (reaped by Ray) and leave a cluster this executor started."""
        self._close_player()
        if self._started_here:
            import ray

            ray.shutdown()
            self._started_here = False

    def _close_player(self) -> None:
        if self._player is not None:
            player, self._player = self._player, None
            player.close()
            self._replayed_before += player.replayed

    def _cluster_share(self) -> int:
        """Actors to make when the run names no number: the cluster's CPUs, one in `share` of them."""
        if self.share == 1:
            return 0  # the player's own default: one a CPU
        import ray

        cluster: Any = ray  # untyped where this code calls it
        return max(1, int(cluster.cluster_resources().get("CPU", 1)) // self.share)


def served_here(ref: str) -> bool:
    """Whether a policy reference is a server on a unix socket of this machine."""
    return ref.startswith(UNIX_SCHEMES)


def check_answers(address: str) -> None:
    """ConnectionError at once when nothing listens at a head's HOST:PORT (Ray itself would wait minutes
    for its GCS to come up); `auto` is Ray's to find."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit():
        return
    try:
        with socket.create_connection((host, int(port)), timeout=10):
            return
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {address} ({exc.strerror or exc})") from None


def portable(work: Work) -> Work:
    """`work` as an actor on another node reads it: a file reference (`path.py:Class`) made absolute, as an
    actor's working folder is Ray's, not the driver's. The file must be at that path on every node (one
    machine, or a shared folder); a module reference must be importable there."""
    return dataclasses.replace(
        work,
        benchmark=dataclasses.replace(work.benchmark, ref=_absolute(work.benchmark.ref)),
        policy=dataclasses.replace(work.policy, ref=_absolute(work.policy.ref)),
    )


def _absolute(ref: str) -> str:
    where, colon, attribute = ref.rpartition(":")
    if colon and where.endswith(".py") and not os.path.isabs(where):
        return f"{os.path.abspath(where)}:{attribute}"
    return ref


def _lost(exc: Exception, times: int) -> Failed:
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return Failed(f"the Ray actor playing it died {times} times ({first_line})", FailureKind.WORKER_LOST)
