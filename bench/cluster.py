"""What a lab's cluster costs and gives on this machine: episodes on Ray against the local pool, Ray's
start-up, and a run's artifacts in an S3-compatible store against the data folder.

Episodes: Meta-World MT10 with its scripted expert, state only, the same episodes two ways in one run, each
with as many players as this machine has cores:
  pool   the process pool (`PoolExecutor`)
  ray    Ray actors on a one-node cluster started here (`RayExecutor`)
Warm throughput is timed from the moment every player has handed back its first episode (all built) to the
last result, over the episodes landed in between: builds are apart (printed as cold starts). Target: Ray
>= 0.9x the pool's episodes a second. The ways run `--rounds` times, interleaved; each way's best counts.

Start-up: `ray start --head` until a driver is connected, and one actor's build against one pool process's.

Store: a run's objects as a worker writes them (per episode a record of 2 KB and a video of 200 KB) put and
read back whole, moto's S3 server on loopback against the data folder (`LocalArtifactStore`, no fsync, as a
worker writes). moto is a stand-in: its figures bound the client's and the protocol's cost on loopback,
not a real store's disks.
Run with `make bench` (or `python bench/cluster.py`).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from machine import machine
from yardstick.core.artifacts import ArtifactStore, LocalArtifactStore
from yardstick.engine import Component, RunRequest, Work
from yardstick.engine.executors import Executor
from yardstick.engine.pool import PoolExecutor, default_workers
from yardstick.engine.results import EpisodeSpec
from yardstick.engine.run import prepare

TARGET = 0.9
RECORD = os.urandom(2 << 10)
VIDEO = os.urandom(200 << 10)
BUCKET = "bench"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def ray_head(cpus: int) -> Iterator[tuple[str, float]]:
    """A one-node Ray cluster of its own (its address, the seconds until a driver was connected)."""
    import ray

    folder = Path(tempfile.mkdtemp(prefix="ys-bench-ray-", dir="/tmp"))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    os.environ.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    port = _free_port()
    began = time.perf_counter()
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", f"--port={port}",
         "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}", f"--temp-dir={folder}",
         "--include-dashboard=false"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
                break
            except ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield address, time.perf_counter() - began
    finally:
        ray.shutdown()
        os.killpg(head.pid, 15)
        head.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def warm_rate(executor: Executor, work: Work, planned: list[EpisodeSpec], players: int) -> float:
    """Episodes a second once every player has landed its first episode (all built)."""
    landed: list[float] = []
    for result in executor.run(work, planned):
        assert result.finished, result.error
        landed.append(time.perf_counter())
    if len(landed) <= players:
        raise SystemExit(f"--trials: {len(planned)} episodes leave none to time past {players} builds")
    return (len(landed) - players) / (landed[-1] - landed[players - 1])


def store_rate(store: ArtifactStore, episodes: int) -> tuple[float, float]:
    """(MB/s written, MB/s read back) of a run's objects."""
    run = 0x51A7
    began = time.perf_counter()
    for index in range(episodes):
        folder = f"attempts/1/episodes/{index:06d}"
        store.put(run, f"{folder}/record.json", RECORD, "application/json", durable=False)
        store.put(run, f"{folder}/top.mp4", VIDEO, "video/mp4", durable=False)
    wrote = time.perf_counter() - began
    began = time.perf_counter()
    for index in range(episodes):
        for name in ("record.json", "top.mp4"):
            with store.open(run, f"attempts/1/episodes/{index:06d}/{name}") as stream:
                stream.read()
    read = time.perf_counter() - began
    megabytes = episodes * (len(RECORD) + len(VIDEO)) / 1e6
    return megabytes / wrote, megabytes / read


