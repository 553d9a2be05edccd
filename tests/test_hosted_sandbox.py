"""A box has no network, its own processes, a read-only root, a fresh /tmp, only its scratch folder to write
to, and only the environment it is given; stopping it stops everything it started; no bwrap is a refusal
that says what to install."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from deadlines import give_up_at, patience
from hosted_helpers import listening, needs_bwrap, processes_mentioning
from yardstick.hosted import limits
from yardstick.hosted.errors import SandboxUnavailable
from yardstick.worker.boxes import groups, inbox, sandbox
from yardstick.worker.processes import zombie_children

pytestmark = needs_bwrap
# The fractional seconds of the sleeps these tests look for by their command line: this suite's own (another
# suite on the machine may run the same tests at once).
RUN = f"{secrets.randbelow(10**6):06d}"


def python(box: sandbox.Box, code: str) -> sandbox.Finished:
    """`code` run by this interpreter in `box`, which is also shown what the interpreter needs."""
    seeing = replace(box, python=sys.executable)
    return sandbox.run(seeing, [sys.executable, "-c", code], timeout_s=30)


def test_a_boxed_interpreter_imports_the_same_yardstick(tmp_path: Path) -> None:
    # Wherever Yardstick is installed (a checkout under /tmp installed editable, which the box's fresh /tmp
    # hid), its boxed processes import the same files as the worker that starts them.
    finished = python(
        sandbox.Box(writable=(tmp_path,)), "import yardstick.worker.boxes.inbox as m; print(m.__file__)"
    )
    assert finished.returncode == 0, finished
    assert finished.stdout.decode().strip() == inbox.__file__


def test_a_box_cannot_reach_the_network(tmp_path: Path) -> None:
    with listening() as port:
        # The machine's own 127.0.0.1 answers here, and not in the box: the box's loopback is its own.
        with __import__("socket").create_connection(("127.0.0.1", port), timeout=2):
            pass
        probe = f"""
import socket
for where in [("127.0.0.1", {port}), ("1.1.1.1", 80)]:
    try:
        socket.create_connection(where, timeout=2).close()
        print("reached", where)
    except OSError as exc:
        print("refused", where, exc.errno)
"""
        finished = python(sandbox.Box(writable=(tmp_path,)), probe)
    lines = finished.stdout.decode().splitlines()
    assert [line.split()[0] for line in lines] == ["refused", "refused"], finished


def test_a_box_writes_only_its_scratch_and_sees_a_fresh_tmp(tmp_path: Path) -> None:
    code, scratch, outside = tmp_path / "code", tmp_path / "scratch", tmp_path / "outside"
    for folder in (code, scratch, outside):
        folder.mkdir()
    (code / "benchmark.py").write_text("x = 1\n")
    marker = Path("/tmp") / f"yardstick-host-file-{os.getpid()}"
    marker.write_text("the machine's /tmp")
    try:
        probe = f"""
import json
import os
import shutil
for path in [{str(scratch / "ok")!r}, {str(code / "evil.py")!r}, {str(outside / "evil")!r}, "/etc/evil",
             "/tmp/box-own"]:
    try:
        open(path, "w").write("x")
        print("wrote", path)
    except OSError as exc:
        print("refused", path)
