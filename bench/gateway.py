"""The gateway under load beside a trivial route served the same way, and the queue against the engine alone.

1. Gateway (`wrk`, 50 connections): a trivial FastAPI route served as `yardstick server` serves the gateway
   (`gateway.serving`, one process) is the ceiling; beside it, in the same run, every read route of ours
   (`/healthz`, `users.me`, `submissions.get`, `rankings.get`, the Sequences `GET /v1/eval/{id}`) on SQLite
   and PostgreSQL, with one HTTP process and with `--http-workers 2`. Each prints req/s, p50 and p99 and
   its ratios to the trivial route's; targets: req/s at least half the trivial route's, p99 at most twice
   its, and p99 under 50 ms. Without `wrk` this part is skipped, saying so (`make bench` installs Debian's).
2. Queue (equal work): MT10 (the expert, state only, nothing recorded) through the platform — a catalogue eval
   of the same benchmark, played by `yardstick worker` — against the engine's own process pool on the same
   episodes, both with one worker per core, the best of two rounds. From cold: the pool's whole run against
   the platform's first run (the workers' start, until each beat, printed apart); warm: the pool's run less
   its workers' start against the platform's second run (its workers kept what they built). Target: >= 0.9
   both.

Run with `make bench` (or `.venv/bin/python bench/gateway.py --help`). PostgreSQL is the machine's
(YARDSTICK_BENCH_POSTGRES, default postgresql://postgres@127.0.0.1:5432/test), in a schema of its own that is
dropped after.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from machine import machine
from yardstick.core import admin
from yardstick.core.install import open_install
from yardstick.core.settings import Settings

PG = os.environ.get("YARDSTICK_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
TRIALS = 5
BENCH_EVAL = "bench.mt10"  # MT10 as the engine plays it by default: state only, nothing recorded
TRIVIAL_PATH = "/trivial"
# The targets the issue sets, against the trivial route measured in the same run.
RATE_AT_LEAST, P99_AT_MOST, P99_MS = 0.5, 2.0, 50.0
QUEUE_AT_LEAST = 0.9
ROUNDS = 2  # of the queue against the engine, the best of each kept


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def yardstick(*args: str) -> list[str]:
    return [sys.executable, "-m", "yardstick.cli", *args]


def wait_up(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode} before it served")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"{what} did not come up")


@contextlib.contextmanager
def running(args: list[str], url: str, what: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_up(url, process, what)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def serve_trivial(port: int) -> None:
    """The ceiling: one trivial route, in a FastAPI app served exactly as the gateway is."""
    from fastapi import FastAPI

    from yardstick.gateway.serving import serve

    app = FastAPI()

    @app.get(TRIVIAL_PATH)
    def trivial() -> dict[str, str]:
        # A plain `def`, as our read routes are: FastAPI runs it in the threadpool as it runs theirs.
        return {"status": "ok"}

    serve(app, host="127.0.0.1", port=port, log_level="warning")


# --- load ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    rate: float  # requests a second
    p50_ms: float
    p99_ms: float
    failed: int  # non-2xx answers, socket errors and time-outs


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def wrk(url: str, key: str | None, clients: int, seconds: float) -> Load:
    """`wrk` on `url` with `clients` connections for `seconds` (after a second of warming up)."""
    headers = ["-H", f"Authorization: Bearer {key}"] if key else []
    base = ["wrk", "-t2", f"-c{clients}", "--latency", *headers, url]
    subprocess.run([*base[:3], "-d1s", *base[3:]], capture_output=True, check=True)  # warm up
    out = subprocess.run(
        [*base[:3], f"-d{seconds:g}s", *base[3:]], capture_output=True, check=True, text=True
    ).stdout
    percent = dict(re.findall(r"^\s+(50|99)%\s+(\S+)\s*$", out, re.MULTILINE))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    failed = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if errors:
        failed += sum(int(n) for n in errors.groups())
    return Load(rate, _ms(percent["50"]), _ms(percent["99"]), failed)


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report_load(name: str, load: Load, ceiling: Load | None) -> None:
    line = f"    {name:<22} {load.rate:7.0f} req/s   p50 {load.p50_ms:6.2f} ms   p99 {load.p99_ms:6.2f} ms"
    if load.failed:
        line += f"   ({load.failed} failed)"
    if ceiling is not None:
        rate, p99 = load.rate / ceiling.rate, load.p99_ms / ceiling.p99_ms
        line += (
            f"   x trivial: req/s {rate:.2f} (>= {RATE_AT_LEAST}) p99 {p99:.2f} (<= {P99_AT_MOST:g}); "
            f"{verdict(rate >= RATE_AT_LEAST and p99 <= P99_AT_MOST and load.p99_ms < P99_MS)}"
        )
    print(line, flush=True)


# --- the platform ----------------------------------------------------------------------------------------


def prepare(data_dir: Path, database: str | None) -> str:
    install = open_install(Settings(data_dir=data_dir, database_url=database))
    with install.db.writing() as session:
        admin.create_org(session, "bench", per_day=10_000, concurrent=10_000)
        admin.create_user(session, "runner", orgs=["bench"], alias="runner")
        key = admin.create_key(session, "runner").plaintext
        admin.create_eval(
            session, BENCH_EVAL, "mt10", title="MT10 (bench)", choice=admin.EvalTasks(trials=TRIALS)
        )
    install.close()
    return key


def server_args(data_dir: Path, database: str | None, port: int, http_workers: int) -> list[str]:
    args = ["server", "--data-dir", str(data_dir), "--port", str(port), "--no-worker"]
    if http_workers > 1:
        args += ["--http-workers", str(http_workers)]
    if database:
        args += ["--database", database]
    return yardstick(*args)


def start_workers(data_dir: Path, database: str | None, count: int) -> tuple[subprocess.Popen[bytes], float]:
    """`yardstick worker` with `count` processes, and the seconds until each of them had beaten."""
    from sqlalchemy import func, select

    from yardstick.store.db import Database
    from yardstick.store.models import WorkerBeat

    db = Database(Settings(data_dir=data_dir, database_url=database).database)
    beats = select(func.count()).select_from(WorkerBeat)  # a row a worker process, by its unique name
    with db.reading() as session:
        before = session.execute(beats).scalar_one()
    args = ["worker", "--data-dir", str(data_dir), "--concurrency", str(count)]
    if database:
        args += ["--database", database]
    started = time.perf_counter()
    process = subprocess.Popen(yardstick(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        with db.reading() as session:
            if session.execute(beats).scalar_one() >= before + count:
                break
        time.sleep(0.01)
    db.close()
    return process, time.perf_counter() - started


def submit_and_wait(client: httpx.Client, key: str, tag: str) -> tuple[str, float]:
    """The submission's id and its seconds from create to finished (all `TRIALS * 10` episodes done).

    Polled on one kept connection: `httpx.get` builds a client (and its TLS context) a call, 28 ms of CPU
    here, which polling every 20 ms took from the two cores the workers play on."""
    headers = {"Authorization": f"Bearer {key}"}
    plan = {
        "request_type": {"type": "nebius_competition"},
        "eval": BENCH_EVAL,
        "endpoints": [{"name": "expert", "kind": "served", "wire": "websocket", "spec": "metaworld-expert"}],
        "episodes_per_endpoint": TRIALS,
        "transaction_key": tag,
    }
    started = time.perf_counter()
    created = client.post("/v1/submissions.create", json=plan, headers=headers).json()
    submission = created["submission_id"]
    while True:
        view = client.get("/v1/submissions.get", params={"id": submission}, headers=headers).json()
        if view["status"] in ("finished", "errored", "cancelled"):
            if view["status"] != "finished":
                raise SystemExit(f"the bench run ended {view['status']}: {view.get('reason')}")
            assert view["episodes"]["done"] == 10 * TRIALS, view["episodes"]
            return submission, time.perf_counter() - started
        time.sleep(0.02)


def sequences_eval(client: httpx.Client, key: str) -> str:
    """A small Sequences eval, played to its end: the report `GET /v1/eval/{id}` reads."""
    headers = {"Authorization": f"Bearer {key}"}
    asked = {"model": "metaworld-expert", "benchmark": BENCH_EVAL, "trials": 1, "tasks": ["reach-v3"]}
    created = client.post("/v1/eval", json=asked, headers=headers)
    created.raise_for_status()
    eval_id = str(created.json()["eval_id"])
    while client.get(f"/v1/eval/{eval_id}", headers=headers).json()["status"] not in (
        "completed",
        "failed",
        "cancelled",
    ):
        time.sleep(0.1)
    return eval_id


def engine_times() -> tuple[int, float, float]:
    """The engine pool's episodes, its whole run's seconds, and those less its workers' start."""
    from yardstick.engine import Component, RunRequest, Work, evaluate
    from yardstick.engine.pool import PoolExecutor, default_workers

    outcome = evaluate(
        RunRequest(work=Work(Component("mt10"), Component("expert")), trials=TRIALS),
        executor=PoolExecutor(default_workers()),
    )
    return len(outcome.results), outcome.wall_s, outcome.wall_s - max(outcome.cold_starts)


