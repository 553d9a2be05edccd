"""What a box of an org's code may use: `BoxLimits`, plain values an install's settings carry. How a box is
held to them (rlimits, control groups, tmpfs sizes) is the execution plane's (`worker.boxes.groups`):

    memory_bytes   a memory control group where the machine gives one, else RLIMIT_AS
    processes      a pids control group, and RLIMIT_NPROC (which the kernel does not apply to uid 0)
    file_bytes     RLIMIT_FSIZE: the largest file a box may write
    open_files     RLIMIT_NOFILE
    scratch_bytes  the size of its /tmp (a tmpfs; at most half its memory: `scratch`)
    shm_bytes      the size of its /dev/shm (a tmpfs; at most half its memory: `shm`)
    cpus           a CPU quota in cores (None: none)
    cpu_seconds    RLIMIT_CPU, for a box that does one job (a check, an install)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Final

GiB: Final = 1024**3
MiB: Final = 1024**2


@dataclass(frozen=True)
class BoxLimits:
    """What one box may use (see the module's docstring for how each is enforced)."""

    memory_bytes: int = 8 * GiB
    processes: int = 512
    file_bytes: int = 4 * GiB
    open_files: int = 4096
    scratch_bytes: int = 2 * GiB
    shm_bytes: int = 1 * GiB
    cpus: float | None = None
    cpu_seconds: int | None = None

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "processes", "file_bytes", "open_files", "scratch_bytes", "shm_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"{name}: a box's limit is a positive whole number, not {getattr(self, name)}"
                )
        if self.cpus is not None and self.cpus <= 0:
            raise ValueError(f"cpus: a box's CPU quota is above 0 cores, not {self.cpus}")
        if self.cpu_seconds is not None and self.cpu_seconds < 1:
            raise ValueError(f"cpu_seconds: a box's CPU time is at least 1 s, not {self.cpu_seconds}")

    @property
    def scratch(self) -> int:
        """The size of the box's /tmp: `scratch_bytes`, or half its memory where that is less."""
        return min(self.scratch_bytes, self.memory_bytes // 2)

    @property
    def shm(self) -> int:
        """The size of the box's /dev/shm: `shm_bytes`, or half its memory where that is less."""
        return min(self.shm_bytes, self.memory_bytes // 2)

    def with_cpu_seconds(self, seconds: float) -> BoxLimits:
        """The same limits for a box that does one job of at most `seconds` of wall time: CPU time to match
        (every core busy all that time)."""
        cores = self.cpus or float(os.cpu_count() or 1)
        return replace(self, cpu_seconds=max(1, int(seconds * cores) + 1))

    def describe(self) -> str:
        """The limits as a person reads them (a reason that names the one a box hit quotes these)."""
        cpus = f"{self.cpus:g} cores" if self.cpus else "all cores"
        return (
            f"memory {size(self.memory_bytes)}, {self.processes} processes, files up to "
            f"{size(self.file_bytes)}, scratch {size(self.scratch)}, /dev/shm {size(self.shm)}, {cpus}"
        )


def size(value: int) -> str:
    return f"{value / GiB:g} GiB" if value >= GiB else f"{value / MiB:g} MiB"
