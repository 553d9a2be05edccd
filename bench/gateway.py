"""The gateway under load, and the queue's overhead over the engine.

1. `submissions.get` and `rankings.get` under 50 concurrent clients: p50, p99 and requests/s, on SQLite
   and on PostgreSQL (the gateway in its own process, as `yardstick server` runs it).
2. MT10 (the expert, 5 trials a task) through the platform's queue and workers against the engine's own
   process pool on the same episodes, both with one worker per core: episodes/s and their ratios from cold
   (the platform's first run; the pool's whole run) and with workers up (the platform's second run, whose
   workers kept what they built; the pool's run less its workers' start), target >= 0.9.
Run with `make bench`. PostgreSQL is the machine's (YARDSTICK_BENCH_POSTGRES, default
postgresql://postgres@127.0.0.1:5432/test), in a schema of its own that is dropped after.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from yardstick.core import admin
from yardstick.core.install import open_install
from yardstick.core.settings import Settings

PG = os.environ.get("YARDSTICK_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
TRIALS = 5


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def yardstick(*args: str) -> list[str]:
    return [sys.executable, "-m", "yardstick.cli", *args]


def prepare(data_dir: Path, database: str | None) -> str:
    install = open_install(Settings(data_dir=data_dir, database_url=database))
    with install.db.writing() as session:
        admin.create_org(session, "bench", per_day=10_000, concurrent=10_000)
        admin.create_user(session, "runner", orgs=["bench"], alias="runner")
        key = admin.create_key(session, "runner").plaintext
    install.close()
    return key


def serve(data_dir: Path, database: str | None, port: int) -> subprocess.Popen[bytes]:
    args = ["server", "--data-dir", str(data_dir), "--port", str(port), "--no-worker"]
    if database:
        args += ["--database", database]
    process = subprocess.Popen(yardstick(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the gateway did not come up")


def workers(data_dir: Path, database: str | None, count: int) -> subprocess.Popen[bytes]:
    args = ["worker", "--data-dir", str(data_dir), "--concurrency", str(count)]
    if database:
        args += ["--database", database]
    return subprocess.Popen(yardstick(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def submit_and_wait(base: str, key: str, tag: str) -> tuple[str, float]:
    headers = {"Authorization": f"Bearer {key}"}
    plan = {
        "request_type": {"type": "nebius_competition"},
        "eval": "metaworld.mt10",
        "endpoints": [{"name": "expert", "kind": "served", "wire": "websocket", "spec": "metaworld-expert"}],
        "episodes_per_endpoint": TRIALS,
        "transaction_key": tag,
    }
    started = time.perf_counter()
    created = httpx.post(f"{base}/v1/submissions.create", json=plan, headers=headers, timeout=60).json()
    submission = created["submission_id"]
    while True:
        view = httpx.get(
            f"{base}/v1/submissions.get", params={"id": submission}, headers=headers, timeout=60
        ).json()
        if view["status"] in ("finished", "errored", "cancelled"):
            if view["status"] != "finished":
                raise SystemExit(f"the bench run ended {view['status']}: {view.get('reason')}")
            return submission, time.perf_counter() - started
        time.sleep(0.05)


def load(
    base: str, key: str, path: str, params: dict[str, str], clients: int, each: int
) -> tuple[list[float], float]:
    """Each request's latency, and the wall time of them all."""
    took: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        mine = []
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
            for _ in range(each):
                started = time.perf_counter()
                assert http.get(path, params=params).status_code == 200
                mine.append(time.perf_counter() - started)
        with lock:
            took.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return took, time.perf_counter() - started


def report(name: str, measured: tuple[list[float], float]) -> None:
    took, wall = measured
    print(
        f"  {name:<18} p50 {statistics.median(took) * 1000:7.2f} ms   p99 "
        f"{float(np.percentile(took, 99)) * 1000:7.2f} ms   {len(took) / wall:7.0f} req/s",
        flush=True,
    )


def engine_rates() -> tuple[float, float]:
    """The engine pool's episodes/s from cold, and once its workers are up (its wall less their start)."""
    from yardstick.engine import Component, RunRequest, Work, evaluate
    from yardstick.engine.pool import PoolExecutor, default_workers

    outcome = evaluate(
        RunRequest(work=Work(Component("mt10"), Component("expert")), trials=TRIALS),
        executor=PoolExecutor(default_workers()),
    )
    episodes = len(outcome.results)
    return episodes / outcome.wall_s, episodes / (outcome.wall_s - max(outcome.cold_starts))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--each", type=int, default=20, help="requests per client")
    args = parser.parse_args()
    from yardstick.engine.pool import default_workers

    cores = default_workers()
    for database in ("sqlite", "postgresql"):
        schema = None
        url: str | None = None
        if database == "postgresql":
            import psycopg

            schema = f"bench_{secrets.token_hex(4)}"
            try:
                with psycopg.connect(PG, autocommit=True) as conn:
                    conn.execute(f"CREATE SCHEMA {schema}")
            except psycopg.OperationalError as exc:
                print(f"{database}: skipped ({exc})")
                continue
            url = f"{PG}?options=-csearch_path%3D{schema}"
        with tempfile.TemporaryDirectory() as folder:
            data = Path(folder)
            key = prepare(data, url)
            port = free_port()
            gateway = serve(data, url, port)
            pool = workers(data, url, cores)
            base = f"http://127.0.0.1:{port}"
            try:
                submission, platform_s = submit_and_wait(base, key, "bench-1")
                print(
                    f"{database}: gateway under {args.clients} concurrent clients ({args.each} requests each)"
                )
                report(
                    "submissions.get",
                    load(base, key, "/v1/submissions.get", {"id": submission}, args.clients, args.each),
                )
                report(
                    "rankings.get",
                    load(base, key, "/v1/rankings.get", {"board": "metaworld.mt10"}, args.clients, args.each),
                )
                _, warm_s = submit_and_wait(base, key, "bench-2")  # the workers kept what they built
            finally:
                pool.terminate()
                pool.wait(timeout=60)
                gateway.terminate()
                gateway.wait(timeout=30)
            episodes = 10 * TRIALS
            engine_cold, engine_warm = engine_rates()
            cold, warm = episodes / platform_s, episodes / warm_s
            print(
                f"  MT10 x {TRIALS}, {cores} workers, episodes/s: from cold, engine {engine_cold:.1f} and "
                f"queue {cold:.1f} (ratio {cold / engine_cold:.2f}); workers up, engine {engine_warm:.1f} "
                f"and queue {warm:.1f} (ratio {warm / engine_warm:.2f}, target >= 0.9)",
                flush=True,
            )
        if schema is not None:
            import psycopg

            with psycopg.connect(PG, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
