"""What the hosted tests share: packing a folder as the Sequences SDK packs it, unpacking it as a
registration does, and finding the processes a box left behind."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from deadlines import patience
from yardstick.hosted.bundle import Bundle, pack, unpack
from yardstick.worker.boxes import sandbox
from yardstick.worker.processes import descendants

EXAMPLES = Path("/work/shared/sequences/examples")

needs_bwrap = pytest.mark.skipif(not sandbox.available(), reason="bubblewrap cannot make a box here")


# The real Sequences CLI, in its venv apart (`make env`).
SEQ = Path(__file__).parent.parent / ".venv-seq" / "bin" / "seq"


def seq_cli(url: str, key: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The real `seq` CLI pointed at `url` with `key`, as a user runs it (`stdin`: what is typed at it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=url, SEQUENCES_API_KEY=key, COLUMNS="200")
    command = [str(SEQ), *args]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=patience(300), input=stdin
    )


def eval_id_of(output: str) -> str:
    """The eval a `seq eval run` started, from what it printed."""
    found = re.search(r"eval (ev-[0-9a-f]+)", output)
    assert found, output
    return found.group(1)


def set_secret(url: str, key: str, name: str, env_var: str, value: str) -> None:
    """`seq secret set NAME --env VAR`, the value typed at its prompt, as a user sets one."""
    made = seq_cli(url, key, "secret", "set", name, "--env", env_var, stdin=value + "\n")
    assert made.returncode == 0, made.stdout + made.stderr


def bundle_of(files: dict[str, str], where: Path) -> Bundle:
    """`files` ({path: source}) written to a folder, packed as the SDK packs it and unpacked as a
    registration unpacks it: the folder a version runs from."""
    source = where / "source"
    for name, text in files.items():
        path = source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    fmt, data, sha = pack(source)
    return unpack(fmt, data, sha, where / "versions" / sha)


def example(name: str, as_file: str) -> dict[str, str]:
    return {as_file: (EXAMPLES / name).read_text()}


def processes_mentioning(marker: str, under: int | None = None) -> list[int]:
    """The live processes whose command line holds `marker` (this one excepted); with `under`, only those
    below that process (another suite on the machine may run the same code at once)."""
    below = set(descendants(under)) if under is not None else None
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(
                (line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")),
                "",
            )
        except OSError:
            continue
        if marker in cmdline and "zombie" not in state and (below is None or int(entry.name) in below):
            found.append(int(entry.name))
    return found


@contextmanager
def listening() -> Iterator[int]:
    """A TCP server on this machine's 127.0.0.1 that accepts whatever connects: its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        server.close()
