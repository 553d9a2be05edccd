"""SIGTERM (a service manager stopping a server, `kill PID`) stops a server as Ctrl-C does: cleanly, and
with everything it started."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside the block, SIGTERM raises KeyboardInterrupt. Python's default for SIGTERM ends the process
    where it stands, skipping every `finally`: a server's worker processes would outlive it. (uvicorn
    captures SIGTERM while it serves and raises it again once it has shut down, to this handler; uvicorn.run
    then returns as it does after Ctrl-C.)"""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
