"""A pool of local worker processes, one per core by default.

Each worker builds the benchmark and the policy once and asks the supervisor (this process) for episodes
one at a time, so a long episode never holds others back and which worker plays an episode changes
nothing in its result. The supervisor replaces a worker that dies or stays inside one call past its limit
(a hang in C code that the in-process alarm cannot cut), failing the episodes it held with the reason.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from typing import Any, Protocol

from yardstick.engine.cpu_wait import Overdue
from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.guard import Call, describe
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import BuildError, Runtime, Work
from yardstick.engine.threads import limit_threads, share_of_cores

# How long past a call's own limit the supervisor waits for the worker's alarm before it kills the worker.
HANG_GRACE_S = 5.0
POLL_S = 0.5


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class SharedBeacon:
    """A worker process's beacon, in memory the supervisor shares: the deadline of the call in progress and
    the call's name, so a worker that dies in a call is reported with the call it was in."""

    NAME_BYTES = 120

    def __init__(self, context: Any) -> None:
        self._deadline: Synchronized[float] = context.Value("d", 0.0, lock=False)
        self._name = context.Array("c", self.NAME_BYTES, lock=False)

    @property
    def value(self) -> float:
        return float(self._deadline.value)

    @value.setter
    def value(self, deadline: float) -> None:
        self._deadline.value = deadline

    def naming(self, call: Call) -> None:
        self._name.value = call.name.encode()[: self.NAME_BYTES - 1]

    def call_name(self) -> str:
        """The call in progress, or the last one (a dead worker's beacon says where it died)."""
        return bytes(self._name.value).decode(errors="replace")


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    conn: Connection
    beacon: SharedBeacon
    spawned: float
    overdue: Overdue
    ready: bool = False
    held: set[int] = field(default_factory=set)
    task: str | None = None


class OnTask(Protocol):
    """A player the dispenser keeps on one task: a pool's process, a Ray actor."""

    task: str | None


class Dispenser:
    """Hands out episodes so that a worker stays on one task while it has episodes left, then moves to
    the task with the most left: a benchmark that builds a world per task builds each in as few workers
    as it can. Results do not depend on who plays what."""

    def __init__(self, episodes: Sequence[EpisodeSpec]) -> None:
        self._by_task: dict[str, deque[EpisodeSpec]] = {}
        for episode in episodes:
            self._by_task.setdefault(episode.task, deque()).append(episode)

    def __bool__(self) -> bool:
        return bool(self._by_task)

    def put_back(self, episode: EpisodeSpec) -> None:
        """An episode handed out whose player was lost before it ended: it is handed out again first."""
        self._by_task.setdefault(episode.task, deque()).appendleft(episode)

    def next_for(self, worker: OnTask) -> EpisodeSpec:
        task = (
            worker.task
            if worker.task in self._by_task
            else max(self._by_task, key=lambda t: len(self._by_task[t]))
        )
        queue = self._by_task[task]
        episode = queue.popleft()
        if not queue:
            del self._by_task[task]
        worker.task = task
        return episode