print("sees-host-tmp", os.path.exists({str(marker)!r}))
print("reads-code", open({str(code / "benchmark.py")!r}).read().strip())
"""
        finished = python(sandbox.Box(readable=(code,), writable=(scratch,)), probe)
    finally:
        marker.unlink()
    said = dict(line.split(" ", 1)[::-1] for line in finished.stdout.decode().splitlines())
    assert said[str(scratch / "ok")] == "wrote" and said["/tmp/box-own"] == "wrote"
    assert said[str(code / "evil.py")] == said[str(outside / "evil")] == said["/etc/evil"] == "refused"
    assert said["False"] == "sees-host-tmp" and said["x = 1"] == "reads-code"
    assert (scratch / "ok").exists() and not (code / "evil.py").exists() and not (outside / "evil").exists()
    assert not Path("/tmp/box-own").exists()


def test_a_hidden_folder_is_empty_in_the_box_but_what_it_was_given_inside_it_shows(tmp_path: Path) -> None:
    install = Path(tempfile.mkdtemp(prefix="ys-install-", dir="/var/tmp"))
    try:
        (install / "versions" / "v1").mkdir(parents=True)
        (install / "versions" / "v1" / "benchmark.py").write_text("x = 1\n")
        (install / "secret").write_text("the install's key")
        finished = sandbox.run(
            sandbox.Box(readable=(install / "versions" / "v1",), hidden=(install,)),
            ["/bin/sh", "-c", f"cat {install}/versions/v1/benchmark.py; ls {install}; cat {install}/secret"],
            timeout_s=10,
        )
    finally:
        shutil.rmtree(install)
    assert finished.stdout.decode().split() == ["x", "=", "1", "versions"]
    assert b"key" not in finished.stdout


def test_a_folder_hidden_inside_one_it_reads_stays_hidden(tmp_path: Path) -> None:
    # The interpreter's environment is shown to every box: a data folder kept inside it stays out of sight.
    environment = Path(tempfile.mkdtemp(prefix="ys-env-", dir="/var/tmp"))
    try:
        (environment / "lib").mkdir()
        (environment / "lib" / "module.py").write_text("x = 1\n")
        (environment / "data").mkdir()
        (environment / "data" / "secret").write_text("the install's key")
        finished = sandbox.run(
            sandbox.Box(readable=(environment,), hidden=(environment / "data",)),
            ["/bin/sh", "-c", f"cd {environment}; cat lib/module.py; ls data; cat data/*"],
            timeout_s=10,
        )
    finally:
        shutil.rmtree(environment)
    assert finished.stdout.decode().split() == ["x", "=", "1"]
    assert b"key" not in finished.stdout


def test_a_box_cannot_remount_what_it_was_given_read_only(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    finished = sandbox.run(
        sandbox.Box(readable=(tmp_path / "code",)),
        [
            "/bin/sh",
            "-c",
            f"mount -o remount,rw,bind {tmp_path / 'code'} && echo remounted; touch {tmp_path}/code/x",
        ],
        timeout_s=10,
    )
    assert b"remounted" not in finished.stdout
    assert not (tmp_path / "code" / "x").exists()


def test_a_box_has_its_own_processes_and_only_the_environment_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YARDSTICK_HOST_SECRET", "not for the box")
    probe = f"""
import json
import os
import shutil
print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print(os.environ.get("YARDSTICK_HOST_SECRET"), os.environ.get("LAB_TOKEN"))
try:
    os.kill({os.getpid()}, 0)
    print("sees the parent")
except ProcessLookupError:
    print("no parent")
