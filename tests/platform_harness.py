"""A real platform for tests: the gateway on a free port (uvicorn in a thread), workers in their own
processes, and users with keys. Nothing is mocked: the tests speak HTTP to it with the contract's client."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from platform_client.client import PlatformClient
from platform_client.eval_plan import EvalPlan

from conftest import free_port
from deadlines import give_up_at, patience, until
from yardstick.cli.platform_cmd import run_worker
from yardstick.core import admin
from yardstick.core.platform import Platform
from yardstick.core.settings import Settings, SignInSettings
from yardstick.gateway.app import create_app
from yardstick.gateway.services import Services, open_services
from yardstick.store.models import ServedPolicy
from yardstick.worker.processes import children, descendants, kill_all

TOYS = Path(__file__).parent / "toys.py"


@dataclass
class Harness:
    settings: Settings
    services: Services
    url: str
    keys: dict[str, str] = field(default_factory=dict)
    workers: list[Any] = field(default_factory=list)

    @property
    def platform(self) -> Platform:
        return self.services.platform

    def client(self, login: str = "alice") -> PlatformClient:
        return PlatformClient(self.url, api_key=self.keys[login] if login else None)  # type: ignore[arg-type]

    def wait_for_workers(self, timeout_s: float = 120.0) -> None:
        """Until the platform says a worker is alive (a loaded machine starts one in seconds)."""
        until(
            lambda: httpx.get(f"{self.url}/healthz", timeout=patience(10)).json()["workers_alive"],
            timeout_s,
            "a worker to come up",
        )

    def start_worker(self) -> Any:
        # It dies with this process: a test run that is killed leaves no worker behind.
        process = mp.get_context("spawn").Process(target=run_worker, args=(self.settings, None, os.getpid()))
        process.start()
        self.workers.append(process)
        return process

    def stop_workers(self) -> None:
        for process in self.workers:
            if process.is_alive():
                process.terminate()
        for process in self.workers:
            process.join(timeout=patience(30))
        self.workers.clear()

    def user(self, login: str, org: str, *, alias: str | None = None) -> str:
        with self.platform.db.writing() as session:
            admin.create_user(session, login, orgs=[org], alias=alias or login)
            self.keys[login] = admin.create_key(session, login).plaintext
        return self.keys[login]

    def wait(self, client: PlatformClient, submission_id: Any, timeout: float = 120.0) -> Any:
        return wait_for(client, submission_id, timeout)


def wait_for(client: PlatformClient, submission_id: Any, timeout: float = 120.0) -> Any:
    """The submission's view once it has ended."""
    deadline = give_up_at(timeout)
    while time.monotonic() < deadline:
        view = client.get_submission(submission_id)
        if view.status.name in ("finished", "errored", "cancelled"):
            return view
        time.sleep(0.3)
    raise TimeoutError(f"submission {submission_id} did not end in {patience(timeout):g} s")


def toy_plan(
    key: str, *, org: str = "acme", spec: str = "rows", episodes: int = 2, competition: bool = False
) -> EvalPlan:
    request = {"type": "nebius_competition"} if competition else {"type": "private_eval", "org": org}
    return EvalPlan.model_validate(
        {
            "request_type": request,
            "eval": "toys.tally",
            "endpoints": [{"name": "policy", "kind": "served", "wire": "websocket", "spec": spec}],
            "episodes_per_endpoint": episodes,
            "transaction_key": key,
        }
    )


def prepare_install(settings: Settings, *, per_day: int = 50) -> dict[str, str]:
    """The orgs, evals, served policies and users every platform test starts from, in `settings`' install;
    the users' keys by login."""
    services = open_services(settings)
    try:
        with services.platform.db.writing() as session:
            admin.create_org(session, "acme", per_day=per_day, concurrent=100)
            admin.create_org(session, "globex", per_day=per_day, concurrent=100, may_compose=False)
            admin.create_eval(
                session, "toys.tally", f"{TOYS}:Tally", choice=admin.EvalTasks(["three", "ten"], trials=4)
            )
            admin.create_eval(
                session,
                "toys.acme",
                f"{TOYS}:Tally",
                choice=admin.EvalTasks(["three"], trials=2),
                org_slug="acme",
            )
            admin.create_eval(
                session,
                "toys.canvas",
                f"{TOYS}:Canvas",
                title="Canvas",
                choice=admin.EvalTasks(["left", "right"], trials=2),
                record_video=True,
            )
            for name, cls, params in (
                ("rows", "Rows", {}),
                ("slow", "SlowRows", {"delay": 0.1}),
                ("crash", "CrashOnTen", {}),
                ("sampler", "Sampler", {}),
                ("wedge", "WedgeOnTen", {}),
            ):
                session.add(ServedPolicy(name=name, reference=f"{TOYS}:{cls}", params=params))
        keys = {}
        for login, org in (("alice", "acme"), ("bob", "acme"), ("gina", "globex")):
            with services.platform.db.writing() as session:
                admin.create_user(session, login, orgs=[org], alias=login)
                keys[login] = admin.create_key(session, login).plaintext
        return keys
    finally:
        services.close()


