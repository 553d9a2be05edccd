"""What a box may use, and how it is held to it.

Every box gets resource limits (rlimits), set in its first process before bwrap starts, so that every process
of the box inherits them:

    file_bytes    RLIMIT_FSIZE   the largest file it may write (a write past it fails, EFBIG)
    open_files    RLIMIT_NOFILE  descriptors a process may hold
    processes     RLIMIT_NPROC   processes of its user; the kernel does not hold uid 0 to it, which is why a
                                 platform run as root needs the control group below
    memory_bytes  RLIMIT_AS      address space a process may map, where no control group holds the box
    cpu_seconds   RLIMIT_CPU     CPU time a process may use: set for a box that does one job (a check, an
                                 install), not for one kept warm across an eval's episodes (the episode's
                                 wall-clock deadline, kept from outside, holds those)
    core dumps    none

and, where the machine lets this process make control groups (cgroup v2 with the memory and pids controllers
delegated to its own group, or cgroup v1's memory and pids hierarchies writable, as for root on a machine
with the hybrid layout), a group of its own that every process of the box is in from its first instruction:

    memory_bytes  memory.max | memory.limit_in_bytes (and swap): past it the kernel's OOM killer ends a
                  process of the box, and the platform reads that it did (`out_of_memory`)
    processes     pids.max: a fork bomb stops there, whatever uid the box runs as
    cpus          cpu.max | cpu.cfs_quota_us: the cores' worth of CPU time it may use (None: no quota)

Its writable places are RAM-backed tmpfs of fixed size: `scratch_bytes` for /tmp (its scratch and home),
`shm_bytes` for /dev/shm (PyTorch's data loaders want more than the 64 MB a container's default gives).
What a tmpfs holds is memory, so each takes at most half the box's memory (`scratch`, `shm`): a write that
fills one fails (ENOSPC) before the box's memory runs out.
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from yardstick.hosted.limits import BoxLimits
from yardstick.worker.processes import alive

CGROUP_PREFIX: Final = "yardstick-box-"
# Where each hierarchy of the machine's control groups is mounted (cgroup v1 has one per controller).
MOUNTINFO: Final = Path("/proc/self/mountinfo")
OWN_GROUPS: Final = Path("/proc/self/cgroup")
CPU_PERIOD_US: Final = 100_000


def rlimits(limits: BoxLimits, *, memory_held: bool, user_tasks: int = 0) -> list[tuple[int, int]]:
    """The (resource, value) pairs a box's first process sets. `memory_held` where a control group holds
    its memory (RLIMIT_AS would then only refuse address space that is never touched). `user_tasks`: the
    tasks the platform's user runs already, which the kernel counts against RLIMIT_NPROC before the box's
    user namespace begins its own count (so the box gets `processes` beyond them)."""
    chosen = [
        (resource.RLIMIT_FSIZE, limits.file_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_NPROC, limits.processes + user_tasks),
        (resource.RLIMIT_CORE, 0),
    ]
    if not memory_held:
        chosen.append((resource.RLIMIT_AS, limits.memory_bytes))
    if limits.cpu_seconds is not None:
        chosen.append((resource.RLIMIT_CPU, limits.cpu_seconds))
    return chosen


# --- control groups -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hierarchy:
    """One place this process may make groups in: the folder of its own group there, and which of the
    controllers (memory, pids, cpu) it holds. `v2`: the unified hierarchy."""

    folder: Path
    controllers: frozenset[str]
    v2: bool


@dataclass(frozen=True)
class Groups:
    """Where this machine lets boxes have control groups (empty: nowhere, rlimits alone hold them)."""

    hierarchies: tuple[_Hierarchy, ...] = ()

    @property
    def holds(self) -> frozenset[str]:
        return frozenset().union(*(h.controllers for h in self.hierarchies))

    def describe(self) -> str:
        if not self.hierarchies:
            return "no control groups (rlimits alone)"
        kind = "cgroup v2" if any(h.v2 for h in self.hierarchies) else "cgroup v1"
        return f"{kind} ({', '.join(sorted(self.holds))})"


_found: Groups | None = None


def groups() -> Groups:
    """Where boxes get control groups here: found once a process (by making and removing a group)."""
    global _found
    if _found is None:
        _found = _discover()
    return _found


def _discover() -> Groups:
    own = _own_groups()
    wanted = {"memory", "pids", "cpu"}
    found: list[_Hierarchy] = []
    unified = _mounts("cgroup2")
    if "" in own and unified:
        folder = Path(unified[0][0]) / own[""].lstrip("/")
        with contextlib.suppress(OSError):
            delegated = set((folder / "cgroup.subtree_control").read_text().split()) & wanted
            if {"memory", "pids"} <= delegated and _can_make(folder):
                found.append(_Hierarchy(folder, frozenset(delegated), v2=True))
    if not found:
        for mount, options in _mounts("cgroup"):
            held = frozenset(options & wanted)
            for controller in held:
                path = own.get(controller)
                if path is None:
                    continue
                folder = Path(mount) / path.lstrip("/")
                if _can_make(folder):
                    found.append(_Hierarchy(folder, held, v2=False))
                break
    # A group without both memory and pids would hold a box only half: rlimits then hold it all.
    if not {"memory", "pids"} <= frozenset().union(*(h.controllers for h in found)):
        return Groups()
    return Groups(tuple(found))


def _own_groups() -> dict[str, str]:
    """This process's group in each hierarchy, by controller ("" for the unified hierarchy)."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in OWN_GROUPS.read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    return own


