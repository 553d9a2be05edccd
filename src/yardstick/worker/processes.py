"""What a process needs to know of the processes around it, so that stopping one stops all it started:
its descendants (read from /proc), dying with its parent (Linux `PR_SET_PDEATHSIG`, and a watch on the
parent's pid where that is missing or came too late), and adopting its orphaned descendants
(`PR_SET_CHILD_SUBREAPER`), so a supervisor can end what its workers left behind."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    """prctl(2) on Linux; False where there is none (another system) or it refused."""
    if not os.path.exists("/proc/self"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans: a grandchild whose parent died becomes our
    child rather than init's, so we can still find and stop it."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(parent: int, on_parent_death: Callable[[], None], every_s: float = 1.0) -> None:
    """Have `on_parent_death` run when `parent` dies: the kernel sends SIGTERM at once where it can (its
    handler is this process's own), and a thread that watches the parent's pid covers the rest (no prctl,
    or a parent that died before it was set)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(every_s)
        on_parent_death()

    threading.Thread(target=watch, name="yardstick-parent-watch", daemon=True).start()


class Stat(NamedTuple):
    """What /proc/<pid>/stat says of a process that these functions read."""

    name: str
    state: str
    parent: int


def _table() -> dict[int, Stat]:
    """Every process now, from one read of /proc (empty where there is none)."""
    table: dict[int, Stat] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The state and parent follow the command's name, which may hold spaces and parentheses.
            stat = (entry / "stat").read_text()
            state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
            table[int(entry.name)] = Stat(stat[stat.index("(") + 1 : stat.rindex(")")], state, int(parent))
    return table


def _below(table: dict[int, Stat]) -> dict[int, list[int]]:
    """Each process's children, by its pid."""
    below: dict[int, list[int]] = {}
    for child, stat in table.items():
        below.setdefault(stat.parent, []).append(child)
    return below


def children(pid: int) -> list[int]:
    """The pids whose parent is `pid`."""
    return [child for child, stat in _table().items() if stat.parent == pid]


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, children first."""
    below = _below(_table())
    found: list[int] = []
    frontier = [pid]
    while frontier:
        frontier = [child for parent in frontier for child in below.get(parent, [])]
        found += frontier
    return found


def kill_all(pids: list[int]) -> None:
    """SIGKILL each of `pids` that is still there."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def zombie_children() -> list[tuple[int, str]]:
    """This process's children that have exited and wait to be reaped: (pid, command name)."""
    own = os.getpid()
    return [(pid, stat.name) for pid, stat in _table().items() if stat.state == "Z" and stat.parent == own]


@dataclass(frozen=True)
class Census:
    """What runs below a process: its boxes (bwraps), the processes inside them, and its descendants that
    have exited and wait to be reaped (defunct: none, where every box is reaped)."""

    boxes: int
    box_processes: int
    defunct: int

    def as_json(self) -> dict[str, int]:
        return {"boxes": self.boxes, "box_processes": self.box_processes, "defunct": self.defunct}


def census(root: int) -> Census:
    """Count the boxes and defunct processes below `root`, from one read of /proc."""
    table = _table()
    below = _below(table)
    boxes = box_processes = defunct = 0
    frontier: list[tuple[int, bool]] = [(root, False)]
    while frontier:
        pid, boxed = frontier.pop()
        for child in below.get(pid, []):
            name, state, _ = table[child]
            is_box = name == "bwrap" and not boxed
            boxes += is_box
            box_processes += boxed
            defunct += state == "Z"
            frontier.append((child, boxed or is_box))
    return Census(boxes, box_processes, defunct)


def tasks_of(uid: int) -> int:
    """How many tasks (processes and their threads) run as `uid` now: what the kernel counts against a
    process's RLIMIT_NPROC."""
    count = 0
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError):
            if entry.stat().st_uid == uid:
                status = (entry / "status").read_text()
                threads = next(line for line in status.splitlines() if line.startswith("Threads:"))
                count += int(threads.split()[1])
    return count


def alive(pid: int) -> bool:
    """Whether a process `pid` exists (a signal 0 reaches it, or exists and is not ours to signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
