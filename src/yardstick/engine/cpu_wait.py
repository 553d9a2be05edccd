"""How long a process's main thread has waited for a CPU: the kernel's run-queue delay, from
/proc/<pid>/schedstat (its second field, in nanoseconds). A call's limit is a limit on the work the call did,
not on the machine's load: the time a runnable call spent waiting for a CPU is added to its limit, so on a
loaded machine a call runs slower rather than being cut for the machine's sake."""

from __future__ import annotations

import time


def run_queue_wait_s(pid: int | None = None) -> float:
    """Seconds the main thread of process `pid` (this one by default) has spent runnable but not running,
    since it started; 0.0 where the kernel does not say (no /proc, no scheduler statistics)."""
    try:
        with open(f"/proc/{pid or 'self'}/schedstat", "rb") as stats:
            return int(stats.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


class Overdue:
    """Watches one process's guarded calls from outside (a supervisor, a vigil thread): a call is stuck once
    it is past its deadline by `grace_s` plus what the process waited for a CPU since the deadline was first
    seen, so a call on a loaded machine is not taken for a hung one."""

    def __init__(self, pid: int | None, grace_s: float) -> None:
        self.pid = pid
        self.grace_s = grace_s
        self._deadline = 0.0
        self._waited_then = 0.0

    def stuck(self, deadline: float) -> bool:
        """Whether the call whose deadline (time.monotonic) is `deadline` is stuck; 0: no call in progress."""
        if not deadline:
            self._deadline = 0.0
            return False
        waited = run_queue_wait_s(self.pid)
        if deadline != self._deadline:  # a new call, or its limit stretched by the process itself
            self._deadline, self._waited_then = deadline, waited
        return time.monotonic() > deadline + self.grace_s + (waited - self._waited_then)
