"""A platform worker: lease episodes from the queue, play them on the engine, write what came of them.

One worker plays one batch at a time (one submission's episodes) in its main thread, where the engine's call
guard works; a thread renews the lease meanwhile. Policies and benchmarks are built once and kept for the next
batch of the same run. A policy's fault fails the run with a caller reason (charged); the platform's with a
platform reason (the quota given back). SIGTERM (or `stop`) finishes the episode in hand and hands the
rest of the batch back.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platform_client.enums import ReasonCode

from yardstick.engine.recording import Recording, describe_video, episode_folder
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import BuildError, Component, Runtime, Work
from yardstick.service import runs
from yardstick.service.artifacts import LocalArtifactStore
from yardstick.service.settings import Settings
from yardstick.store.db import Database
from yardstick.store.models import Eval, PolicySpec, Submission, WorkerBeat, utcnow
from yardstick.store.queue import ACTIVE, EpisodeQueue, LeasedEpisode
from yardstick.wire.address import format_url, parse_address

# Well inside the 30 s after which the platform counts a worker gone (platform.WORKER_ALIVE_S).
BEAT_EVERY_S = 5.0
KEPT_RUNTIMES = 2


@dataclass(frozen=True)
class Plan:
    """What a batch of one submission needs to be played."""

    submission_id: int
    benchmark: Component
    endpoints: dict[str, dict[str, Any]]  # name -> the resolved endpoint (kind, wire, address, spec)
    recording: Recording | None = None


def reason_for(result: EpisodeResult) -> ReasonCode:
    error = result.error or ""
    if result.fault == "policy":
        if "ran past" in error or "did not answer within" in error:
            return ReasonCode.latency_budget_exceeded
        if error.startswith("policy.on_episode") or "refused the session" in error:
            return ReasonCode.policy_setup_crash
        return ReasonCode.policy_inference_crash
    if result.fault == "benchmark":
        return ReasonCode.internal_error  # the catalogue's benchmarks are the platform's
    return ReasonCode.runner_unresponsive


class PlatformWorker:
    def __init__(
        self,
        settings: Settings,
        *,
        name: str | None = None,
        batch: int = 8,
        poll_s: float = 0.5,
        call_timeout_s: float = 60.0,
    ) -> None:
        self.settings = settings
        self.db = Database(settings.database)
        self.store = LocalArtifactStore(settings.artifact_root)
        self.queue = EpisodeQueue(self.db, lease_s=settings.lease_s, max_attempts=settings.max_attempts)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self.batch = batch
        self.poll_s = poll_s
        self.call_timeout_s = call_timeout_s
        self.stopping = threading.Event()
        self._runtimes: OrderedDict[str, Runtime] = OrderedDict()
        self._warm: set[str] = set()  # tasks this worker has played: their worlds are built
        # Episodes record here, then their files go to the artifact store and leave this folder.
        self._recordings = Path(tempfile.mkdtemp(prefix="yardstick-recording-"))
        self._beaten_at = -math.inf

    def run(self) -> None:
        """Until `stop()`: beat, sweep abandoned runs, lease, play."""
        try:
            while not self.stopping.is_set():
                if not self.step():
                    self.stopping.wait(self.poll_s)
        finally:
            for runtime in self._runtimes.values():
                runtime.close()
            self._runtimes.clear()
            self.db.close()
            shutil.rmtree(self._recordings, ignore_errors=True)

    def stop(self) -> None:
        self.stopping.set()

    def step(self) -> bool:
        """One round; True if it played anything."""
        self._beat()
        self._sweep()
        leased = self.queue.lease(self.name, self.batch, frozenset(self._warm))
        if not leased:
            return False
        self._play(leased)
        return True

    def _beat(self) -> None:
        # Every few seconds, not every poll: an idle worker polls twice a second, and a beat is a write.
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

    def _sweep(self) -> None:
        for submission_id, error in self.queue.abandoned():
            runs.error(
                self.db,
                self.store,
                submission_id,
                ReasonCode.runner_unresponsive,
                f"the platform lost the workers playing an episode: {error}",
            )

    def _play(self, leased: list[LeasedEpisode]) -> None:
        pending = {e.id: e for e in leased}
        renewing = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(pending, renewing), daemon=True)
        renewer.start()
        try:
            plan = self._plan(leased[0].submission_id)
            if plan is None:
                return
            for endpoint in dict.fromkeys(e.endpoint for e in leased):
                if not self._play_endpoint(plan, [e for e in leased if e.endpoint == endpoint], pending):
                    return
        finally:
            renewing.set()
            renewer.join()
            # Whatever was not played (stopping, or the run ended) goes back; a run that ended drops it.
            self.queue.release(self.name, list(pending))

    def _renew(self, pending: dict[int, LeasedEpisode], done: threading.Event) -> None:
        while not done.wait(self.settings.lease_s / 3):
            self.queue.renew(self.name, list(pending))

    def _plan(self, submission_id: int) -> Plan | None:
        with self.db.reading() as session:
            submission = session.get(Submission, submission_id)
            if submission is None or submission.status not in ACTIVE:
                return None
            catalog_eval = session.get(Eval, submission.eval_id) if submission.eval_id else None
            if catalog_eval is None:
                return None
            endpoints = {e["name"]: e for task in submission.resolved["tasks"] for e in task["endpoints"]}
            recording = (
                Recording(
                    video=True, trajectory=True, folder=str(self._recordings), fps=catalog_eval.record_fps
                )
                if catalog_eval.record_video
                else None
            )
            return Plan(
                submission_id,
                Component(catalog_eval.benchmark, dict(catalog_eval.benchmark_params)),
                endpoints,
                recording,
            )

    def _policy(self, endpoint: dict[str, Any]) -> Component:
        if endpoint["kind"] == "served":
            with self.db.reading() as session:
                spec = session.get(PolicySpec, endpoint["spec"])
            if spec is None:
                raise BuildError(f"the served policy {endpoint['spec']!r} is no longer offered", "policy")
            return Component(spec.reference, dict(spec.params))
        wire = endpoint["wire"]
        return Component(format_url(wire, parse_address(wire, endpoint["address"])))

    def _runtime(self, plan: Plan, endpoint: str) -> Runtime:
        work = Work(
            benchmark=plan.benchmark,
            policy=self._policy(plan.endpoints[endpoint]),
            call_timeout_s=self.call_timeout_s,
            recording=plan.recording,
        )
        key = json.dumps(
            [
                work.benchmark.ref,
                work.benchmark.params,
                work.policy.ref,
                work.policy.params,
                repr(work.recording),
            ],
            sort_keys=True,
        )
        runtime = self._runtimes.pop(key, None) or Runtime(work)
        self._runtimes[key] = runtime
        while len(self._runtimes) > KEPT_RUNTIMES:
            self._runtimes.popitem(last=False)[1].close()
        return runtime

    def _play_endpoint(
        self, plan: Plan, episodes: list[LeasedEpisode], pending: dict[int, LeasedEpisode]
    ) -> bool:
        """Play one endpoint's episodes of the batch; False once the run has ended (failed or cancelled)."""
        try:
            runtime = self._runtime(plan, episodes[0].endpoint)
        except BuildError as exc:
            code = ReasonCode.policy_setup_crash if exc.part != "benchmark" else ReasonCode.internal_error
            runs.error(
                self.db,
                self.store,
                plan.submission_id,
                code,
                f"endpoint {episodes[0].endpoint!r} could not be started: {exc}",
            )
            pending.clear()
            return False
        by_index = {e.index: e for e in episodes}
        self._warm.update(e.task_id for e in episodes)
        specs = [
            EpisodeSpec(index=e.index, task=e.benchmark_task, trial=e.trial, seed=e.seed) for e in episodes
        ]
        for result in runtime.run(_until(specs, self.stopping)):
            episode = by_index[result.index]
            pending.pop(episode.id, None)
            record = {
                **result.to_dict(),
                "task_id": episode.task_id,
                "endpoint": episode.endpoint,
                "attempt": episode.attempt,
                "worker": self.name,
            }
            if result.error is not None:
                shutil.rmtree(episode_folder(self._recordings, result.index), ignore_errors=True)
                if self.queue.fail(self.name, episode.id, result.error, record):
                    runs.error(
                        self.db,
                        self.store,
                        plan.submission_id,
                        reason_for(result),
                        f"episode {episode.index} ({episode.task_id}, endpoint {episode.endpoint}, seed "
                        f"{episode.seed}): {result.error}",
                        {"episode": record},
                    )
                pending.clear()
                return False
            files = self._upload_recording(plan.submission_id, result, record)
            key = runs.episode_key(episode.index)
            raw = json.dumps(record, default=str).encode()
            size = self.store.put(plan.submission_id, key, raw, "application/json", durable=False)
            landed = self.queue.complete(
                self.name, episode.id, record, [*files, (key, size, "application/json")]
            )
            if landed.last:
                runs.finish(self.db, self.store, plan.submission_id)
            if not landed.active:
                pending.clear()
                return False
        return True

    def _upload_recording(
        self, submission_id: int, result: EpisodeResult, record: dict[str, Any]
    ) -> list[tuple[str, int, str]]:
        """Move an episode's recorded files into the artifact store, next to its record, and describe its
        videos in the record (camera, file, size, duration) for the pages. The local copies go."""
        written: list[tuple[str, int, str]] = []
        videos: list[dict[str, Any]] = []
        for relative in result.artifacts:
            path = self._recordings / relative
            content_type = "video/mp4" if path.suffix == ".mp4" else "application/gzip"
            key = f"{runs.ATTEMPT}{relative}"
            size = self.store.put(submission_id, key, path.read_bytes(), content_type, durable=False)
            written.append((key, size, content_type))
            if content_type == "video/mp4":
                videos.append(describe_video(path))
        shutil.rmtree(episode_folder(self._recordings, result.index), ignore_errors=True)
        if videos:
            record["videos"] = videos
        return written


def _until(specs: list[EpisodeSpec], stopping: threading.Event) -> Any:
    """The episodes, one by one, until the worker is asked to stop."""
    for spec in specs:
        if stopping.is_set():
            return
        yield spec