def report_queue(
    name: str, queue: list[tuple[float, float, float]], engine: list[tuple[int, float, float]], cores: int
) -> None:
    """The best round of each (the machine is shared). From cold: the pool's whole run (its processes'
    start, imports and every world built) against the queue's first run (imports and every world built;
    its workers' start, until each beat, printed apart). Warm: the pool's run less its workers' start
    against the queue's second run (its workers kept the worlds they built)."""
    episodes = engine[0][0]
    engine_cold, engine_warm = min(e[1] for e in engine), min(e[2] for e in engine)
    start, first, again = (min(q[i] for q in queue) for i in range(3))
    cold, warm = engine_cold / first, engine_warm / again
    print(
        f"  {name}: queue against the engine alone, MT10 x {TRIALS} ({episodes} episodes, state only, "
        f"nothing recorded), {cores} workers each, best of {len(queue)}",
        flush=True,
    )
    print(
        f"    from cold: engine {engine_cold:.2f} s (its whole run), queue {first:.2f} s (its first run; "
        f"the workers' start apart, {start:.2f} s): ratio {cold:.2f} (>= {QUEUE_AT_LEAST}) "
        f"{verdict(cold >= QUEUE_AT_LEAST)}",
        flush=True,
    )
    print(
        f"    warm:      engine {engine_warm:.2f} s (its run less its workers' start), queue {again:.2f} s "
        f"(its second run): ratio {warm:.2f} (>= {QUEUE_AT_LEAST}) {verdict(warm >= QUEUE_AT_LEAST)}",
        flush=True,
    )