def _mounts(fstype: str) -> list[tuple[str, set[str]]]:
    """The mount points of `fstype` filesystems, each with its super options (cgroup v1's controllers)."""
    found: list[tuple[str, set[str]]] = []
    with contextlib.suppress(OSError):
        for line in MOUNTINFO.read_text().splitlines():
            before, _, after = line.partition(" - ")
            parts, tail = before.split(), after.split()
            if len(parts) >= 5 and tail and tail[0] == fstype:
                options = set(tail[2].split(",")) if len(tail) > 2 else set()
                found.append((parts[4], options))
    return found


def _can_make(folder: Path) -> bool:
    probe = folder / f"{CGROUP_PREFIX}probe-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


class BoxGroup:
    """The control groups of one box: made before it starts (`make`), entered by its first process, emptied
    and removed when it ends. Where the machine has none, it holds nothing and every method does nothing."""

    def __init__(self, folders: list[tuple[Path, _Hierarchy]]) -> None:
        self.folders = folders
        # Opened now, written in the child between fork and exec (where nothing may allocate much or lock).
        self._procs = [os.open(f / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for f, _ in folders]

    @classmethod
    def make(cls, limits: BoxLimits, where: Groups | None = None) -> BoxGroup:
        where = groups() if where is None else where
        name = f"{CGROUP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        made: list[tuple[Path, _Hierarchy]] = []
        try:
            for hierarchy in where.hierarchies:
                folder = hierarchy.folder / name
                folder.mkdir()
                made.append((folder, hierarchy))
                _limit(folder, hierarchy, limits)
            return cls(made)
        except OSError:
            cls(made).remove()
            raise

    @property
    def holds_memory(self) -> bool:
        return any("memory" in hierarchy.controllers for _, hierarchy in self.folders)

    @property
    def entrances(self) -> tuple[int, ...]:
        """Each group's open `cgroup.procs`: a process enters the groups by writing its pid to each (the box's
        first process does, before it runs bwrap: `sandbox.ENTER`)."""
        return tuple(self._procs)

    def pids(self) -> list[int]:
        found: set[int] = set()
        for folder, _ in self.folders:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return sorted(found)

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the box for passing its memory limit."""
        for folder, hierarchy in self.folders:
            if "memory" not in hierarchy.controllers:
                continue
            name = "memory.events" if hierarchy.v2 else "memory.oom_control"
            with contextlib.suppress(OSError, ValueError):
                for line in (folder / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
        return False

    def kill(self, spare: Callable[[int], bool] = lambda pid: False) -> None:
        """SIGKILL every process in the groups but those `spare` keeps."""
        for pid in self.pids():
            if not spare(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self, wait_s: float = 5.0) -> None:
        """Kill what is left and remove the groups (a group is removed once its last process is gone)."""
        for fd in self._procs:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._procs = []
        deadline = time.monotonic() + wait_s
        for folder, _ in reversed(self.folders):
            while True:
                self.kill()
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
        self.folders = []


def _limit(folder: Path, hierarchy: _Hierarchy, limits: BoxLimits) -> None:
    def write(name: str, value: str) -> None:
        (folder / name).write_text(value)

    if "memory" in hierarchy.controllers:
        if hierarchy.v2:
            write("memory.max", str(limits.memory_bytes))
            with contextlib.suppress(OSError):
                write("memory.swap.max", "0")
        else:
            write("memory.limit_in_bytes", str(limits.memory_bytes))
            with contextlib.suppress(OSError):  # swap accounting may be off
                write("memory.memsw.limit_in_bytes", str(limits.memory_bytes))
    if "pids" in hierarchy.controllers:
        write("pids.max", str(limits.processes))
    if "cpu" in hierarchy.controllers and limits.cpus is not None:
        quota = max(1000, int(limits.cpus * CPU_PERIOD_US))
        if hierarchy.v2:
            write("cpu.max", f"{quota} {CPU_PERIOD_US}")
        else:
            write("cpu.cfs_period_us", str(CPU_PERIOD_US))
            write("cpu.cfs_quota_us", str(quota))


def remove_leftovers() -> int:
    """Remove the groups of boxes whose process died without removing them (a worker killed outright):
    each group's name carries the pid that made it. Returns how many went."""
    removed = 0
    for hierarchy in groups().hierarchies:
        with contextlib.suppress(OSError):
            for folder in hierarchy.folder.iterdir():
                maker = folder.name[len(CGROUP_PREFIX) :].split("-", 1)[0]
                if not folder.name.startswith(CGROUP_PREFIX) or not maker.isdigit() or alive(int(maker)):
                    continue
                BoxGroup([(folder, hierarchy)]).remove()
                removed += 1
    return removed
