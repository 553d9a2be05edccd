"""Cut a benchmark or policy call that runs past its limit, and say who failed and how.

A call is cut by SIGALRM, which Python turns into an exception between bytecodes: that stops a policy
sleeping on a socket or looping in Python. A call stuck inside C code never returns to the interpreter;
for that the pool's supervisor watches `busy_since` from outside and replaces the whole process.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol, TypeVar

_T = TypeVar("_T")


class CallTimeout(Exception):
    """A call ran past its limit."""


class CallFailed(Exception):
    """A benchmark or policy call that raised, timed out, or answered something malformed. `reason` is
    the sentence the episode's result carries."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Beacon(Protocol):
    """Where a process says by when its current guarded call must have ended (time.monotonic; 0: it is not
    in a call, or the call has no limit)."""

    value: float


def describe(what: str, exc: BaseException) -> str:
    """`what` raised `exc`, with the place in the user's code it came from."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" (at {os.path.basename(last.filename)}:{last.lineno})"
    message = str(exc) or type(exc).__name__
    return f"{what} raised {type(exc).__name__}: {message}{where}"


class Guard:
    """Runs calls under a time limit. Use as a context manager around the work: it installs the alarm
    handler on entry (main thread only) and restores the previous one on exit."""

    def __init__(self, seconds: float | None, beacon: Beacon | None = None) -> None:
        self.seconds = seconds
        self.beacon = beacon
        self._armed = False
        self._inside = False
        self._previous: Any = None

    def __enter__(self) -> Guard:
        usable = (
            self.seconds is not None
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )
        if usable:
            self._previous = signal.signal(signal.SIGALRM, self._on_alarm)
            self._armed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
            self._armed = False

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        # An alarm that lands just after the call returned must not fail the caller.
        if self._inside:
            raise CallTimeout()

    def call(self, what: str, fn: Callable[..., _T], *args: Any) -> _T:
        """`fn(*args)`, or CallFailed naming `what` when it raises or runs past the limit."""
        beacon = self.beacon
        if beacon is not None and self.seconds is not None:
            beacon.value = time.monotonic() + self.seconds
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, self.seconds or 0)
        self._inside = True
        try:
            result = fn(*args)
            self._inside = False
            return result
        except CallTimeout:
            raise CallFailed(f"{what} ran past its {self.seconds:g} s limit and was cut") from None
        except (KeyboardInterrupt, SystemExit, CallFailed):
            raise
        except Exception as exc:
            raise CallFailed(describe(what, exc)) from exc
        finally:
            self._inside = False
            if self._armed:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if beacon is not None:
                beacon.value = 0.0
