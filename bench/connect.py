"""A robot on the act plane against our wire to the same policy: the cost of `sequence_ai.connect`'s path.

A platform on this machine serves the tests' `franka-reach` deployment to robots. The robot is the real
Sequences SDK (the venv apart), its observation 7 joints, a goal and a 64×64×3 camera frame:
  round trip   `policy.observe(obs)` then `policy.act()` — the observation posted to the worker over its TLS
               connection, the act answered by the policy from it, through the worker's wire session to the
               policy's box — p50 over `--acts`; against our session client asking the same policy server
               (the same version, in its own box on a unix socket) for the same observation: p50 of the
               robot / p50 of the wire (target <= 1.1x)
  first action from `sequence_ai.connect(...)` until the first act's answer, the worker already up (a robot
               that connects to a deployment its lab keeps warm), and cold (the worker started by the
               connect: its box, the policy's imports, its certificate)
Run with `python bench/connect.py` (about a minute); `make bench` runs it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select

from machine import machine
from yardstick.store.models import Org
from yardstick.store.states import HostedKind
from yardstick.wire.session import open_session
from yardstick.worker.players import deployment_server

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
harness_module: Any = importlib.import_module("platform_harness")
SEQ = ROOT / ".venv-seq" / "bin"
TARGET = 1.1
ROBOT = """
import json, sys, time
import numpy as np
import sequence_ai

acts = int(sys.argv[2])
rng = np.random.default_rng(0)
obs = {"joints": np.zeros(7, np.float32), "goal": np.ones(7, np.float32),
       "image": rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)}
began = time.perf_counter()
policy = sequence_ai.connect(model=sys.argv[1], startup_timeout_s=300)
policy.observe(obs)
policy.act()
first = time.perf_counter() - began
trips, handled = [], []
for _ in range(acts):
    t = time.perf_counter()
    policy.observe(obs)
    policy.act()
    trips.append(time.perf_counter() - t)
    handled.append(policy._last_perf.get("handler_ms") or 0.0)
policy.close()
print(json.dumps({"first_s": first, "trips": trips, "handled": handled}))
"""


def robot(harness: Any, acts: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=harness.url, SEQUENCES_API_KEY=harness.keys["alice"])
    done = subprocess.run(
        [str(SEQ / "python"), "-c", ROBOT, "franka-reach", str(acts)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the robot failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def wire(harness: Any, acts: int, sockets: Path) -> list[float]:
    """The same policy's version in a box of its own, asked through our session client."""
    platform = harness.platform
    with platform.db.reading() as session:
        org = session.execute(select(Org.id).where(Org.slug == "acme")).scalar_one()
    ready = platform.hosting.ready(org, HostedKind.POLICY, "franka-reach")
    assert ready is not None, "franka-reach has no ready version"
    version = ready[1]
    located = platform.hosting.located(version.id)
    server = deployment_server(harness.settings, located, platform.hosting.box_of(located), sockets, {})
    rng = np.random.default_rng(0)
    obs = {
        "joints": np.zeros(7, np.float32),
        "goal": np.ones(7, np.float32),
        "image": rng.integers(0, 255, (64, 64, 3), dtype=np.uint8),
    }
    try:
        wired = open_session(server.endpoint, reply_timeout=30.0, startup_timeout=60.0)
        wired.infer(obs, episode={"task": "robot", "seed": 0, "trial": 0})
        trips = []
        for _ in range(acts):
            t = time.perf_counter()
            wired.infer(obs)
            trips.append(time.perf_counter() - t)
        wired.close()
        return trips
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--acts", type=int, default=300)
    args = parser.parse_args()
    print(machine())
    if not (SEQ / "seq").exists():
        raise SystemExit("the Sequences CLI is missing: `make env` installs it in .venv-seq")
    folder = Path(tempfile.mkdtemp(prefix="bench-connect-"))
    try:
        with harness_module.running_platform(folder, None, act_idle_s=600.0) as harness:
            harness.wait_for_workers(60)
            code = folder / "franka-reach"
            shutil.copytree(ROOT / "tests" / "seq_examples" / "franka-reach", code)
            env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
            env.update(SEQUENCES_BASE_URL=harness.url, SEQUENCES_API_KEY=harness.keys["alice"])
            deployed = subprocess.run([str(SEQ / "seq"), "deploy", str(code)], env=env, capture_output=True,
                                      text=True, timeout=600)  # fmt: skip
            if deployed.returncode != 0:
                raise SystemExit(f"the deploy failed: {deployed.stderr}")
            cold = robot(harness, 5)
            warm = robot(harness, args.acts)
            baseline = wire(harness, args.acts, folder / "sockets")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    robot_p50 = statistics.median(warm["trips"]) * 1000
    wire_p50 = statistics.median(baseline) * 1000
    ratio = robot_p50 / wire_p50
    print(f"round trip p50 (observe + act, {args.acts} acts): robot on the act plane {robot_p50:.2f} ms, "
          f"our wire {wire_p50:.2f} ms = {ratio:.2f}x (target <= {TARGET}x)")  # fmt: skip
    print(f"the worker's own share of an act (its handler, p50): {statistics.median(warm['handled']):.2f} ms")
    print(f"first action after connect: worker warm {warm['first_s']:.2f} s, cold {cold['first_s']:.2f} s")


if __name__ == "__main__":
    main()
