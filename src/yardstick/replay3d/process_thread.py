"""`ProcessThread`: work handed to one thread of this process, made when first asked.

The replay's scenes and its files are found and made off the episode's thread, each on a thread of its own.
A process forked from one that had such a thread (a pool's worker) inherits no thread, and perhaps the lock
guarding it held at the fork by another thread: so the child forgets both, and makes its own thread when it
first hands it work; what was handed to the parent's thread before the fork and not yet done never
completes in the child. It lives here, in the lowest layer, because both users sit on it: the scenes'
(mujoco_poses) and the replay files' (engine.files_ahead).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_all: weakref.WeakSet[ProcessThread] = weakref.WeakSet()


class ProcessThread:
    """One thread named `name`, started when `submit` is first called; calls run on it one at a time."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        _all.add(self)

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """`fn(*args, **kwargs)`, run on the thread; its Future."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=self.name)
            return self._executor.submit(fn, *args, **kwargs)

    @property
    def started(self) -> bool:
        """Whether this process has made the thread yet."""
        return self._executor is not None

    def _forget(self) -> None:
        self._executor, self._lock = None, threading.Lock()


def _forget_all() -> None:
    for thread in list(_all):
        thread._forget()


os.register_at_fork(after_in_child=_forget_all)
