"""SIGTERM (a service manager stopping a server, `kill PID`) and SIGINT (Ctrl-C) stop a server cleanly, with
everything it started."""

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
    then returns as it does after Ctrl-C.) SIGINT raises it too, even where the process was started with
    SIGINT ignored (a background job of a script): Python then installs no handler of its own, and a server
    that says Ctrl-C stops it would ignore the signal, as uvicorn's `yardstick server` does not."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