"""
    finished = python(sandbox.Box(writable=(tmp_path,), env={"LAB_TOKEN": "t0k"}), probe)
    pids, env, parent = finished.stdout.decode().splitlines()
    assert len(json.loads(pids)) <= 3  # bwrap's init, python, maybe a transient
    assert env == "None t0k"
    assert parent == "no parent"


def test_a_box_starts_and_ends_with_its_command() -> None:
    # How quickly is bench/sandbox.py's to say.
    finished = sandbox.run(sandbox.Box(), ["/bin/true"], timeout_s=patience(10))
    assert (finished.returncode, finished.timed_out) == (0, False)


def test_stopping_a_box_stops_everything_it_started(tmp_path: Path) -> None:
    marker = f"1234.{RUN}"
    process = sandbox.start(
        sandbox.Box(writable=(tmp_path,)), ["/bin/sh", "-c", f"sleep {marker} & sleep {marker} & wait"]
    )
    deadline = give_up_at(5)
    # bwrap, its init in the box, the shell and its two sleeps all carry the marker.
    while len(processes_mentioning(marker)) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_mentioning(marker)) == 5
    sandbox.stop(process)
    assert processes_mentioning(marker) == []


def test_a_run_past_its_time_is_cut() -> None:
    # A cut missed would leave the test waiting on a sleep of hours: it ends here only by the cut.
    finished = sandbox.run(sandbox.Box(), ["/bin/sleep", f"9876.{RUN}"], timeout_s=0.5)
    assert finished.timed_out and finished.returncode < 0
    assert processes_mentioning(f"sleep 9876.{RUN}") == []


def test_no_bubblewrap_is_a_refusal_that_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        sandbox.start(sandbox.Box(), ["/bin/true"])
    assert not sandbox.available()


def test_output_without_end_is_capped(tmp_path: Path) -> None:
    finished = sandbox.run(sandbox.Box(), ["/bin/sh", "-c", "yes | head -c 5000000"], timeout_s=10)
    assert len(finished.stdout) == sandbox.MAX_OUTPUT_BYTES


def test_a_box_runs_as_an_unprivileged_user_that_cannot_make_another_namespace() -> None:
    code = (
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True)\n"
        "caps = open('/proc/self/status').read().count('CapEff:\\t0000000000000000')\n"
        "print(os.getuid(), os.getgid(), libc.unshare(0x10000000), caps)"
    )
    finished = python(sandbox.Box(), code)
    assert finished.stdout.decode().split() == ["1000", "1000", "-1", "1"], finished


def test_neither_bwraps_environment_nor_any_command_line_holds_the_boxs_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("YARDSTICK_DATABASE_URL", "postgresql://platform@db/prod")
    code = (  # what it looks for is spelt apart, so its own command line does not hold it
        "import os\n"
        "seen = b''.join(open(f'/proc/{p}/{w}', 'rb').read() for p in os.listdir('/proc') if p.isdigit()"
        " for w in ('environ', 'cmdline'))\n"
        "print(b'postgres' b'ql://' in seen, seen.count(b's3cr3t' b'-value'), os.environ['LAB_TOKEN'])"
    )
    finished = python(sandbox.Box(env={"LAB_TOKEN": "s3cr3t-value"}), code)
    # The secret is in its own environment (one copy: its process's), and nowhere else.
    assert finished.stdout.decode().split() == ["False", "1", "s3cr3t-value"], finished
    assert b"s3cr3t-value" not in Path(f"/proc/{os.getpid()}/cmdline").read_bytes()


def test_a_box_shows_the_system_and_what_it_is_given_and_nothing_else(tmp_path: Path) -> None:
    code, secret = tmp_path / "code", tmp_path / "secret.key"
    code.mkdir()
    secret.write_text("the install's key")
    probe = (
        "import os, sys; paths = sys.argv[1:]\n"
        "print([os.path.lexists(p) for p in paths])\n"
        "print(sorted(os.listdir('/etc')) == sorted(set(os.listdir('/etc'))), os.path.isdir('/usr/lib'))"
    )
    seeing = replace(sandbox.Box(readable=(code,)), python=sys.executable)
    looked = [str(code), str(secret), "/etc/shadow", "/run", "/var", "/home", "/root/.bashrc", "/opt"]
    finished = sandbox.run(seeing, [sys.executable, "-c", probe, *looked], timeout_s=30)
    shown, _ = finished.stdout.decode().splitlines()
    assert shown == str([True] + [False] * (len(looked) - 1)), finished


def test_a_box_is_held_to_its_process_and_memory_limits() -> None:
    held = limits.BoxLimits(processes=32, memory_bytes=256 * limits.MiB)
    bomb = (
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            time.sleep(30)\n        n += 1\nexcept OSError:\n    print(n)"
    )
    finished = python(sandbox.Box(limits=held), bomb)
    assert 0 < int(finished.stdout) < 32, finished
    hog = python(sandbox.Box(limits=held), "x = b'x' * (1024 ** 3)")
    assert hog.returncode < 0 and (hog.out_of_memory or not groups.groups().hierarchies), hog
    fill = "with open('/tmp/big', 'wb') as f:\n    for _ in range(200):\n        f.write(b'x' * 1024 ** 2)"
    big = python(sandbox.Box(limits=held), fill)
    assert b"No space left" in big.stderr, big  # its scratch is half its memory


def test_a_box_stopped_leaves_no_process_for_this_one_to_reap() -> None:
    process = sandbox.start(sandbox.Box(), ["/bin/sleep", f"8765.{RUN}"])
    until = give_up_at(10)
    while len(processes_mentioning(f"sleep 8765.{RUN}")) < 2 and time.monotonic() < until:
        time.sleep(0.02)
    process.stop()
    assert processes_mentioning(f"sleep 8765.{RUN}") == []
    assert [pid for pid, name in zombie_children() if name == "bwrap"] == []


def test_a_cancelled_run_stops_its_box_at_once() -> None:
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    # Its time limit is past the test's own: only the stop can end it.
    finished = sandbox.run(sandbox.Box(), ["/bin/sleep", f"7654.{RUN}"], timeout_s=10**6, stop=stop)
    assert finished.timed_out and finished.returncode < 0
    assert processes_mentioning(f"sleep 7654.{RUN}") == []
