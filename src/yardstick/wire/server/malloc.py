"""Keep freed memory for reuse: a server's requests allocate and free the same large buffers each time.

The server's event loop runs on a thread of its own, and glibc gives such a thread an arena that hands
freed memory back to the kernel once more than its trim threshold (128 KiB by default) lies free at its top.
Every observation then lands in memory the kernel must map and zero anew: websockets' read buffer grows to
the whole message and shrinks again, a page fault per 4 KiB, ~0.1 ms a request with two 224² images
(bench/wire.py, openpi's client against our server: 0.49 ms p50 before, 0.39 after; the openpi-style server,
whose loop runs on the main thread, paid none of it). Raising the thresholds above the largest message keeps
those pages with the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

from yardstick.wire.codec import MAX_MESSAGE_BYTES

log = logging.getLogger("yardstick.server")

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Freed memory kept before any goes back to the kernel: a few of the largest messages.
TRIM_THRESHOLD_BYTES = 4 * MAX_MESSAGE_BYTES
# Blocks below this come from the arenas, not from mmap of their own (glibc's ceiling is 32 MiB).
MMAP_THRESHOLD_BYTES = 2 * MAX_MESSAGE_BYTES


def keep_freed_memory() -> bool:
    """Raise glibc's trim and mmap thresholds for this process; False where the C library is not glibc.

    Process-wide, and set once: a process serving a policy holds its model in far more memory than this.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # no C library found, or not one with mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    kept = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
    if not kept:
        log.debug("mallopt refused the thresholds; freed memory goes back to the kernel as before")
    return kept