class PoolExecutor:
    name = "process pool"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or default_workers()
        self.cold_starts: list[float] = []
        self._context = mp.get_context("spawn")

    def close(self) -> None:
        """Nothing is kept between runs: each run's processes end with it."""

    def run(self, work: Work, episodes: Sequence[EpisodeSpec]) -> Iterator[EpisodeResult]:
        todo = Dispenser(episodes)
        by_index = {e.index: e for e in episodes}
        remaining = len(episodes)
        pool = [self._spawn(work) for _ in range(min(self.workers, remaining))]
        try:
            while remaining:
                for result in self._poll(work, pool, todo, by_index):
                    remaining -= 1
                    yield result
                if remaining and not pool:
                    pool.append(self._spawn(work))
        finally:
            _stop(pool)

    def _poll(
        self, work: Work, pool: list[_Worker], todo: Dispenser, by_index: dict[int, EpisodeSpec]
    ) -> Iterator[EpisodeResult]:
        waitables: list[Any] = [w.conn for w in pool] + [w.process.sentinel for w in pool]
        ready = set(wait(waitables, timeout=POLL_S))
        for worker in list(pool):
            lost: str | None = None
            while worker.conn in ready or worker.conn.poll():
                ready.discard(worker.conn)
                try:
                    message = worker.conn.recv()
                except (EOFError, OSError):
                    lost = _death(worker)
                    break
                yield from self._handle(worker, message, todo)
            if lost is None and worker.process.sentinel in ready and not worker.conn.poll():
                lost = _death(worker)
            if lost is None:
                lost = _stuck(worker)
            if lost is not None:
                pool.remove(worker)
                if not worker.ready:
                    raise BuildError(
                        f"a worker process could not build the run: {lost}", FailureKind.WORKER_LOST
                    )
                failure = Failed(lost, FailureKind.WORKER_LOST)
                for index in sorted(worker.held):
                    yield EpisodeResult.failed(by_index[index], failure)
                if todo:
                    pool.append(self._spawn(work))

    def _handle(self, worker: _Worker, message: tuple[Any, ...], todo: Dispenser) -> Iterator[EpisodeResult]:
        kind = message[0]
        if kind == "ready":
            # From the process's start: its interpreter, its imports and its build, as a user waits for them.
            worker.ready = True
            self.cold_starts.append(time.monotonic() - worker.spawned)
        elif kind == "build_failed":
            raise BuildError(message[1], FailureKind(message[2]))
        elif kind == "want":
            if todo:
                episode = todo.next_for(worker)
                worker.held.add(episode.index)
                worker.conn.send(("episode", episode))
            else:
                worker.conn.send(("stop",))
        elif kind == "result":
            result = EpisodeResult.from_dict(message[1])
            worker.held.discard(result.index)
            yield result

    def _spawn(self, work: Work) -> _Worker:
        parent, child = self._context.Pipe()
        beacon = SharedBeacon(self._context)
        threads = share_of_cores(self.workers, default_workers())
        process = self._context.Process(target=_serve, args=(work, child, beacon, threads), daemon=True)
        spawned = time.monotonic()
        process.start()
        child.close()
        return _Worker(
            process=process,
            conn=parent,
            beacon=beacon,
            spawned=spawned,
            overdue=Overdue(process.pid, HANG_GRACE_S),
        )


def signal_name(number: int) -> str:
    """`SIGSEGV (signal 11)`: the name a user looks up, and the number a log shows."""
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


def _death(worker: _Worker) -> str:
    worker.process.join(timeout=1)
    code = worker.process.exitcode
    if code is not None and code < 0:
        how = f"was killed by {signal_name(-code)}"
    else:
        how = f"exited with status {code}"
    # A process killed in a call never cleared its deadline: the beacon still names the call.
    where = f" in {worker.beacon.call_name()}" if worker.beacon.value and worker.beacon.call_name() else ""
    return f"the worker process playing it {how}{where}"


def _stuck(worker: _Worker) -> str | None:
    if worker.overdue.stuck(worker.beacon.value):
        worker.process.kill()
        worker.process.join(timeout=5)
        return (
            "a benchmark or policy call ran past its limit and did not yield to the alarm; "
            "its worker was replaced"
        )
    return None


def _stop(pool: list[_Worker]) -> None:
    for worker in pool:
        with contextlib.suppress(OSError):
            worker.conn.send(("stop",))
    deadline = time.monotonic() + 2
    for worker in pool:
        worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(timeout=5)
        worker.conn.close()


def _serve(work: Work, conn: Connection, beacon: SharedBeacon, threads: int) -> None:
    """A worker's life: build once, then play episodes as the supervisor hands them out."""
    # Ctrl-C reaches the whole process group; the supervisor decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Its share of the cores, before anything is built: the workers' library threads would otherwise spin
    # on each other's cores (threads.py).
    limit_threads(threads)
    try:
        runtime = Runtime(work, beacon)
    except BuildError as failure:
        conn.send(("build_failed", failure.reason, failure.kind.value))
        return
    except Exception as exc:
        conn.send(("build_failed", describe("building the run", exc), FailureKind.WORKER_LOST.value))
        return
    conn.send(("ready", runtime.cold_start_s))

    def handed_out() -> Iterator[EpisodeSpec]:
        while True:
            conn.send(("want",))
            message = conn.recv()
            if message[0] != "episode":
                return
            yield message[1]

    try:
        for result in runtime.run(handed_out()):
            conn.send(("result", result.to_dict()))
    except (EOFError, BrokenPipeError):
        pass  # the supervisor is gone; so is the point of going on
    finally:
        runtime.close()
