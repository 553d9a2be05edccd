"""A robot on the act plane against our wire to the same policy: the cost of `sequence_ai.connect`'s path.

A platform on this machine serves the tests' `franka-reach` deployment to robots. The robot is the real
Sequences SDK (the venv apart), its observation 7 joints, a goal and a 64×64×3 camera frame:
  round trip   `policy.observe(obs)` then `policy.act()` — the observation posted to the worker over its TLS
               connection, the act answered by the policy from it, through the worker's wire session to the
               policy's box — p50 over `--acts`; against our session client asking the same policy server
               (the same version, in its own box on a unix socket) for the same observation: p50 of the
               robot / p50 of the wire (target <= 1.1x)
  the floor    the same robot loop, the real SDK, against a gateway and a worker of the same make (uvicorn,
               Starlette, the worker's TLS pinned) in a process of their own that answer at once: no policy,
               no seats, no database — what the SDK's protocol itself costs a step on this machine.
               The act plane's own overhead is the robot's p50 against the floor's plus the wire's, on equal
               work (target <= 1.1x); the robot against the wire alone is printed beside
  first action from `sequence_ai.connect(...)` until the first act's answer, the worker already up (a robot
               that connects to a deployment its lab keeps warm), and cold (the worker started by the
               connect: its box, the policy's imports, its certificate)
Run with `python bench/connect.py` (about a minute); `make bench` runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
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


def observation() -> dict[str, np.ndarray]:
    """What the robot observes each step, as ROBOT makes it: 7 joints, a goal and a 64×64×3 frame."""
    rng = np.random.default_rng(0)
    return {
        "joints": np.zeros(7, np.float32),
        "goal": np.ones(7, np.float32),
        "image": rng.integers(0, 255, (64, 64, 3), dtype=np.uint8),
    }


def robot(harness: Any, acts: int) -> dict[str, Any]:
    return robot_at(harness.url, harness.keys["alice"], "franka-reach", acts)


def robot_at(url: str, key: str, model: str, acts: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=url, SEQUENCES_API_KEY=key)
    done = subprocess.run(
        [str(SEQ / "python"), "-c", ROBOT, model, str(acts)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the robot failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


FLOOR_SERVER = """
import asyncio, json, sys, uvicorn, msgpack
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

gateway_port, worker_port, cert, key, fingerprint = sys.argv[1:6]
FORMATS = {"X-Seq-Act-Formats": "application/x-seq-msgpack, x-seq-observe/1, x-seq-call/1"}
seen = {}

async def connect(request):
    return JSONResponse({
        "model": "floor", "version": 1, "worker_url": f"https://127.0.0.1:{worker_port}",
        "cert_fingerprint": fingerprint, "tls": "pinned", "direct_secret": "floor",
        "lease": {"ttl_s": 300, "expires_at": "2099-01-01T00:00:00+00:00", "epoch": 1},
        "keepalive": {"every_s": 60, "seat_ttl_s": 240}, "params": {}, "hz": 15,
        "action_chunk_valid_len": 1, "action_chunk_replan_at": 1, "io": None,
        "request_timeout_s": 60, "standby": None})

async def seat(request):
    return JSONResponse({"held": True, "ready": True, "status": "running", "released": True,
                         "keepalive": {"every_s": 60, "seat_ttl_s": 240}, "every_s": 60, "seat_ttl_s": 240})

async def observe(request):
    body = msgpack.unpackb(await request.body(), raw=False, strict_map_key=False)
    frames = [int(f["seq"]) for f in body.get("frames") or []]
    seen[body["episode_id"]] = max([seen.get(body["episode_id"], 0), *(n + 1 for n in frames)])
    return JSONResponse({"through": seen[body["episode_id"]]}, headers=FORMATS)

async def act(request):
    await request.body()
    return JSONResponse({"outputs": [[0.0] * 8], "perf": {"handler_ms": 0.0}}, headers=FORMATS)

async def ping(request):
    return JSONResponse({"ok": True}, headers=FORMATS)

gateway = Starlette(routes=[Route("/v1/act/connect", connect, methods=["POST"]),
                            Route("/v1/act/ready", seat, methods=["GET"]),
                            Route("/v1/act/keepalive", seat, methods=["POST"]),
                            Route("/v1/act/release", seat, methods=["POST"]),
                            Route("/v1/latency", seat, methods=["POST"])])
worker = Starlette(routes=[Route("/observe", observe, methods=["POST"]), Route("/act", act, methods=["POST"]),
                           Route("/act/episode_end", seat, methods=["POST"]), Route("/ping", ping)])

async def main():
    servers = [
        uvicorn.Server(uvicorn.Config(gateway, host="127.0.0.1", port=int(gateway_port), log_level="warning",
                                      lifespan="off")),
        uvicorn.Server(uvicorn.Config(worker, host="127.0.0.1", port=int(worker_port), log_level="warning",
                                      lifespan="off", ssl_certfile=cert, ssl_keyfile=key,
                                      timeout_keep_alive=300)),
    ]
    await asyncio.gather(*(s.serve() for s in servers))

asyncio.run(main())
"""


@contextlib.contextmanager
def floor_servers(folder: Path) -> Iterator[str]:
    """A gateway and a worker that answer at once (no policy, no seats, no database), in a process of their
    own: the address of the gateway, for the real SDK to connect through."""
    from yardstick.worker.act_server.certs import make_certificate

    certificate = make_certificate(folder / "floor", "127.0.0.1")
    gateway_port, worker_port = harness_module.free_port(), harness_module.free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", FLOOR_SERVER, str(gateway_port), str(worker_port),
         str(certificate.cert_file), str(certificate.key_file), certificate.fingerprint]
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", worker_port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the floor's servers did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{gateway_port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


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
    obs = observation()
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
    parser.add_argument("--rounds", type=int, default=3)
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
            rounds = []
            with floor_servers(folder) as gateway:
                # Interleaved, so a machine busy with something else weighs on all three alike.
                for n in range(args.rounds):
                    warm = robot(harness, args.acts)
                    protocol = robot_at(gateway, "seq_floor", "floor", args.acts)
                    baseline = wire(harness, args.acts, folder / f"sockets-{n}")
                    rounds.append((warm, protocol, baseline))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratios = []
    for n, (warm, protocol, baseline) in enumerate(rounds, 1):
        robot_p50 = statistics.median(warm["trips"]) * 1000
        floor_p50 = statistics.median(protocol["trips"]) * 1000
        wire_p50 = statistics.median(baseline) * 1000
        ratios.append(robot_p50 / (floor_p50 + wire_p50))
        print(f"round {n} p50 of {args.acts} (observe + act): robot on the act plane {robot_p50:.2f} ms; the "
              f"SDK's loop against a gateway and worker answering at once {floor_p50:.2f} ms; our wire to "
              f"the policy {wire_p50:.2f} ms: robot / (floor + wire) = {ratios[-1]:.2f}x, robot / wire "
              f"alone = {robot_p50 / wire_p50:.2f}x")  # fmt: skip
    print(
        f"the act plane's cost over the SDK's protocol and our wire, median of {len(ratios)} rounds: "
        f"{statistics.median(ratios):.2f}x (target <= {TARGET}x)"
    )
    warm = rounds[-1][0]
    print(f"the worker's own share of an act (its handler, p50): {statistics.median(warm['handled']):.2f} ms")
    print(f"first action after connect: worker warm {warm['first_s']:.2f} s, cold {cold['first_s']:.2f} s")


if __name__ == "__main__":
    main()
