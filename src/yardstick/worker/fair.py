"""A few threads shared fairly between owners (orgs): one owner's slow jobs cannot hold them all.

The race this closes: with a first-come pool, two slow builds of one org (an import that takes minutes) hold
both builders, and every other org's registration waits behind them. Here a free thread takes the oldest job
of the owner running the fewest jobs now, and no owner runs more than `per_owner` at once (one less than the
threads, when there are several): another org's job always finds a thread within one job's time, and an
owner alone still uses what it may.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Final

IDLE_WAIT_S: Final = 1.0
log = logging.getLogger("yardstick.fair")


class FairPool:
    def __init__(self, workers: int, name: str, *, per_owner: int | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers: a pool has at least one thread, not {workers}")
        self.per_owner = per_owner or max(1, workers - 1)
        self._waiting: dict[Hashable, deque[tuple[int, Callable[[], None]]]] = {}
        self._running: dict[Hashable, int] = {}
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}-{n}", daemon=True) for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, owner: Hashable, job: Callable[[], None]) -> None:
        """Run `job` on a thread when its owner's turn comes. A job's exception is its own to handle."""
        with self._changed:
            if self._closed:
                raise RuntimeError("the pool is shut down")
            self._waiting.setdefault(owner, deque()).append((next(self._order), job))
            self._changed.notify()

    def running(self, owner: Hashable) -> int:
        with self._changed:
            return self._running.get(owner, 0)

    def shutdown(self) -> None:
        """Take no more jobs and drop those waiting; jobs running finish on their own threads."""
        with self._changed:
            self._closed = True
            self._waiting.clear()
            self._changed.notify_all()

    def _next(self) -> tuple[Hashable, Callable[[], None]] | None:
        """The job a free thread takes now, or None: the owner running fewest, then the oldest job."""
        ready = [
            (self._running.get(owner, 0), jobs[0][0], owner)
            for owner, jobs in self._waiting.items()
            if jobs and self._running.get(owner, 0) < self.per_owner
        ]
        if not ready:
            return None
        _, _, owner = min(ready, key=lambda entry: (entry[0], entry[1]))
        jobs = self._waiting[owner]
        _, job = jobs.popleft()
        if not jobs:
            del self._waiting[owner]
        self._running[owner] = self._running.get(owner, 0) + 1
        return owner, job

    def _serve(self) -> None:
        while True:
            with self._changed:
                taken = self._next()
                while taken is None:
                    if self._closed:
                        return
                    self._changed.wait(IDLE_WAIT_S)
                    taken = self._next()
            owner, job = taken
            try:
                job()
            except Exception:  # a job's own fault: it must not take its thread with it
                log.exception("a job of %s failed", owner)
            finally:
                with self._changed:
                    self._running[owner] -= 1
                    if not self._running[owner]:
                        del self._running[owner]
                    self._changed.notify_all()
