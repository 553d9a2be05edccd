"""The real Sequences SDK and CLI as a robot's program and its operator use them, for the tests of robots on
a deployment (`test_act_plane.py`, `test_planners.py`): `seq(...)` runs one `seq` command against the
platform; `Robot` is a robot's program (`act_robot.py`) on `sequence_ai.connect`, driven a command at a
time."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from deadlines import give_up_at, patience
from platform_harness import Harness

ROOT = Path(__file__).parent.parent
SEQ_PYTHON = ROOT / ".venv-seq" / "bin" / "python"
SEQ = ROOT / ".venv-seq" / "bin" / "seq"
ROBOT = Path(__file__).parent / "act_robot.py"
MODEL = "franka-reach"
# Generous for a loaded two-core machine: a worker's start (a box, the policy's imports) takes seconds.
WAIT_S = 180.0


def seq(platform: Harness, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=platform.url, SEQUENCES_API_KEY=key or platform.keys["alice"])
    return subprocess.run([str(SEQ), *args], env=env, capture_output=True, text=True, timeout=300)


class Robot:
    """The robot's program (`act_robot.py`) on the real SDK, one command at a time."""

    def __init__(self, platform: Harness, key: str | None = None, model: str = MODEL) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
        env.update(SEQUENCES_BASE_URL=platform.url, SEQUENCES_API_KEY=key or platform.keys["alice"])
        self.process = subprocess.Popen(
            [str(SEQ_PYTHON), str(ROBOT), model, str(WAIT_S)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.said: queue.Queue[str] = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(target=self._read, args=(self.process.stdout, self.said.put), daemon=True).start()
        threading.Thread(
            target=self._read, args=(self.process.stderr, self.errors.append), daemon=True
        ).start()
        first = self._next(WAIT_S)
        assert first.get("connected"), first

    @staticmethod
    def _read(stream: Any, put: Any) -> None:
        for line in stream:
            put(line)

    def _next(self, timeout: float) -> dict[str, Any]:
        try:
            line = self.said.get(timeout=patience(timeout))
        except queue.Empty:
            raise AssertionError(
                f"the robot said nothing in {patience(timeout):g} s; its stderr: {''.join(self.errors)}"
            ) from None
        return dict(json.loads(line))

    def ask(self, timeout: float = WAIT_S, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._next(timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.ask(close=True, timeout=60)
            finally:
                self.process.wait(timeout=60)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def as_sent(value: Any) -> Any:
    """An observation as act_robot.py takes it on stdin: arrays with their dtype."""
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, dict):
        return {k: as_sent(v) for k, v in value.items()}
    return value


def wait_until(what: Any, timeout: float = WAIT_S, every: float = 0.1) -> Any:
    deadline = give_up_at(timeout)
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        threading.Event().wait(every)
    raise AssertionError(f"not within {patience(timeout):g} s: {what}")
