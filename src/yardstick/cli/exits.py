"""Exit statuses: whose fault a failure is, as the platform contract's CLI taxonomy has it."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    DONE = 0
    CALLER = 1  # a bad reference, a refused declaration, a policy or benchmark of the caller's that failed
    USAGE = 2  # the arguments are wrong before anything runs
    PLATFORM = 3  # our own fault: an internal error, a worker lost
    GATE = 8  # the run finished and a --gate was not met
    UNDECIDED = 9  # --until decided reached --max-trials with a --gate (or a comparison) still undecided
    INTERRUPTED = 130  # Ctrl-C, as shells report it
