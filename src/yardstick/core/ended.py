"""What a process has read of runs that ended, and what it rendered from them, kept for the next read.

A run ends once, in the transaction that settles its credits and takes its unplayed episodes off the queue
(`Lifecycle.finish`/`fail`, `Runs.cancel`); its `result.json` and `diagnostics.json` are recorded before or in
that transaction, and nothing writes to the run, its episodes, its artifacts or its hold after. So what was
read of an ended run holds for as long as the process lives, and every process may keep it without telling
the others: a finished run's `submissions.get` or Sequences report, polled by a client or a page, costs no
query after the first. What is kept must be what the database says, not what a caller may see: each read
still checks the caller against the run."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from yardstick.store.states import ENDED_RUNS

T = TypeVar("T")

# Ended runs (and renderings of them) a process keeps, the least recently read dropped first: a run row with
# its plan is a few kilobytes to a few hundred, a rendered report no more than its run.
KEPT = 512


def has_ended(status: str) -> bool:
    return status in ENDED_RUNS


class EndedRuns:
    """A bounded, thread-safe memo keyed by anything hashable that names an ended run's reading (the run's
    id first by convention: `("run", id)`, `("sequences.eval_report", id, base_url)`)."""

    def __init__(self, most: int = KEPT) -> None:
        self.most = most
        self._kept: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def keep(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.most:
                self._kept.popitem(last=False)

    def kept(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value kept for `key`, else `make()` kept and returned. Two threads that miss at once both
        make it; the values are equal, and the second is kept."""
        found = self.get(key)
        if found is None:
            found = make()
            self.keep(key, found)
        return found