@contextmanager
def running_platform(
    tmp_path: Path,
    database_url: str | None,
    *,
    workers: int = 1,
    lease_s: float = 60.0,
    max_attempts: int = 3,
    per_day: int = 50,
    ttl_s: int = 3600,
    call_timeout_s: float = 60.0,
    sign_in: SignInSettings | None = None,
    allow_remote: tuple[str, ...] = (),
    port: int | None = None,
    **more: Any,
) -> Iterator[Harness]:
    """`allow_remote`: the test's own policy servers on this machine a remote endpoint may name (none by
    default, as a platform allows none); `more`: other `Settings` fields (box limits, say)."""
    settings = Settings(
        data_dir=tmp_path / "platform",
        database_url=database_url,
        lease_s=lease_s,
        max_attempts=max_attempts,
        artifact_ttl_s=ttl_s,
        call_timeout_s=call_timeout_s,
        sign_in=sign_in or SignInSettings(),
        allow_remote=allow_remote,
        **more,
    )
    keys = prepare_install(settings, per_day=per_day)
    services = open_services(settings)
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(services), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    until(lambda: server.started or not thread.is_alive(), 60, "the gateway to start")
    assert server.started, "the gateway's thread ended before it started"
    harness = Harness(settings, services, f"http://127.0.0.1:{port}", keys=keys)
    for _ in range(workers):
        harness.start_worker()
    try:
        yield harness
    finally:
        harness.stop_workers()
        server.should_exit = True
        thread.join(timeout=patience(10))
        services.close()


@dataclass
class ServerProcess:
    """`yardstick server` as a user runs it: its own process (and its workers'), on a prepared install."""

    settings: Settings
    keys: dict[str, str]
    port: int
    args: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, login: str = "alice") -> PlatformClient:
        return PlatformClient(self.url, api_key=self.keys[login])  # type: ignore[arg-type]

    def start(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "yardstick.cli", "server", *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        deadline = give_up_at(60)
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                if (
                    httpx.get(self.url + "/healthz", timeout=1).json()["workers_alive"]
                    or "--no-worker" in self.args
                ):
                    return self.process
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError("the server did not come up: " + self.log.read_text()[-3000:])

    def workers(self) -> list[int]:
        """The server's worker processes (its children that multiprocessing spawned)."""
        assert self.process is not None
        return [pid for pid in children(self.process.pid) if "spawn_main" in _cmdline(pid)]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=patience(timeout))

    def wait(self, client: PlatformClient, submission_id: Any, timeout: float = 120.0) -> Any:
        return wait_for(client, submission_id, timeout)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@contextmanager
def server_process(
    tmp_path: Path,
    database_url: str | None,
    *,
    call_timeout_s: float = 60.0,
    extra: tuple[str, ...] = (),
    data_dir: Path | None = None,
    env: dict[str, str] | None = None,
    per_day: int = 50,
) -> Iterator[ServerProcess]:
    """A prepared install served by `yardstick server` in a process of its own; SIGKILLed (with whatever is
    left of its tree) if the test did not stop it. `data_dir`: where the install keeps its state (default:
    in `tmp_path`); `env`: the server's whole environment (default: this process's)."""
    settings = Settings(
        data_dir=data_dir or tmp_path / "platform", database_url=database_url, call_timeout_s=call_timeout_s
    )
    keys = prepare_install(settings, per_day=per_day)
    port = free_port()
    args = ["--data-dir", str(settings.data_dir), "--port", str(port), "--call-timeout", str(call_timeout_s)]
    if database_url:
        args += ["--database", database_url]
    served = ServerProcess(settings, keys, port, [*args, *extra], tmp_path / "server.log", env=env)
    try:
        yield served
    finally:
        if served.process is not None and served.process.poll() is None:
            left = descendants(served.process.pid)
            served.process.kill()
            served.process.wait(timeout=patience(10))
            kill_all(left)
