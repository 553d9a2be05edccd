"""A policy in a container against the same policy under `yardstick policy serve`: the cost of an image.

Both serve the session protocol on a unix socket on this machine, so the difference is podman's box (its
namespaces, no network, a read-only root, the control group of its limits) and nothing else:
  round trip   an observation of 8 floats and one 224×224×3 image answered by an 8×7 chunk, through our
               session client, the two taking turns; p50 of the container / p50 of the process
               (target <= 1.1x)
  start        from `podman run` (or the process's start) until a session is answered: cold (the image
               pulled from a registry on loopback first), warm (the image in podman's store, as a worker
               finds it for a run's second batch) and the process's; most of each is the server's Python
               importing its packages, so the target is on what the container adds to the process's
               start (target: <= 0.5 s)
  MT10         Meta-World MT10 with its scripted expert (state only), the engine in this process and the
               policy in a container, against the same episodes with the policy served by a process;
               steps per second of each (target: container >= 0.9x served)
The image is made here as the tests make theirs (this interpreter, the packages the policies import, and
the system libraries they link, imported by podman; nothing is pulled from outside). Needs podman, runc
and docker-registry (`make containers`). Run with `make bench` (or `python bench/images.py`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from machine import machine
from yardstick.engine import Component, RunRequest, Work
from yardstick.engine.run import prepare
from yardstick.engine.runtime import Runtime
from yardstick.hosted.limits import BoxLimits
from yardstick.wire.address import RemoteEndpoint, UnixSocket
from yardstick.wire.session import open_session
from yardstick.worker.boxes.containers import ContainerPolicyServer, Podman
from yardstick.worker.boxes.server import wait_serving

# The tests' image maker, shared rather than copied (tests/ is no package and not on mypy's path).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
image_helpers: Any = importlib.import_module("image_helpers")

ROUND_TRIP_TARGET = 1.1
WARM_TARGET_S = 0.5
MT10_TARGET = 0.9
POLICY = '''
import numpy as np
import yardstick as ys

CHUNK = np.arange(56, dtype=np.float32).reshape(8, 7)


@ys.policy(hz=15, action_chunk_len=8)
class Constant:
    """The same chunk for every observation: the bench times the box and the wire, nothing else."""

    @ys.infer
    def act(self, obs):
        return CHUNK
'''
EXPERT = "yardstick.catalog.metaworld:ScriptedExpert"
# What the expert imports beside what any policy server does (Meta-World and MuJoCo, and theirs).
EXPERT_PACKAGES = (
    "metaworld", "mujoco", "gymnasium", "farama_notifications", "glfw", "imageio", "scipy", "scipy.libs",
    "cffi", "_cffi_backend.cpython-311-x86_64-linux-gnu.so", "pycparser", "charset_normalizer", "packaging",
    "OpenGL",
)  # fmt: skip
LOCAL = "localhost/yardstick-bench"


def endpoint_of(socket: Path) -> RemoteEndpoint:
    return RemoteEndpoint(wire="websocket_unix", address=UnixSocket(uds=PurePosixPath(str(socket))))


class Served:
    """`yardstick policy serve REF` in a process of its own, on a unix socket in `folder`."""

    def __init__(self, ref: str, folder: Path, code: Path) -> None:
        self.socket = folder / f"served-{time.monotonic_ns()}.sock"
        self.endpoint = endpoint_of(self.socket)
        argv = [sys.executable, "-m", "yardstick.cli", "policy", "serve", ref, "--no-port"]
        argv += ["--uds", str(self.socket)]
        env = {**os.environ, "PYTHONPATH": f"{code}:{os.environ.get('PYTHONPATH', '')}"}
        quiet = subprocess.DEVNULL
        self.process = subprocess.Popen(argv, cwd=code, env=env, stdout=quiet, stderr=quiet)
        wait_serving(lambda: self.process.poll() is None, self.socket, self.endpoint, 120.0, str)

    @property
    def url(self) -> str:
        return self.endpoint.url

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def observation() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {
        "state": rng.standard_normal(8).astype(np.float32),
        "image.0": rng.integers(0, 256, (224, 224, 3), dtype=np.uint8),
        "prompt": "pick up the cube",
    }


def round_trips(endpoints: dict[str, RemoteEndpoint], count: int) -> dict[str, float]:
    """The p50 seconds of a round trip to each endpoint, taken in turns so the machine's load falls alike."""
    obs = observation()
    sessions = {name: open_session(endpoint) for name, endpoint in endpoints.items()}
    took: dict[str, list[float]] = {name: [] for name in endpoints}
    try:
        for session in sessions.values():
            for _ in range(50):
                session.infer(obs)
        for _ in range(20):
            for name, session in sessions.items():
                for _ in range(max(1, count // 20)):
                    began = time.perf_counter()
                    session.infer(obs)
                    took[name].append(time.perf_counter() - began)
    finally:
        for session in sessions.values():
            session.close()
    return {name: statistics.median(samples) for name, samples in took.items()}


def start_until_serving(make: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    made = make()
    return time.perf_counter() - began, made


def mt10_steps_per_s(policy_url: str, trials: int) -> float:
    """Steps per second of MT10's episodes, the engine in this process and the policy at `policy_url`,
    over a second batch (the worlds built and the session open in the first)."""
    work = Work(Component("mt10"), Component(policy_url), call_timeout_s=60.0)
    _, _, planned = prepare(RunRequest(work=work, trials=trials, workers=0))
    runtime = Runtime(work)
    try:
        list(runtime.run(planned[:10]))
        began = time.perf_counter()
        results = list(runtime.run(planned))
        took = time.perf_counter() - began
        assert all(r.finished for r in results), [r.error for r in results if r.error]
        return sum(r.steps for r in results) / took
    finally:
        runtime.close()


@contextmanager
def images(where: Path) -> Iterator[tuple[image_helpers.Registry, str, str]]:
    """(the registry, the Constant image pushed there by tag, the expert's image in the store)."""
    archive = image_helpers.build_rootfs(where / "constant", {"bench_policy.py": POLICY})
    image_helpers.import_image(archive, f"{LOCAL}/constant:v1", "bench_policy:Constant")
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    # Their metadata too: gymnasium asks for imageio's version.
    metadata = tuple(p.name for name in EXPERT_PACKAGES for p in site.glob(f"{name}-*.dist-info"))
    packages = (*image_helpers.PACKAGES, *EXPERT_PACKAGES, *metadata)
    expert = image_helpers.build_rootfs(where / "expert", {}, packages)
    # The expert renders nothing: MuJoCo is told of no GL (the image carries no EGL driver).
    image_helpers.import_image(expert, f"{LOCAL}/expert:v1", EXPERT, {"MUJOCO_GL": "glfw"})
    try:
        with image_helpers.registry(where / "registry") as registry:
            pushed = registry.push(f"{LOCAL}/constant:v1", "bench/constant:v1")
            yield registry, pushed, f"{LOCAL}/expert:v1"
    finally:
        image_helpers.remove_images(f"{LOCAL}/", "127.0.0.1:")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="round trips of each")
    parser.add_argument("--starts", type=int, default=5, help="warm starts timed")
    parser.add_argument("--trials", type=int, default=2, help="MT10 trials per task")
    args = parser.parse_args()
    if not image_helpers.available():
        raise SystemExit("bench/images.py needs podman, runc and docker-registry: make containers")
    print(machine())
    where = Path(tempfile.mkdtemp(prefix="bench-images-"))
    code = where / "code"
    code.mkdir()
    (code / "bench_policy.py").write_text(POLICY)
    limits = BoxLimits()
    with images(where) as (registry, pushed, expert_image):
        host = registry.host
        podman = Podman(where / "podman", "bench-images", insecure=(host,))
        sockets = where / "s"
        sockets.mkdir()

        def container(reference: str) -> ContainerPolicyServer:
            return ContainerPolicyServer(podman, reference, sockets, limits=limits)

        # Start-up: cold pulls from the registry first; warm finds the image in the store.
        pinned = pushed
        began = time.perf_counter()
        podman.pull(pinned, None)
        pull_s = time.perf_counter() - began
        cold_s, first = start_until_serving(lambda: container(pinned))
        first.close()
        warm = []
        for _ in range(args.starts):
            took, server = start_until_serving(lambda: container(pinned))
            warm.append(took)
            server.close()
        process = []
        for _ in range(args.starts):
            took, served = start_until_serving(lambda: Served("bench_policy:Constant", sockets, code))
            process.append(took)
            served.close()
        warm_s, process_s = statistics.median(warm), statistics.median(process)
        # Most of a start is the policy server's Python importing its packages, the same in both: the
        # container's own share is what it adds to the process's start.
        added = warm_s - process_s
        print(
            f"start until a session is answered: cold {pull_s + cold_s:.2f} s (pull {pull_s:.2f} s), warm "
            f"{warm_s:.2f} s, the process {process_s:.2f} s (medians of {args.starts}): the container adds "
            f"{added:.2f} s to a warm start (target <= {WARM_TARGET_S} s: "
            f"{'met' if added <= WARM_TARGET_S else 'NOT met'})"
        )

        # Round trips, the container and the process taking turns.
        boxed = container(pinned)
        served = Served("bench_policy:Constant", sockets, code)
        try:
            p50 = round_trips({"container": boxed.endpoint, "served": served.endpoint}, args.count)
        finally:
            boxed.close()
            served.close()
        ratio = p50["container"] / p50["served"]
        print(
            f"round trip p50 (one 224x224 image): container {p50['container'] * 1000:.2f} ms, served "
            f"{p50['served'] * 1000:.2f} ms: {ratio:.2f}x (target <= {ROUND_TRIP_TARGET}x: "
            f"{'met' if ratio <= ROUND_TRIP_TARGET else 'NOT met'})"
        )

        # MT10 with the expert in a container against the expert served by a process.
        boxed = container(expert_image)
        served = Served(EXPERT, sockets, code)
        try:
            rates: dict[str, list[float]] = {"container": [], "served": []}
            for _ in range(2):
                rates["container"].append(mt10_steps_per_s(boxed.url, args.trials))
                rates["served"].append(mt10_steps_per_s(served.url, args.trials))
        finally:
            boxed.close()
            served.close()
        best = {name: max(values) for name, values in rates.items()}
        mt10 = best["container"] / best["served"]
        print(
            f"MT10 expert, {args.trials} trials a task (best of 2): container {best['container']:.0f} "
            f"steps/s, served {best['served']:.0f} steps/s: {mt10:.2f}x (target >= {MT10_TARGET}x: "
            f"{'met' if mt10 >= MT10_TARGET else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
