"""What the hostile-tenant suites share: a real `yardstick server` with two orgs — `acme` (the lab, the
victim: a sealed secret, a deployed benchmark that reads it, an eval played) and `globex` (the rival, the
attacker) — its data folder in /tmp, in a home folder or under /var, on SQLite or PostgreSQL; the real
`seq` CLI as each org's user; and the files of attacks, written as a tenant would write them."""

from __future__ import annotations

import csv
import io
import os
import re
import secrets
import shutil
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

import deadlines
from conftest import fresh_database
from hosted_helpers import SEQ, processes_mentioning, set_secret
from platform_harness import ServerProcess, server_process

ROOT = Path(__file__).parent.parent
EXAMPLES = Path(__file__).parent / "seq_examples"
LAB, RIVAL = "alice", "gina"  # acme's user, globex's user
# A variable of the server's own environment, which no box may read.
HOST_MARKER = "YARDSTICK_TEST_HOST_MARKER"
PLACES = ("tmp", "home", "var")


@dataclass
class Tenants:
    server: ServerProcess
    data: Path
    install_secret: bytes
    lab_secret: str
    host_marker: str
    work: Path  # where the tenants keep the folders they deploy

    @property
    def url(self) -> str:
        return self.server.url

    def seq(self, login: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
        env.update(SEQUENCES_BASE_URL=self.url, SEQUENCES_API_KEY=self.server.keys[login])
        return subprocess.run([str(SEQ), *args], env=env, capture_output=True, text=True, timeout=timeout)

    def ok(self, login: str, *args: str) -> str:
        done = self.seq(login, *args)
        assert done.returncode == 0, f"seq {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    def folder(self, name: str, files: dict[str, str]) -> Path:
        """A folder of code, as a tenant keeps one to `seq deploy`."""
        folder = self.work / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for file, source in files.items():
            (folder / file).write_text(textwrap.dedent(source))
        return folder

    def deploy(self, login: str, name: str, files: dict[str, str]) -> str:
        return self.ok(login, "deploy", str(self.folder(name, files)))

    def run_eval(self, login: str, policy: str, benchmark: str, *more: str) -> tuple[str, str]:
        """An eval run to its end: (its id, what the CLI printed). The CLI's status is not asserted."""
        done = self.seq(login, "eval", "run", policy, "--benchmark", benchmark, *more)
        return eval_id_of(done.stdout + done.stderr), done.stdout + done.stderr

    def rows(self, login: str, eval_id: str) -> list[dict[str, str]]:
        shown = self.seq(login, "eval", "report", eval_id, "--csv")
        assert shown.returncode == 0, shown.stderr
        return list(csv.DictReader(io.StringIO(shown.stdout)))

    def report(self, login: str, eval_id: str) -> dict[str, object]:
        headers = {"Authorization": f"Bearer {self.server.keys[login]}"}
        answer = httpx.get(f"{self.url}/v1/eval/{eval_id}", headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]

    def secrets_in(self, text: str | bytes) -> list[str]:
        """Which of the platform's and the lab's secrets `text` holds."""
        data = text.encode() if isinstance(text, str) else text
        found = []
        for name, secret in (
            ("the install's secret", self.install_secret),
            ("the install's secret (hex)", self.install_secret.hex().encode()),
            ("the lab's secret", self.lab_secret.encode()),
            ("the server's environment", self.host_marker.encode()),
        ):
            if secret and secret in data:
                found.append(name)
        return found


def eval_id_of(output: str) -> str:
    found = re.search(r"eval (ev-[0-9a-f]+)", output)
    assert found, output
    return found.group(1)


def place_of(kind: str, tmp: Path) -> Path:
    """A data folder in /tmp, in this user's home folder, or under /var (the README's own choices)."""
    token = secrets.token_hex(4)
    if kind == "tmp":
        return tmp / "data"
    if kind == "home":
        return Path.home() / f".yardstick-hostile-{token}"
    return Path("/var/tmp") / f"yardstick-hostile-{token}"


@contextmanager
def tenants(
    db_kind: str, place: str, tmp: Path, *, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Iterator[Tenants]:
    """A server with the lab's secret set, its benchmark deployed (reading the secret) and an eval played."""
    assert SEQ.exists(), f"{SEQ} is missing: `make env` installs the Sequences CLI in a venv apart"
    data = place_of(place, tmp)
    marker = f"host-{secrets.token_hex(8)}"
    server_env = {**os.environ, **(env or {}), HOST_MARKER: marker}
    try:
        with (
            fresh_database(db_kind, tmp) as url,
            server_process(tmp, url, data_dir=data, extra=extra, env=server_env, per_day=500) as served,
        ):
            served.start()
            lab_secret = f"lab-{secrets.token_hex(12)}"
            found = Tenants(
                served, data, (data / "secret.key").read_bytes(), lab_secret, marker, tmp / "work"
            )
            set_secret(served.url, served.keys[LAB], "lab", "LAB_TOKEN", lab_secret)
            found.deploy(LAB, "lab-bench", {"benchmark.py": LAB_BENCH})
            found.deploy(LAB, "lab-policy", {"policy.py": POLICY})
            _, said = found.run_eval(LAB, "reach-policy", "lab-bench", "--trials", "1")
            assert "success: overall 100.0%" in said, said
            found.deploy(RIVAL, "rival-policy", {"policy.py": POLICY})
            yield found
            assert served.stop() == 0, served.log.read_text()[-3000:]
            # Stopped, the server leaves no process of its own or of a box behind, defunct or alive.
            assert processes_mentioning(str(data.resolve())) == []
            left = served.log.read_text()
            assert lab_secret not in left and marker not in left
    finally:
        if place != "tmp":
            shutil.rmtree(data, ignore_errors=True)


def until(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Until `condition()` holds, within `timeout` seconds stretched for the machine's load."""
    deadlines.until(condition, timeout, what)


POLICY = (EXAMPLES / "reach-policy" / "policy.py").read_text()

# The lab's benchmark: the reach benchmark, handed the lab's secret (it checks it has it).
LAB_BENCH = """\
import os
import seq

TASKS = {"left": "the target on the left", "right": "the target on the right"}


@seq.benchmark(
    name="lab-bench", tasks=TASKS, seeds=[0], max_seconds=3.0, secrets=[seq.Secret.from_name("lab")]
)
class LabBench:
    def __init__(self):
        assert os.environ["LAB_TOKEN"].startswith("lab-")
        self.targets = {"left": -0.3, "right": 0.3}

    @seq.reset
    def reset(self, task, seed):
        self.x, self.target = 0.0, self.targets[task]
        return {"x": self.x, "target": self.target}

    @seq.step
    def step(self, action):
        self.x += float(action[0])
        reached = abs(self.x - self.target) < 0.05
        return {"x": self.x, "target": self.target}, reached, reached
"""
