"""A policy across a wire is a policy like any other: the same episodes as in process, sessions in
parallel from a pool, and a server that fails, hangs, drops or talks nonsense fails only the episodes it
touched, with a reason that says so."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import free_port, toy
from deadlines import give_up_at

sys.path.insert(0, str(Path(__file__).parent))
import toys
from yardstick.engine import BuildError, Component, RunRequest, Work, evaluate
from yardstick.engine.results import EpisodeResult
from yardstick.engine.run import RunOutcome
from yardstick.report import build_report
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.serve import PolicyServer, ServeOptions

SERVED = ("Rows", "Sampler", "CrashOnTen", "HangOnTen", "BatchedRows", "SlowRows", "Painter", "Instructed")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, PolicyServer]]:
    """One server per toy policy, each on a websocket port, a gRPC port and a unix socket."""
    folder = tmp_path_factory.mktemp("sockets")
    running: dict[str, PolicyServer] = {}
    try:
        for name in SERVED:
            host = PolicyHost(getattr(toys, name), model_id=name.lower(), reference=toy(name))
            options = ServeOptions(port=0, grpc_port=0, uds=str(folder / f"{name}.sock"))
            running[name] = PolicyServer({name.lower(): host}, options).start()
        yield running
    finally:
        for server in running.values():
            server.stop()


def url(server: PolicyServer, wire: str = "websocket") -> str:
    return {
        "websocket": f"ws://127.0.0.1:{server.port}/api/v1/session",
        "grpc": f"grpc://127.0.0.1:{server.grpc_port}/api/v1/session",
        "websocket_unix": f"ws+unix://{server.options.uds}/api/v1/session",
        "openpi": f"openpi://127.0.0.1:{server.port}",
        "roboarena": f"roboarena://127.0.0.1:{server.port}",
    }[wire]


def run(
    policy: str,
    *,
    benchmark: str = "Tally",
    workers: int | None = 0,
    trials: int = 3,
    timeout: float = 10.0,
    params: dict[str, Any] | None = None,
    tasks: list[str] | None = None,
    on_result: Callable[[EpisodeResult], None] | None = None,
    startup_timeout: float = 5.0,
) -> RunOutcome:
    work = Work(
        Component(toy(benchmark)),
        Component(policy, params or {}),
        call_timeout_s=timeout,
        startup_timeout_s=startup_timeout,
    )
    return evaluate(RunRequest(work=work, trials=trials, workers=workers, tasks=tasks), on_result=on_result)


def plain(result: RunOutcome) -> list[dict[str, Any]]:
    return [r.outcome() for r in result.results]


def errors(result: RunOutcome) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for r in result.results:
        if r.error:
            found.setdefault(r.task, []).append(r.error)
    return found


@pytest.mark.parametrize("wire", ["websocket", "grpc", "websocket_unix", "openpi", "roboarena"])
def test_a_served_policy_plays_the_episodes_it_plays_in_process(
    servers: dict[str, PolicyServer], wire: str
) -> None:
    remote = run(url(servers["Rows"], wire))
    assert remote.complete and plain(remote) == plain(run(toy("Rows")))
    # Its rate and chunking came from the handshake.
    assert (remote.policy.hz, remote.policy.action_chunk_len, remote.policy.replan_every) == (10, 4, 2)


@pytest.mark.parametrize("wire", ["websocket", "grpc", "openpi", "roboarena"])
def test_a_served_policy_may_write_into_its_observation_as_in_process(
    servers: dict[str, PolicyServer], wire: str
) -> None:
    remote = run(url(servers["Painter"], wire), benchmark="Canvas", trials=2)
    assert remote.complete, errors(remote)
    assert plain(remote) == plain(run(toy("Painter"), benchmark="Canvas", trials=2))


@pytest.mark.parametrize("wire", ["websocket", "grpc", "openpi", "roboarena"])
def test_a_served_policy_is_told_its_task_on_every_wire(servers: dict[str, PolicyServer], wire: str) -> None:
    remote = run(url(servers["Instructed"], wire), trials=2)
    assert remote.complete, errors(remote)
    assert plain(remote) == plain(run(toy("Instructed"), trials=2))


def test_a_sampling_policy_replays_exactly_across_the_wire(servers: dict[str, PolicyServer]) -> None:
    remote = run(url(servers["Sampler"]), trials=4)
    assert plain(remote) == plain(run(toy("Sampler"), trials=4))


def test_a_pool_runs_sessions_in_parallel_and_still_agrees(servers: dict[str, PolicyServer]) -> None:
    server = servers["SlowRows"]
    peak = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, server.activity.sessions)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        pooled = run(url(server), workers=2, trials=2)
    finally:
        stop.set()
        watcher.join()
    assert pooled.complete and peak >= 2
    assert plain(pooled) == plain(run(toy("SlowRows"), trials=2))


def test_a_vectorized_benchmark_batches_across_sessions_on_the_server(
    servers: dict[str, PolicyServer],
) -> None:
    toys.BatchedRows.calls.clear()  # the served instance lives in this process
    remote = run(url(servers["BatchedRows"]), benchmark="TallyMany", trials=4)
    assert remote.complete and plain(remote) == plain(run(toy("Rows"), trials=4))
    assert max(toys.BatchedRows.calls) > 1  # concurrent sessions were answered in one call


def test_a_policy_that_raises_on_the_server_fails_its_episodes_and_the_run_goes_on(
    servers: dict[str, PolicyServer],
) -> None:
    result = run(url(servers["CrashOnTen"]), trials=2)
    failed = errors(result)
    assert list(failed) == ["ten"] and all(
        "the policy raised on the server: RuntimeError: boom at step 5" in e for e in failed["ten"]
    )
    assert sum(r.finished for r in result.results) == 4


def test_a_server_that_does_not_answer_in_time_fails_the_episode(servers: dict[str, PolicyServer]) -> None:
    result = run(url(servers["HangOnTen"]), trials=1, timeout=1.0, tasks=["three", "ten"])
    failed = errors(result)
    assert list(failed) == ["ten"] and "did not answer within 0.9 s" in failed["ten"][0]
    assert result.results[0].finished


def test_no_server_is_a_refusal_before_the_run() -> None:
    with pytest.raises(BuildError, match="refused the session"):
        run("ws://127.0.0.1:9/api/v1/session")


def test_a_server_killed_mid_run_fails_only_the_episodes_in_flight(tmp_path: Path) -> None:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "yardstick.cli",
        "policy",
        "serve",
        toy("SlowRows"),
        "--port",
        str(port),
        "--param",
        "policy.delay=0.05",
    ]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done: list[Any] = []
    landed: list[EpisodeResult] = []
    two_landed = threading.Event()

    def count(result: EpisodeResult) -> None:
        landed.append(result)
        if len(landed) >= 2:
            two_landed.set()

    def evaluate_in_background() -> None:
        # The restarted server's interpreter may take a while on a loaded machine: the run waits for it.
        url = f"ws://127.0.0.1:{port}/api/v1/session"
        done.append(run(url, trials=4, timeout=10.0, on_result=count, startup_timeout=120.0))

    try:
        # Its interpreter starting on a loaded machine can take longer than a run's start-up deadline.
        _wait_listening(port, 120.0)
        evaluation = threading.Thread(target=evaluate_in_background)
        evaluation.start()
        assert two_landed.wait(60), "two episodes did not land within 60 s"  # a few played, one in flight
        server.kill()
        server.wait()
        time.sleep(0.5)
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        evaluation.join(timeout=240)
    finally:
        server.kill()
        server.wait()
    [result] = done
    failed = [r for r in result.results if r.error]
    assert 1 <= len(failed) <= 2, [r.error for r in failed]
    assert all("dropped the session mid-episode" in r.error or "refused" in r.error for r in failed)
    assert sum(r.finished for r in result.results) == len(result.planned) - len(failed)
    report = build_report(result)
    assert report["status"] == "incomplete" and {e["index"] for e in report["errors"]} == {
        r.index for r in failed
    }


@pytest.mark.slow
def test_meta_world_through_yardstick_policy_serve_plays_the_in_process_episodes() -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "yardstick.cli", "policy", "serve", "expert", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # door-open: its expert writes into its observation, which a served policy must be allowed to.
    tasks = ["reach-v3", "push-v3", "door-open-v3", "drawer-open-v3", "window-close-v3"]
    try:
        remote = evaluate(
            RunRequest(
                work=Work(
                    Component("mt10"),
                    Component(f"ws://127.0.0.1:{port}/api/v1/session"),
                    startup_timeout_s=60,
                ),
                tasks=tasks,
                seeds=[0, 1],
                workers=2,
            )
        )
    finally:
        server.terminate()
        server.wait(timeout=15)
    local = evaluate(
        RunRequest(work=Work(Component("mt10"), Component("expert")), tasks=tasks, seeds=[0, 1], workers=0)
    )
    assert remote.complete and plain(remote) == plain(local)
    assert remote.policy.hz == 80


def _wait_listening(port: int, seconds: float) -> None:
    deadline = give_up_at(seconds)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listened on {port} within {seconds:g} s"
            time.sleep(0.1)
