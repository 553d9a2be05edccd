"""Running someone else's code in a box: bubblewrap (`bwrap`), as Debian's `bubblewrap` package installs it.

What a box sees is an allow-list, not the machine less a deny-list. A fresh root holds:

    /usr (and /bin, /lib, ... as the machine links them)   the system's programs and libraries, read-only
    /etc   a dozen files a program needs to start (the loader's cache, time zone, hosts, fonts, alternatives)
           and a passwd and group naming only its own user; never the machine's shadow, pip or ssh files
    the interpreter a Python box runs, its virtual environment, where Yardstick is imported from (read-only)
    the folders and files it is `readable` (a version's code, a policy's socket), at their paths outside
    its `mounts`, read-only at places of their own (a benchmark's volumes at /assets, weights at /data)
    /tmp   its scratch and home: an empty tmpfs of `limits.scratch`, gone with the box
    /dev   null, zero, random, urandom, tty, a /dev/shm tmpfs of `limits.shm`, and the `devices` given
    /proc  its own processes only; /sys/devices/system/cpu (read-only) for counting the cores

and nothing else: not the data folder, another org's files, the machine's home folders, /run or /var/run (so
no host socket), /var, /opt, /srv, /mnt. `writable` folders are bound read-write: only an install's
environment is. A box that needs the machine's own view (`view="machine"`: the whole root read-only, for the
platform's own pip fetching wheels, which runs no tenant code) asks for it.

Inside, it runs as user 1000 (`box`) of a user namespace of its own, which cannot make another; with no
capabilities, its own process, IPC and UTS namespaces, a session of its own (it cannot type into our
terminal), and no network (a namespace with only a loopback: no TCP, UDP, DNS, and no abstract unix socket of
the machine's) unless `network`. bwrap itself starts with an empty environment and reads its arguments from a
descriptor, so neither /proc/1/environ nor any process's command line holds the box's environment (secrets
arrive there); the program's environment is `env` beside a few neutral defaults (PATH, HOME, LANG).

A box is held to `limits` (see `limits.py`: rlimits always, control groups where the machine gives them).
Its processes die with it: killing the box kills its namespace's first process (which ends every process of
the namespace) before bwrap's own, so bwrap reaps it and nothing is left for anyone to reap; `reap_orphans`
reaps a box's processes adopted by this one (a worker killed outright leaves them to its reaper). Starting
one costs about 0.05 s.

Outside its namespace the box's processes are the platform's user: run the platform as an unprivileged user.
Run as root, the box's files are root's to the kernel, so what it is shown is all it can reach, and the
process limit holds only through a control group (the kernel exempts uid 0 from RLIMIT_NPROC).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Final, Literal

import yardstick
from yardstick.hosted.errors import SandboxUnavailable
from yardstick.hosted.limits import BoxLimits
from yardstick.worker import processes
from yardstick.worker.boxes import groups as box_groups
from yardstick.worker.boxes.groups import BoxGroup

log = logging.getLogger("yardstick.sandbox")

INSTALL_HINT: Final = (
    "boxing uploaded code needs bubblewrap: install Debian's package (apt-get install bubblewrap), "
    "and allow user namespaces (sysctl kernel.unprivileged_userns_clone=1 where the kernel asks for it)"
)
BASE_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
# What a box's output may hold before the rest is dropped (a box that prints without end fills nothing).
MAX_OUTPUT_BYTES: Final = 1024 * 1024
PIPE: Final = subprocess.PIPE
BOX_UID: Final = 1000
BOX_USER: Final = "box"
SCRATCH: Final = Path("/tmp")
# How often a box run to its end looks whether it is to be stopped.
STOP_LOOK_S: Final = 0.1
# A hidden folder's stand-in: an empty tmpfs that holds next to nothing.
HIDDEN_BYTES: Final = 64 * 1024
# The machine's top entries a box's root shows: the system's programs and libraries (links kept as links).
SYSTEM: Final = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# What of /etc a program needs to start and read the time, fonts and the loader's cache by: nothing that names
# the machine's users, keys, services or package indexes.
ETC: Final = (
    "alternatives",
    "debian_version",
    "fonts",
    "glvnd",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "protocols",
    "services",
    "timezone",
)
CPU_INFO: Final = Path("/sys/devices/system/cpu")
View = Literal["own", "machine"]


@dataclass(frozen=True)
class Box:
    """How a boxed process sees the machine (see the module's docstring). `readable` folders or files are
    bound read-only and `writable` folders read-write, each at its own path; `hidden` ones (inside those) are
    masked by an empty folder; `env` is its whole environment beside PATH, HOME, LANG; `network` opens the
    machine's network to it (only the platform's own fetching of wheels); `cwd` is where it starts (default:
    /tmp); `devices` are device files it may use (a GPU's /dev/dri/renderD128); `mounts` are folders bound
    read-only each at its own place ((folder, place): a place that need not exist on the machine); `python`
    is the interpreter a Python box runs, shown read-only with what it needs (`python_folders`); `limits`
    what it may use; `view` what its root is; `keep_fds` descriptors it inherits (a listening socket);
    `root` an image's system (its root filesystem, `image_builds`) shown in place of the machine's."""

    readable: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    devices: tuple[Path, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    network: bool = False
    cwd: Path | None = None
    mounts: tuple[tuple[Path, str], ...] = ()
    python: str | None = None
    limits: BoxLimits = field(default_factory=BoxLimits)
    view: View = "own"
    keep_fds: tuple[int, ...] = ()
    root: Path | None = None

    def shown(self) -> tuple[Path, ...]:
        """What the box reads beside the system: what it was given, and its interpreter's folders."""
        return tuple(dict.fromkeys((*self.readable, *(python_folders(self.python) if self.python else ()))))


# The folder Yardstick is imported from: site-packages, or a checkout's src/ for an editable install.
YARDSTICK_ROOT: Final = Path(yardstick.__file__).resolve().parents[1]


def python_folders(python: str) -> tuple[Path, ...]:
    """What a box running `python` must see: the interpreter's installation (a virtual environment's root
    for its bin/python, and the installation it was made from), this process's environment (whose packages
    a prepared environment reads), and where Yardstick is imported from (a checkout's src/ when installed
    editable)."""
    interpreter = Path(os.path.abspath(python))
    own = (
        interpreter.parent.parent,
        interpreter.resolve().parent.parent,
        Path(sys.prefix),
        Path(sys.base_prefix),
        YARDSTICK_ROOT,
    )
    return tuple(dict.fromkeys(own))


def bwrap() -> str:
    """The path of bwrap, or SandboxUnavailable saying what to install."""
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(INSTALL_HINT)
    return found


def arguments(box: Box, data: Mapping[str, int]) -> list[str]:
    """bwrap's options that make `box` (its command follows them); `data` are the descriptors of the files
    bwrap writes into the box ({path in the box: fd}: its passwd and group)."""
    args = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
    args += ["--cap-drop", "ALL", "--uid", str(BOX_UID), "--gid", str(BOX_UID)]
    if box.network:
        args.append("--share-net")
    args += _root(box, data)
    args += ["--dev", "/dev", "--proc", "/proc"]
    args += ["--size", str(box.limits.scratch), "--tmpfs", str(SCRATCH)]
    args += ["--size", str(box.limits.shm), "--tmpfs", "/dev/shm"]
    # Parents before children: a folder bound inside a hidden one shows in it, and one hidden inside a bound
    # one (the platform's data folder inside the interpreter's environment, say) stays hidden.
    shown = [*box.shown(), *box.writable]
    # A folder is hidden only inside one the box is shown: elsewhere it is out of sight already, and a
    # stand-in would only name it.
    hidden = [p for p in box.hidden if any(_within(_absolute(p, "hidden"), Path(s)) for s in shown)]
    places = [("--tmpfs", p) for p in hidden]
    places += [("--ro-bind", _absolute(p, "readable")) for p in box.shown()]
    places += [("--bind", _absolute(p, "writable")) for p in box.writable]
    for how, path in sorted(places, key=lambda place: len(place[1].parts)):
        if how == "--tmpfs":
            args += ["--size", str(HIDDEN_BYTES), "--tmpfs", str(path)]
        else:
            args += [how, str(path), str(path)]
    for device in box.devices:
        args += ["--dev-bind", str(_absolute(device, "devices")), str(device)]
    for folder, place in sorted(box.mounts, key=lambda mount: len(Path(mount[1]).parts)):
        args += ["--ro-bind", str(_absolute(folder, "mounts")), str(_absolute(place, "mounts"))]
    if box.view == "own":
        args += ["--remount-ro", "/", "--remount-ro", "/dev"]  # /tmp and /dev/shm are mounts of their own
    home = str(SCRATCH)
    env = {"PATH": BASE_PATH, "HOME": home, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", **box.env}
    env.setdefault("USER", BOX_USER)
    args.append("--clearenv")
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--chdir", str(box.cwd or home)]
    return args


def _root(box: Box, data: Mapping[str, int]) -> list[str]:
    """The box's root: the machine's whole root read-only (`view="machine"`), or a fresh one holding the
    system's folders (the machine's, or those of the image's `root`), a few files of /etc, and the box's own
    passwd and group."""
    if box.view == "machine":
        return ["--ro-bind", "/", "/"]
    system = box.root or Path("/")
    args: list[str] = []
    for name in SYSTEM if box.root is None else _image_entries(box):
        args += _shown(system / name, Path("/") / name)
    args += ["--dir", "/etc"]
    for name in ETC:
        args += _shown(system / "etc" / name, Path("/etc") / name)
    for path, fd in data.items():
        args += ["--perms", "0644", "--ro-bind-data", str(fd), path]
    if CPU_INFO.is_dir():
        args += ["--ro-bind", str(CPU_INFO), str(CPU_INFO)]
    return args


def _image_entries(box: Box) -> list[str]:
    """The top entries of an image's root a box shows: all its files (what the image's build put in /opt or
    /srv is its own), but for those the box makes itself (/dev, /proc, /tmp, /etc's few files), and any the
    box's own folders are bound inside (the interpreter's, the code's), which must stay writable to bwrap."""
    assert box.root is not None
    taken = {Path(p).parts[1] for p in (*box.shown(), *box.writable) if len(Path(p).parts) > 1}
    taken |= {Path(place).parts[1] for _, place in box.mounts if len(Path(place).parts) > 1}
    made = {"dev", "proc", "sys", "tmp", "run", "etc", *taken}
    return sorted(entry.name for entry in box.root.iterdir() if entry.name not in made)


def _shown(entry: Path, place: Path) -> list[str]:
    """One of the system's entries as the box sees it at `place`: a link as a link, a file or folder bound
    read-only, nothing where the system has nothing (an image's link is read as the image means it)."""
    if entry.is_symlink():
        return ["--symlink", os.readlink(entry), str(place)]
    if entry.exists():
        return ["--ro-bind", str(entry), str(place)]
    return []


def _identity() -> dict[str, bytes]:
    """The box's /etc/passwd and /etc/group: its own user, and root (whose files it sees as nobody's)."""
    return {
        "/etc/passwd": (
            f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
            f"{BOX_USER}:x:{BOX_UID}:{BOX_UID}:{BOX_USER}:{SCRATCH}:/usr/sbin/nologin\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ).encode(),
        "/etc/group": f"root:x:0:\n{BOX_USER}:x:{BOX_UID}:\nnogroup:x:65534:\n".encode(),
    }


def _memfd(name: str, content: bytes) -> int:
    """A descriptor holding `content` from its start, in memory (it never touches a disk)."""
    fd = os.memfd_create(name, 0)
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class BoxProcess:
    """A box that runs: its bwrap (`popen`), the control groups that hold it, and its pipes."""

    def __init__(self, popen: subprocess.Popen[bytes], group: BoxGroup) -> None:
        self.popen = popen
        self.group = group
        self._stopped = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def stdin(self) -> IO[bytes] | None:
        return self.popen.stdin

    @property
    def stdout(self) -> IO[bytes] | None:
        return self.popen.stdout

    @property
    def stderr(self) -> IO[bytes] | None:
        return self.popen.stderr

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.popen.wait(timeout=timeout)

    def processes(self) -> list[int]:
        """The box's processes now (bwrap's own included)."""
        held = self.group.pids()
        if held or self.group.folders:
            return held
        return [self.pid, *processes.descendants(self.pid)] if self.popen.poll() is None else []

    def out_of_memory(self) -> bool:
        """Whether the kernel ended a process of the box for passing its memory limit."""
        return self.group.out_of_memory()

    def stop(self) -> None:
        """Kill the box and everything it started, reap it, and close its pipes. Idempotent."""
        if not self._stopped:
            self._stopped = True
            _kill(self)
            self.group.remove()
            _forget(self.pid)
        _close(self.popen)


# The box's first process, before bwrap: it enters the box's control groups and lowers its rlimits, then
# becomes bwrap (exec), so bwrap and all it starts are held from their first instruction. A process of its
# own rather than a preexec_fn: Python code between fork and exec runs the interpreter's after-fork clean-up,
# which destroys other threads' objects (a video encoder's thread-locals waited for ever on a thread that the
# child does not have, seen in the suite). Arguments: N, N descriptors, M, M (resource, value) pairs, argv.
ENTER: Final = """
import os, resource, sys
a = sys.argv
n = int(a[1]); entrances = [int(x) for x in a[2:2 + n]]
m = int(a[2 + n]); pairs = a[3 + n:3 + n + 2 * m]
pid = str(os.getpid()).encode()
for fd in entrances:
    os.write(fd, pid)
    os.close(fd)
for i in range(0, len(pairs), 2):
    which, value = int(pairs[i]), int(pairs[i + 1])
    hard = resource.getrlimit(which)[1]
    cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (cap, cap))
rest = a[3 + n + 2 * m:]
os.execv(rest[0], rest)
"""


def start(
    box: Box,
    argv: Sequence[str],
    *,
    stdin: int | IO[bytes] | None = subprocess.DEVNULL,
    stdout: int | IO[bytes] | None = subprocess.PIPE,
    stderr: int | IO[bytes] | None = subprocess.PIPE,
) -> BoxProcess:
    """Start `argv` in `box`. Stop it with `BoxProcess.stop`, which ends everything it started."""
    for folder in (*box.writable, *(folder for folder, _ in box.mounts)):
        if not Path(folder).is_dir():
            raise FileNotFoundError(f"{folder}: a folder a box is given must exist")
    for path in box.shown():
        if not Path(path).exists():
            raise FileNotFoundError(f"{path}: a folder or file a box is given must exist")
    program = bwrap()
    group = BoxGroup.make(box.limits)
    # uid 0 is not held to RLIMIT_NPROC at all (its group's pids.max holds it); another user counts from
    # the tasks it runs already.
    tasks = 0 if os.getuid() == 0 else processes.tasks_of(os.getuid())
    held = box_groups.rlimits(box.limits, memory_held=group.holds_memory, user_tasks=tasks)
    descriptors: list[int] = []
    try:
        data = {} if box.view == "machine" else {p: _memfd("box-etc", c) for p, c in _identity().items()}
        descriptors += data.values()
        # Read from a descriptor, so no command line shows the box's environment (its secrets).
        args_fd = _memfd("bwrap-args", b"".join(a.encode() + b"\0" for a in arguments(box, data)))
        descriptors.append(args_fd)

        entrances = group.entrances
        limits = [str(n) for pair in held for n in pair]
        first = [sys.executable, "-I", "-S", "-c", ENTER, str(len(entrances)), *map(str, entrances)]
        with _LIVE_LOCK:
            popen = subprocess.Popen(
                [*first, str(len(held)), *limits, program, "--args", str(args_fd), "--", *argv],
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env={},
                start_new_session=True,
                close_fds=True,
                pass_fds=(*descriptors, *entrances, *box.keep_fds),
            )
            _LIVE.add(popen.pid)
    except BaseException:
        group.remove()
        raise
    finally:
        for fd in descriptors:
            os.close(fd)
    return BoxProcess(popen, group)


def stop(process: BoxProcess) -> None:
    """Kill a box and everything it started (see `BoxProcess.stop`)."""
    process.stop()


def _kill(process: BoxProcess) -> None:
    """End the box's namespace first (its first process, or every process of its group but bwrap's own), so
    bwrap reaps it; then bwrap, and reap bwrap."""
    popen = process.popen
    if popen.poll() is None:
        if process.group.folders:
            process.group.kill(spare=lambda pid: pid == popen.pid)
        else:
            for pid in processes.children(popen.pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)


def _close(popen: subprocess.Popen[bytes]) -> None:
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


# The bwraps this process started and has not reaped: `reap_orphans` leaves them to their Popen.
_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()


def _forget(pid: int) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(pid)


def reap_orphans() -> int:
    """Reap the boxes' processes this process adopted as their reaper (their bwrap's parent died: a worker
    killed outright), which nobody else would wait for. Returns how many it reaped."""
    reaped = 0
    with _LIVE_LOCK:
        for pid, name in processes.zombie_children():
            if name == "bwrap" and pid not in _LIVE:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                    reaped += 1
    return reaped


def exit_status(code: int | None) -> int:
    """A box's exit status as Popen gives a process's: negative for the signal that ended it. bwrap reports
    a command killed by signal N as 128 + N."""
    if code is None:
        return -signal.SIGKILL
    if 128 < code <= 128 + 64:
        return -(code - 128)
    return code


@dataclass(frozen=True)
class Finished:
    """What a boxed run came to: its exit status (negative: the signal that ended it), what it wrote (at
    most MAX_OUTPUT_BYTES of each), whether it was cut at its time limit, and whether the kernel ended it
    for passing its memory limit."""

    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    out_of_memory: bool = False


def run(box: Box, argv: Sequence[str], *, timeout_s: float, stop: threading.Event | None = None) -> Finished:
    """Run `argv` in `box` to its end, or cut it (and all it started) at `timeout_s`, or as soon as `stop`
    is set (a cancelled build: `timed_out`, and `stopped`). Its CPU time is held to what `timeout_s` of every
    core gives."""
    process = start(replace(box, limits=box.limits.with_cpu_seconds(timeout_s)), argv)
    out, err = _Drain(process.stdout), _Drain(process.stderr)
    timed_out = False
    deadline = time.monotonic() + timeout_s
    while process.poll() is None:
        if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
            timed_out = True
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(timeout=min(STOP_LOOK_S, max(0.0, deadline - time.monotonic())))
    oom = process.out_of_memory()
    process.stop()
    return Finished(
        returncode=-signal.SIGKILL if timed_out else exit_status(process.returncode),
        stdout=out.result(),
        stderr=err.result(),
        timed_out=timed_out,
        out_of_memory=oom,
    )


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


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _absolute(path: Path | str, what: str) -> Path:
    resolved = Path(path)
    if not resolved.is_absolute():
        raise ValueError(f"{what}: {path!r} is relative; a box binds absolute paths")
    return resolved


class Journal:
    """The lines the boxes of one player or policy server printed, each with the time it was read: the newest
    KEEP lines (each cut at LINE_CHARS), numbered from the first, so a caller marks where a batch began and
    reads what was printed since (`mark`, `since`) - lines its boxes printed, for the run's logs."""

    KEEP: Final = 5000
    LINE_CHARS: Final = 2000

    def __init__(self) -> None:
        self._lines: deque[tuple[float, str]] = deque(maxlen=self.KEEP)
        self._count = 0
        self._lock = threading.Lock()

    def add(self, line: bytes) -> None:
        self.keep(time.time(), line.decode("utf-8", "replace").rstrip("\r\n"))

    def keep(self, at: float, text: str) -> None:
        """A line read at `at` (another journal's, read where it was printed)."""
        with self._lock:
            self._lines.append((at, text[: self.LINE_CHARS]))
            self._count += 1

    def mark(self) -> int:
        with self._lock:
            return self._count

    def since(self, mark: int) -> tuple[list[tuple[float, str]], int]:
        """The lines printed after `mark` that are still kept (the oldest go past KEEP), and the mark after
        them, read at once: a line printed meanwhile is in one read or the next, never lost between."""
        with self._lock:
            first = self._count - len(self._lines)
            return list(self._lines)[max(0, mark - first) :], self._count


class Tail:
    """The end of a stream, read on a thread: what a box last printed (its last KEEP bytes), and each whole
    line written to `journal` as it comes."""

    KEEP: Final = 64 * 1024

    def __init__(self, stream: IO[bytes] | None, journal: Journal | None = None) -> None:
        self._kept = bytearray()
        self._lock = threading.Lock()
        self._journal = journal
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        partial = b""
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(65536):  # type: ignore[attr-defined]
                with self._lock:
                    self._kept += chunk
                    del self._kept[: max(0, len(self._kept) - self.KEEP)]
                if self._journal is not None:
                    *whole, partial = (partial + chunk).split(b"\n")
                    for line in whole:
                        self._journal.add(line)
                    partial = partial[-self.KEEP :]
        if self._journal is not None and partial:
            self._journal.add(partial)

    def text(self) -> str:
        with self._lock:
            return self._kept.decode("utf-8", "replace")

    def last_line(self) -> str:
        lines = [line for line in self.text().splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""