def client_rates(episodes: int) -> dict[str, tuple[float, float]]:
    """(MB/s written, MB/s read back) of the same objects through each S3 client at hand, to the bucket the
    environment names: boto3 (ours), and obstore (Rust, said to be faster) when it is installed."""
    from yardstick.core.s3_artifacts import s3_client

    names = [f"clients/{n:06d}/{name}" for n in range(episodes) for name in ("record.json", "top.mp4")]
    bodies = [RECORD if name.endswith(".json") else VIDEO for name in names]
    megabytes = sum(len(body) for body in bodies) / 1e6
    rates: dict[str, tuple[float, float]] = {}

    client = s3_client()
    began = time.perf_counter()
    for name, body in zip(names, bodies, strict=True):
        client.put_object(Bucket=BUCKET, Key=f"boto3/{name}", Body=body)
    wrote = time.perf_counter() - began
    began = time.perf_counter()
    for name in names:
        client.get_object(Bucket=BUCKET, Key=f"boto3/{name}")["Body"].read()
    rates["boto3"] = (megabytes / wrote, megabytes / (time.perf_counter() - began))
    try:
        import obstore
        from obstore.store import S3Store
    except ModuleNotFoundError:
        return rates
    store = S3Store(
        BUCKET,
        endpoint=os.environ["AWS_ENDPOINT_URL"],
        region=os.environ["AWS_DEFAULT_REGION"],
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )
    began = time.perf_counter()
    for name, body in zip(names, bodies, strict=True):
        obstore.put(store, f"obstore/{name}", body)
    wrote = time.perf_counter() - began
    began = time.perf_counter()
    for name in names:
        obstore.get(store, f"obstore/{name}").bytes()
    rates["obstore"] = (megabytes / wrote, megabytes / (time.perf_counter() - began))
    return rates


@contextmanager
def moto_bucket() -> Iterator[str]:
    from yardstick.core.s3_artifacts import s3_client

    port = _free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        s3_client().create_bucket(Bucket=BUCKET)
        yield f"s3://{BUCKET}/runs"
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--trials", type=int, default=6, help="trials a task of MT10's ten")
    parser.add_argument("--episodes", type=int, default=100, help="a run's episodes for the store")
    args = parser.parse_args()
    try:
        import ray  # noqa: F401 -- only asked whether it is installed
    except ModuleNotFoundError:
        raise SystemExit("Ray is not installed: pip install 'yardstick[cluster]'") from None
    from yardstick.engine.ray_executor import RayExecutor

    print(machine())
    players = default_workers()
    work = Work(Component("mt10"), Component("expert"), call_timeout_s=60.0)
    _, _, planned = prepare(RunRequest(work=work, trials=args.trials, workers=0))
    print(f"episodes: MT10 expert, {len(planned)} episodes, {players} players each way")
    best = {"pool": 0.0, "ray": 0.0}
    cold: dict[str, list[float]] = {"pool": [], "ray": []}
    with ray_head(players) as (address, started):
        print(f"start-up: ray start --head until a driver connected: {started:.1f} s")
        for _ in range(args.rounds):
            pool = PoolExecutor(players)
            best["pool"] = max(best["pool"], warm_rate(pool, work, planned, players))
            cold["pool"] += pool.cold_starts
            on_ray = RayExecutor(address, players)
            best["ray"] = max(best["ray"], warm_rate(on_ray, work, planned, players))
            cold["ray"] += on_ray.cold_starts
    for way in ("pool", "ray"):
        print(f"  {way:<5} {best[way]:6.2f} episodes/s warm (best of {args.rounds}); cold start median "
              f"{sorted(cold[way])[len(cold[way]) // 2]:.2f} s")  # fmt: skip
    ratio = best["ray"] / best["pool"]
    print(f"  ray / pool: {ratio:.2f}x  (target >= {TARGET}x: {'met' if ratio >= TARGET else 'NOT met'})")

    folder = Path(tempfile.mkdtemp(prefix="ys-bench-store-"))
    try:
        local_w, local_r = store_rate(LocalArtifactStore(folder), args.episodes)
        from yardstick.core.s3_artifacts import S3ArtifactStore

        with moto_bucket() as url:
            s3_w, s3_r = store_rate(S3ArtifactStore(url), args.episodes)
            clients = client_rates(args.episodes)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"store: {args.episodes} episodes' objects (a 2 KB record and a 200 KB video each), boto3")
    print(f"  folder  write {local_w:7.1f} MB/s  read {local_r:7.1f} MB/s")
    print(f"  bucket  write {s3_w:7.1f} MB/s  read {s3_r:7.1f} MB/s  (moto on loopback)")
    print(f"  bucket / folder: write {s3_w / local_w:.3f}x, read {s3_r / local_r:.3f}x")
    boto_w, boto_r = clients["boto3"]
    print(f"clients, the same objects to the same bucket: boto3 write {boto_w:.1f} MB/s, read "
          f"{boto_r:.1f} MB/s")  # fmt: skip
    if "obstore" in clients:
        obs_w, obs_r = clients["obstore"]
        print(f"  obstore write {obs_w:.1f} MB/s, read {obs_r:.1f} MB/s: obstore / boto3 write "
              f"{obs_w / boto_w:.2f}x, read {obs_r / boto_r:.2f}x")  # fmt: skip
    else:
        print("  obstore is not installed (pip install obstore): not measured")


if __name__ == "__main__":
    main()
