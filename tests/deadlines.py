"""Where every wait of the suite gets its deadline: a generous base for an idle machine, times one factor
for this machine now. The factor is `YARDSTICK_TEST_SLOW` (a float) where it is set, else the load average
per core when the session starts; never below 1. A server, worker, cluster or box the suite starts on a loaded
machine comes up later, not never: its wait grows with the load rather than failing the test."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx

T = TypeVar("T")

# How often a wait looks again: short, since what it waits for is on this machine.
POLL_S = 0.05


def _factor() -> float:
    said = os.environ.get("YARDSTICK_TEST_SLOW")
    if said:
        try:
            factor = float(said)
        except ValueError:
            raise ValueError(f"YARDSTICK_TEST_SLOW must be a number, not {said!r}") from None
        if not factor > 0:
            raise ValueError(f"YARDSTICK_TEST_SLOW must be above 0, not {said!r}")
        return max(1.0, factor)
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform: trust the base
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


SLOW = _factor()


def patience(base_s: float) -> float:
    """`base_s`, the wait an idle machine needs with room to spare, stretched for this machine's load."""
    return base_s * SLOW


def give_up_at(base_s: float) -> float:
    """The `time.monotonic()` past which a wait of `base_s` (stretched) gives up."""
    return time.monotonic() + patience(base_s)


def until(predicate: Callable[[], T], base_s: float, what: str, every: float = POLL_S) -> T:
    """`predicate()`'s first truthy answer, polled until `patience(base_s)` has passed; then an AssertionError
    naming `what` was waited for, and for how long."""
    deadline = give_up_at(base_s)
    while True:
        answer = predicate()
        if answer:
            return answer
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {patience(base_s):g} s waiting for {what}")
        time.sleep(every)


def waiting(event: threading.Event, base_s: float, what: str) -> None:
    """Wait for `event` as `until` waits for a predicate."""
    if not event.wait(patience(base_s)):
        raise AssertionError(f"timed out after {patience(base_s):g} s waiting for {what}")


def answering(url: str, process: subprocess.Popen[bytes], log: Path, base_s: float = 60) -> httpx.Response:
    """`url`'s first 2xx answer from a server `process` this test started (its output in `log`). The wait
    fails at once, with the log, when the process exits; after `patience(base_s)` when it never answers."""
    deadline = give_up_at(base_s)
    while True:
        if process.poll() is not None:
            raise AssertionError(f"{process.args} exited {process.returncode} at start:\n{log.read_text()}")
        try:
            return httpx.get(url, timeout=2).raise_for_status()
        except httpx.HTTPError:
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"{url} did not answer within {patience(base_s):g} s:\n{log.read_text()}")
        time.sleep(POLL_S * 4)  # a server's own start: nothing to wait on but its port