# --- the run ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def database(name: str) -> Iterator[str | None]:
    """None for SQLite (the data folder's file); a fresh PostgreSQL schema's URL, dropped after."""
    if name == "sqlite":
        yield None
        return
    import psycopg

    schema = f"bench_{secrets.token_hex(4)}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def bench_database(name: str, url: str | None, args: argparse.Namespace, cores: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder)
        key = prepare(data, url)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        queue: list[tuple[float, float, float]] = []  # (workers' start, first run, second run) a round
        with (
            running(server_args(data, url, port, 1), f"{base}/healthz", "the gateway"),
            httpx.Client(base_url=base, timeout=60) as client,
        ):
            for round_ in range(1 if args.no_queue else ROUNDS):
                pool, start_s = start_workers(data, url, cores)
                try:
                    submission, first_s = submit_and_wait(client, key, f"bench-{round_}-1")
                    _, again_s = submit_and_wait(client, key, f"bench-{round_}-2")  # worlds kept
                    if round_ == 0:
                        eval_id = sequences_eval(client, key)
                finally:
                    pool.terminate()
                    pool.wait(timeout=60)
                queue.append((start_s, first_s, again_s))
        if not args.no_queue:
            report_queue(name, queue, [engine_times() for _ in range(ROUNDS)], cores)
        if args.no_load:
            return
        if shutil.which("wrk") is None:
            print(f"  {name}: gateway load skipped: wrk is not installed (apt-get install wrk)", flush=True)
            return
        reads = [
            ("/healthz", f"{base}/healthz", None),
            ("users.me", f"{base}/v1/users.me", key),
            ("submissions.get", f"{base}/v1/submissions.get?id={submission}", key),
            ("rankings.get", f"{base}/v1/rankings.get?board=metaworld.mt10", key),
            ("GET /v1/eval/{id}", f"{base}/v1/eval/{eval_id}", key),
        ]
        trivial_port = free_port()
        trivial_url = f"http://127.0.0.1:{trivial_port}{TRIVIAL_PATH}"
        trivial_args = [sys.executable, __file__, "--serve-trivial", str(trivial_port)]
        with running(trivial_args, trivial_url, "the trivial route"):
            ceiling = wrk(trivial_url, None, args.clients, args.seconds)
        print(
            f"  {name}: gateway under {args.clients} connections (wrk, {args.seconds:g} s a route)",
            flush=True,
        )
        report_load("trivial route", ceiling, None)
        for processes in args.http_workers:
            print(f"   {processes} HTTP process{'es' if processes > 1 else ''}:", flush=True)
            with running(server_args(data, url, port, processes), f"{base}/healthz", "the gateway"):
                for route, target, auth in reads:
                    report_load(route, wrk(target, auth, args.clients, args.seconds), ceiling)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0, help="wrk's time on each route")
    parser.add_argument(
        "--http-workers", type=int, nargs="+", default=[1, 2], help="HTTP processes to measure ours with"
    )
    parser.add_argument("--databases", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--no-queue", action="store_true", help="skip the queue against the engine")
    parser.add_argument("--no-load", action="store_true", help="skip the gateway under load")
    parser.add_argument("--serve-trivial", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_trivial:
        serve_trivial(args.serve_trivial)
        return
    from yardstick.engine.pool import default_workers

    cores = default_workers()
    print(machine(), flush=True)
    print("gateway and queue: the load and the server on the same machine", flush=True)
    for name in args.databases:
        try:
            with database(name) as url:
                bench_database(name, url, args, cores)
        except Exception as exc:  # a database the machine lacks: the other is still measured
            if name == "postgresql" and "connect" in str(exc).lower():
                print(f"  {name}: skipped ({exc})", flush=True)
                continue
            raise


if __name__ == "__main__":
    main()
