"""A check run in a child forked from the test's process: what a pool worker forked from it would see."""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Callable


def holds_in_a_forked_child(check: Callable[[], bool], deadline_s: float) -> bool:
    """Whether `check()` answered True in a forked child within `deadline_s` (a child that raised, answered
    False or hung: False; a hung child is killed)."""
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            code = 0 if check() else 2
        finally:
            os.write(writer, bytes([code]))
            os._exit(0)
    os.close(writer)
    try:
        return bool(select.select([reader], [], [], deadline_s)[0]) and os.read(reader, 1) == b"\x00"
    finally:
        os.close(reader)
        if os.waitpid(child, os.WNOHANG) == (0, 0):  # a child still there (hung, or about to leave)
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
