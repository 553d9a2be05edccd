"""Running someone else's code in a box: bubblewrap (`bwrap`), as Debian's `bubblewrap` package installs it.

A box sees the machine's root read-only, a fresh empty /tmp, and only the folders it is given: its code
read-only, a scratch folder writable, the folders the platform hides masked by empty ones. It has no
network (a namespace of its own with only a loopback), its own process namespace (it sees its own
processes, and they all die with it: `--die-with-parent`, and killing the box's bwrap ends the namespace),
no capabilities (so it cannot remount what it was given read-only), a session of its own (it cannot type
into our terminal), and an environment cleared, then set from what the caller hands it (secrets arrive
this way). Folders are bound at the paths they have outside, so a path (a unix socket's, a traceback's
file) means the same inside and out — but for `mounts`, folders bound read-only at a place of the box's own (a
benchmark's volumes at /assets). Starting one costs about 0.05 s.

The box runs with the user the platform runs as, less every capability: it can read what that user can
read (minus `hidden`), so run the platform as an unprivileged user and hide its data folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

from yardstick.hosted.errors import SandboxUnavailable

INSTALL_HINT: Final = (
    "boxing uploaded code needs bubblewrap: install Debian's package (apt-get install bubblewrap), "
    "and allow user namespaces (sysctl kernel.unprivileged_userns_clone=1 where the kernel asks for it)"
)
BASE_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
# What a box's output may hold before the rest is dropped (a box that prints without end fills nothing).
MAX_OUTPUT_BYTES: Final = 1024 * 1024
PIPE: Final = subprocess.PIPE


@dataclass(frozen=True)
class Box:
    """How a boxed process sees the machine. `readable` folders are bound read-only and `writable` ones
    read-write, each at its own path; `hidden` ones are masked by an empty folder; `env` is its whole
    environment beside a few neutral defaults (PATH, HOME, LANG); `network` opens the machine's network to
    it (only for installing packages); `cwd` is where it starts (default: its first writable folder);
    `devices` are device files it may use (a GPU's /dev/dri/renderD128), beside /dev's null, zero, random;
    `mounts` are folders bound read-only each at its own place in the box ((folder, place): a place that need
    not exist on the machine); `python` is the interpreter a Python box runs, shown read-only with what it
    needs (`python_folders`)."""

    readable: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    devices: tuple[Path, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    network: bool = False
    cwd: Path | None = None
    mounts: tuple[tuple[Path, str], ...] = ()
    python: str | None = None

    def shown(self) -> tuple[Path, ...]:
        """The folders the box reads: those it was given, and its interpreter's."""
        return (*self.readable, *(python_folders(self.python) if self.python else ()))


# The folder Yardstick is imported from: site-packages, or a checkout's src/ for an editable install.
YARDSTICK_ROOT: Final = Path(__file__).resolve().parents[2]


def python_folders(python: str) -> tuple[Path, ...]:
    """What a box running `python` must see even where it hides the machine's own folders (a fresh /tmp):
    the interpreter's (a virtual environment's root for its bin/python), this process's environment (whose
    packages a prepared environment reads), and where Yardstick is imported from (a checkout's src/ when
    installed editable: an install under /tmp found nothing to run in its boxes)."""
    own = (Path(os.path.abspath(python)).parent.parent, Path(sys.prefix), YARDSTICK_ROOT)
    return tuple(dict.fromkeys(own))


def bwrap() -> str:
    """The path of bwrap, or SandboxUnavailable saying what to install."""
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(INSTALL_HINT)
    return found


def command(box: Box, argv: Sequence[str]) -> list[str]:
    """The bwrap command line that runs `argv` in `box`."""
    args = [bwrap(), "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if box.network:
        args.append("--share-net")
    args += _root(bool(box.mounts))
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # Parents before children: a folder bound inside a hidden one shows in it, and one hidden inside a bound
    # one (the platform's data folder inside the interpreter's environment, say) stays hidden.
    places = [("--tmpfs", _absolute(p, "hidden")) for p in box.hidden]
    places += [("--ro-bind", _absolute(p, "readable")) for p in box.shown()]
    places += [("--bind", _absolute(p, "writable")) for p in box.writable]
    for how, path in sorted(places, key=lambda place: len(place[1].parts)):
        args += [how, str(path)] if how == "--tmpfs" else [how, str(path), str(path)]
    for device in box.devices:
        args += ["--dev-bind", str(_absolute(device, "devices")), str(device)]
    for folder, place in sorted(box.mounts, key=lambda mount: len(Path(mount[1]).parts)):
        args += ["--ro-bind", str(_absolute(folder, "mounts")), str(_absolute(place, "mounts"))]
    if box.mounts:
        args += ["--remount-ro", "/"]
    home = str(box.writable[0]) if box.writable else "/tmp"
    env = {"PATH": BASE_PATH, "HOME": home, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", **box.env}
    args.append("--clearenv")
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--chdir", str(box.cwd or home), "--", *argv]
    return args


# Made afresh in a box whatever the machine has there.
_OWN: Final = frozenset({"dev", "proc", "tmp"})


def _root(own_places: bool) -> list[str]:
    """How a box sees the machine's root: bound whole, read-only — or, for a box with places of its own (which
    a read-only root could not hold: bwrap makes a mount's folder before binding it), a fresh root holding
    each of the machine's top entries bound read-only (links as links), made read-only itself once the places
    are bound. Either way the box reads the same files at the same paths."""
    if not own_places:
        return ["--ro-bind", "/", "/"]
    args: list[str] = []
    for entry in sorted(Path("/").iterdir()):
        if entry.name in _OWN:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry), str(entry)]
        elif entry.is_dir() or entry.is_file():
            args += ["--ro-bind", str(entry), str(entry)]
    return args


def start(
    box: Box,
    argv: Sequence[str],
    *,
    stdin: int | IO[bytes] | None = subprocess.DEVNULL,
    stdout: int | IO[bytes] | None = subprocess.PIPE,
    stderr: int | IO[bytes] | None = subprocess.PIPE,
) -> subprocess.Popen[bytes]:
    """Start `argv` in `box`. Stop it with `stop`, which ends everything it started."""
    for folder in (*box.shown(), *box.writable, *(folder for folder, _ in box.mounts)):
        if not Path(folder).is_dir():
            raise FileNotFoundError(f"{folder}: a folder a box is given must exist")
    return subprocess.Popen(
        command(box, argv), stdin=stdin, stdout=stdout, stderr=stderr, start_new_session=True, close_fds=True
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    """Kill a box: its bwrap dies, the sandbox's first process with it (its death signal), and with that
    every process of its namespace. Its pipes are closed."""
    _kill(process)
    _close(process)


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def _close(process: subprocess.Popen[bytes]) -> None:
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


@dataclass(frozen=True)
class Finished:
    """What a boxed run came to: its exit status (negative: the signal that ended it), what it wrote (at
    most MAX_OUTPUT_BYTES of each), and whether it was cut at its time limit."""

    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool


def run(box: Box, argv: Sequence[str], *, timeout_s: float) -> Finished:
    """Run `argv` in `box` to its end, or cut it (and all it started) at `timeout_s`."""
    process = start(box, argv)
    out, err = _Drain(process.stdout), _Drain(process.stderr)
    timed_out = False
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill(process)
    try:
        return Finished(
            returncode=process.returncode if process.returncode is not None else -signal.SIGKILL,
            stdout=out.result(),
            stderr=err.result(),
            timed_out=timed_out,
        )
    finally:
        _close(process)


def available() -> bool:
    """Whether this machine can make a box (bwrap installed, and its namespaces allowed)."""
    try:
        finished = run(Box(), ["/bin/true"], timeout_s=10)
    except (SandboxUnavailable, OSError):
        return False
    return finished.returncode == 0


class _Drain:
    """Reads a stream to its end on a thread, keeping its first MAX_OUTPUT_BYTES."""

    def __init__(self, stream: IO[bytes] | None) -> None:
        self._kept = bytearray()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
                room = MAX_OUTPUT_BYTES - len(self._kept)
                if room > 0:
                    self._kept += chunk[:room]

    def result(self) -> bytes:
        self._thread.join(timeout=5)
        return bytes(self._kept)


def _absolute(path: Path | str, what: str) -> Path:
    resolved = Path(path)
    if not resolved.is_absolute():
        raise ValueError(f"{what}: {path!r} is relative; a box binds absolute paths")
    return resolved


class Tail:
    """The end of a stream, read on a thread: what a box last printed (its last KEEP bytes)."""

    KEEP: Final = 64 * 1024

    def __init__(self, stream: IO[bytes] | None) -> None:
        self._kept = bytearray()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(65536):  # type: ignore[attr-defined]
                with self._lock:
                    self._kept += chunk
                    del self._kept[: max(0, len(self._kept) - self.KEEP)]

    def text(self) -> str:
        with self._lock:
            return self._kept.decode("utf-8", "replace")

    def last_line(self) -> str:
        lines = [line for line in self.text().splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""
