"""Episodes on a Ray cluster (`yardstick eval run --executor ray --ray-address auto|HOST:PORT`).

The process pool's way, with Ray actors for processes: each actor builds the benchmark and the policy once
(one CPU each, on whichever node Ray places it) and plays the episodes this driver hands it one at a time,
staying on one task while it can (`pool.Dispenser`), so a result never depends on who played it.

What Ray gives and what this adds. An actor whose process or node dies fails the call it was playing with
`RayActorError`; Ray itself retries nothing here (`max_restarts=0`, `max_task_retries=0`), because an
actor's restart would rebuild the benchmark anyway and a retried call could land twice. Instead the
episode goes back to the dispenser and a new actor is made in the dead one's place: an episode is played
again elsewhere, and counted once (a result whose episode already landed is dropped: at-least-once
delivery, deduplicated on the episode's index). An episode that has taken down `MOST_LOSSES` actors is
failed `worker_lost` rather than played forever (a policy that kills its process). How soon a dead node is
noticed is Ray's: a SIGKILLed actor process at once; a whole node once the GCS's health checks fail
(`health_check_period_ms` 3 s × `health_check_failure_threshold` 5 by default: about 15 s).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.guard import describe
from yardstick.engine.pool import Dispenser
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import BuildError, Runtime, Work
from yardstick.engine.threads import limit_threads

__all__ = ["MOST_LOSSES", "RayExecutor", "portable"]

MOST_LOSSES: Final = 3
# How long actors may take to build before the run gives up on the cluster (an interpreter, the imports,
# a simulator, on a loaded node).
BUILD_WAIT_S: Final = 600.0
POLL_S: Final = 0.5


class _Player:
    """An actor's body: a Runtime built once, then one episode a call."""

    def __init__(self, work: Work) -> None:
        limit_threads(1)  # one CPU each (the actor's reservation)
        self.runtime: Runtime | None = None
        self.failed: tuple[str, str] | None = None
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

    def play(self, episode: EpisodeSpec) -> dict[str, Any]:
        assert self.runtime is not None
        return next(iter(self.runtime.run([episode]))).to_dict()


@dataclass(eq=False)
class _Actor:
    handle: Any
    task: str | None = None  # the task it is on (the dispenser's affinity)
    ready: bool = False
    made: float = field(default_factory=time.monotonic)


class RayExecutor:
    name = "ray"

    def __init__(self, address: str = "auto", workers: int | None = None) -> None:
        self.address = address
        self.workers = workers or 0  # 0: one actor per CPU of the cluster, known once connected
        self.cold_starts: list[float] = []
        self.replayed = 0  # episodes whose actor was lost mid-episode, handed out again

    def run(self, work: Work, episodes: Sequence[EpisodeSpec]) -> Iterator[EpisodeResult]:
        import logging

        try:
            import ray
        except ModuleNotFoundError:
            raise BuildError(
                "--executor ray: Ray is not installed here: pip install 'yardstick[cluster]'",
                FailureKind.INSTALL_INCOMPLETE,
            ) from None

        started_here = not ray.is_initialized()
        if started_here:
            _answers(self.address)
            ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
        try:
            yield from self._run(ray, portable(work), episodes)
        finally:
            if started_here:
                ray.shutdown()

    def _run(self, ray: Any, work: Work, episodes: Sequence[EpisodeSpec]) -> Iterator[EpisodeResult]:
        if not episodes:
            return
        player = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(_Player)
        if not self.workers:
            self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        todo = Dispenser(episodes)
        losses: dict[int, int] = {}
        landed: set[int] = set()
        actors = [_Actor(player.remote(work)) for _ in range(min(self.workers, len(episodes)))]
        building = {actor.handle.built.remote(): actor for actor in actors}
        playing: dict[Any, tuple[_Actor, EpisodeSpec]] = {}
        deadline = time.monotonic() + BUILD_WAIT_S
        try:
            while len(landed) < len(episodes):
                for actor in actors:
                    if actor.ready and todo and all(a is not actor for a, _ in playing.values()):
                        episode = todo.next_for(actor)
                        playing[actor.handle.play.remote(episode)] = (actor, episode)
                waiting = list(building) + list(playing)
                if not waiting:
                    if not actors:
                        raise BuildError("no actor is left to play the run", FailureKind.WORKER_LOST)
                    continue
                done, _ = ray.wait(waiting, num_returns=1, timeout=POLL_S)
                for ref in done:
                    if ref in building:
                        actor = building.pop(ref)
                        self._built(ray, ref, actor, actors, player, work, building)
                        continue
                    actor, episode = playing.pop(ref)
                    try:
                        result = EpisodeResult.from_dict(ray.get(ref))
                    except ray.exceptions.RayActorError as exc:
                        actors.remove(actor)
                        losses[episode.index] = losses.get(episode.index, 0) + 1
                        if losses[episode.index] >= MOST_LOSSES:
                            landed.add(episode.index)
                            yield EpisodeResult.failed(episode, _lost(exc, losses[episode.index]))
                        else:
                            todo.put_back(episode)
                            self.replayed += 1
                        if todo:
                            fresh = _Actor(player.remote(work))
                            actors.append(fresh)
                            building[fresh.handle.built.remote()] = fresh
                        continue
                    if result.index not in landed:  # delivered at least once: counted once
                        landed.add(result.index)
                        yield result
                if building and not any(a.ready for a in actors) and time.monotonic() > deadline:
                    raise BuildError(
                        f"no actor of the cluster built the run within {BUILD_WAIT_S:g} s",
                        FailureKind.WORKER_LOST,
                    )
        finally:
            for actor in actors:
                ray.kill(actor.handle, no_restart=True)

    def _built(
        self,
        ray: Any,
        ref: Any,
        actor: _Actor,
        actors: list[_Actor],
        player: Any,
        work: Work,
        building: dict[Any, _Actor],
    ) -> None:
        try:
            built = ray.get(ref)
        except ray.exceptions.RayActorError:
            actors.remove(actor)  # its node went while it built: another takes its place
            fresh = _Actor(player.remote(work))
            actors.append(fresh)
            building[fresh.handle.built.remote()] = fresh
            return
        if isinstance(built, tuple | list):
            reason, kind = built
            raise BuildError(reason, FailureKind(kind))
        actor.ready = True
        self.cold_starts.append(float(built))


def _answers(address: str) -> None:
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
