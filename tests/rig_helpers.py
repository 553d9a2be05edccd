"""A lab for rig tests: a platform, policy servers for a Franka, rigs with keys, a rig process played in a
thread (`RigAgent` with the simulated Franka and its station console), and an operator at its console's
routes."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from platform_client.eval_plan import EvalPlan

from deadlines import give_up_at
from platform_harness import Harness, running_platform
from yardstick.core import rigs
from yardstick.rig.agent import RigAgent, RigOptions
from yardstick.rig.client import PlatformLink
from yardstick.rig.console import Console
from yardstick.rig.station import Station
from yardstick.sdk.robots import robot_spec
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.serve import PolicyServer, ServeOptions

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).parent))
import toys

WAIT_S = 240.0


@dataclass
class Lab:
    harness: Harness
    keys: dict[str, str]  # rig keys by rig name
    ports: dict[str, int]  # policy servers by name


@contextmanager
def running_lab(where: Path) -> Iterator[Lab]:
    """A platform (no worker: rigs play rig plans), two policy servers for a Franka (`toys.NudgeArm`,
    `toys.HoldArm`) and four rigs with their keys: two of acme's Frankas, globex's Franka, acme's YAM."""
    hosts = {
        "nudge": PolicyHost(toys.NudgeArm, model_id="nudge", reference="toys:NudgeArm"),
        "hold": PolicyHost(toys.HoldArm, model_id="hold", reference="toys:HoldArm"),
        "crash": PolicyHost(toys.CrashingArm, model_id="crash", reference="toys:CrashingArm"),
    }
    servers = {name: PolicyServer({name: host}, ServeOptions(port=0)).start() for name, host in hosts.items()}
    try:
        with running_platform(where, None, workers=0, allow_remote=("127.0.0.1",)) as harness:
            keys = {}
            with harness.platform.db.writing() as session:
                for org, name, shape in (
                    ("acme", "lab-franka-1", "franka"),
                    ("acme", "lab-franka-2", "franka"),
                    ("globex", "globex-franka", "franka"),
                    ("acme", "lab-yam", "yam"),
                ):
                    keys[name] = rigs.register(session, org, name, shape).plaintext
            yield Lab(harness, keys, {name: server.port for name, server in servers.items()})
    finally:
        for server in servers.values():
            server.stop()


def plan(
    lab: Lab, key: str, *, org: str = "acme", cap: int = 4, endpoints: tuple[str, ...] = ("nudge", "hold")
) -> EvalPlan:
    return EvalPlan.model_validate(
        {
            "request_type": {"type": "private_eval", "org": org},
            "eval": "franka.tabletop",
            "endpoints": [
                {
                    "name": name,
                    "wire": "websocket",
                    "address": {"host": "127.0.0.1", "port": lab.ports[name], "path": "/api/v1/session"},
                }
                for name in endpoints
            ],
            "episodes_per_endpoint": 1,
            "cap_per_episode_sec": cap,
            "transaction_key": key,
        }
    )


def until(check: Any, what: str, timeout: float = WAIT_S, about: Any = None) -> Any:
    """`check()`'s first truthy answer, polled until a deadline generous for a loaded machine; `about()` says
    what stood instead."""
    deadline = give_up_at(timeout)
    while not (answer := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {about() if about else ''}"
        time.sleep(0.05)
    return answer


class Operator:
    """A person at the station console, through its HTTP routes (the page's own calls)."""

    def __init__(self, address: str) -> None:
        self.http = httpx.Client(base_url=address, timeout=30)

    def state(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.http.get("/state").json()
        return answer

    def at(self, phase: str, errors: list[BaseException] | None = None) -> dict[str, Any]:
        def there() -> dict[str, Any] | None:
            assert not errors, errors  # the rig's loop failed: say how, not that the console never moved
            now = self.state()
            return now if now["phase"] == phase else None

        return until(there, f"the console at {phase}")

    def press(self, path: str, body: dict[str, Any] | None = None) -> None:
        answer = self.http.post(path, json=body) if body is not None else self.http.post(path)
        assert answer.status_code == 200, answer.text


@dataclass
class RunningRig:
    agent: RigAgent
    operator: Operator
    console: Console
    thread: threading.Thread
    errors: list[BaseException]


def start_rig(lab: Lab, name: str, *, verdict_wait_s: float = 120.0, url: str | None = None) -> RunningRig:
    """The rig `name` playing in a thread; it reaches the platform at `url` (a proxy) where given."""
    from yardstick.catalog.sim_franka import SimulatedFranka

    spec = robot_spec(SimulatedFranka)
    station = Station(name, spec.shape, tuple(spec.cameras))
    console = Console(station)
    address = console.start()
    link = PlatformLink(url or lab.harness.url, lab.keys[name])
    agent = RigAgent(
        link, SimulatedFranka, spec, station, RigOptions(verdict_wait_s=verdict_wait_s, once=True)
    )
    errors: list[BaseException] = []

    def run() -> None:
        try:
            agent.run()
        except BaseException as exc:  # the test reads it
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return RunningRig(agent, Operator(address), console, thread, errors)


def stop_rig(rig: RunningRig) -> None:
    rig.agent.quit.set()
    rig.agent.stop_robot()
    rig.thread.join(timeout=WAIT_S)
    rig.console.stop()
    rig.agent.link.close()
