"""Running whole evaluations: executors agree, and a policy or benchmark that crashes, hangs or dies
fails only its own episodes, with a reason."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from conftest import toy
from yardstick.engine import BuildError, Component, Playback, RunRequest, Work, evaluate
from yardstick.engine.executors import InProcessExecutor
from yardstick.engine.failures import FailureKind
from yardstick.engine.pool import PoolExecutor
from yardstick.report import build_report


def request(
    policy: str,
    benchmark: str = "Tally",
    *,
    workers: int | None = 0,
    trials: int = 4,
    timeout: float = 5.0,
    tasks: list[str] | None = None,
    playback: Playback = Playback(),
) -> RunRequest:
    work = Work(Component(toy(benchmark)), Component(toy(policy)), call_timeout_s=timeout, playback=playback)
    return RunRequest(work=work, trials=trials, workers=workers, tasks=tasks)


def outcomes(req: RunRequest) -> list[dict[str, object]]:
    result = evaluate(req)
    assert result.complete
    return [r.outcome() for r in result.results]


def test_one_process_and_a_pool_of_two_give_identical_results() -> None:
    in_process = outcomes(request("Sampler", trials=6))
    pooled = outcomes(request("Sampler", trials=6, workers=2))
    assert pooled == in_process
    assert len(in_process) == 18 and {o["index"] for o in in_process} == set(range(18))


def test_vectorized_benchmark_in_a_pool_matches_one_world_at_a_time() -> None:
    single = outcomes(request("Rows", trials=5))
    vectorized = outcomes(request("BatchedRows", "TallyMany", trials=5, workers=2))
    assert vectorized == single


def test_charged_fixed_latency_is_reproducible_across_executors() -> None:
    playback = Playback(charge_inference=True, latency_ms=120)
    assert outcomes(request("Rows", playback=playback)) == outcomes(
        request("Rows", workers=2, playback=playback)
    )


def failed_of(result_list: list[dict[str, object]]) -> dict[str, list[str]]:
    failed: dict[str, list[str]] = {}
    for o in result_list:
        if o["error"] is not None:
            failed.setdefault(str(o["task"]), []).append(str(o["error"]))
    return failed


@pytest.mark.parametrize("workers", [0, 2])
def test_a_crashing_policy_fails_its_episodes_with_the_error_and_the_run_goes_on(workers: int) -> None:
    outcome = evaluate(request("CrashOnTen", workers=workers, trials=2))
    assert not outcome.complete and len(outcome.results) == 6
    results = [r.outcome() for r in outcome.results]
    failed = failed_of(results)
    assert list(failed) == ["ten"] and len(failed["ten"]) == 2
    assert "policy.infer raised RuntimeError: boom at step 5" in failed["ten"][0]
    assert "toys.py" in failed["ten"][0]  # where in the user's code
    ok = [o for o in results if o["task"] != "ten"]
    assert all(o["error"] is None for o in ok)
    report = build_report(outcome)
    assert report["status"] == "incomplete" and len(report["errors"]) == 2
    assert (
        report["summary"]["tasks"]["ten"]["errors"] == 2
        and report["summary"]["tasks"]["three"]["episodes"] == 2
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_a_hanging_policy_is_cut_by_the_call_timeout(workers: int) -> None:
    # HangOnTen hangs for an hour: the run ends only by the cut.
    outcome = evaluate(request("HangOnTen", workers=workers, trials=1, timeout=0.5))
    failed = failed_of([r.outcome() for r in outcome.results])
    assert list(failed) == ["ten"] and "policy.infer ran past its 0.5 s limit" in failed["ten"][0]
    assert [r.failure for r in outcome.results if r.failure] == [FailureKind.POLICY_TIMEOUT]
    assert len(outcome.results) == 3


def test_a_policy_stuck_where_the_alarm_cannot_reach_loses_its_worker_not_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("yardstick.engine.pool.HANG_GRACE_S", 0.5)
    outcome = evaluate(request("WedgeOnTen", workers=2, trials=2, timeout=0.5))
    results = [r.outcome() for r in outcome.results]
    failed = failed_of(results)
    assert list(failed) == ["ten"] and all("its worker was replaced" in e for e in failed["ten"])
    assert {r.failure for r in outcome.results if r.failure} == {FailureKind.WORKER_LOST}
    assert sum(1 for o in results if o["error"] is None) == 4


def test_a_worker_process_that_dies_fails_the_episode_it_held() -> None:
    outcome = evaluate(request("DieOnTen", workers=2, trials=2))
    failed = failed_of([r.outcome() for r in outcome.results])
    assert list(failed) == ["ten"] and all("exited with status 139" in e for e in failed["ten"])
    assert {r.failure for r in outcome.results if r.failure} == {FailureKind.WORKER_LOST}
    assert len(outcome.results) == 6


@pytest.mark.parametrize("workers", [0, 2])
def test_a_crashing_benchmark_fails_its_episode_and_is_rebuilt(workers: int) -> None:
    work = Work(Component(toy("Fragile")), Component(toy("Rows")))
    outcome = evaluate(RunRequest(work=work, trials=2, workers=workers, tasks=["ok", "bad"]))
    results = [r.outcome() for r in outcome.results]
    failed = failed_of(results)
    assert (
        list(failed) == ["bad"]
        and "benchmark.step raised ValueError: the simulation diverged" in failed["bad"][0]
    )
    assert [o["error"] is None for o in results] == [True, True, False, False]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_hanging_benchmark_and_one_that_cannot_reset_fail_only_their_episodes(workers: int) -> None:
    work = Work(Component(toy("Fragile")), Component(toy("Rows")), call_timeout_s=0.5)
    outcome = evaluate(RunRequest(work=work, trials=2, workers=workers, tasks=["hang", "no-start", "ok"]))
    results = [r.outcome() for r in outcome.results]
    failed = failed_of(results)
    assert sorted(failed) == ["hang", "no-start"]
    assert all("benchmark.step ran past its 0.5 s limit" in e for e in failed["hang"])
    assert all("benchmark.reset raised OSError: the scene file is missing" in e for e in failed["no-start"])
    assert [o["error"] is None for o in results if o["task"] == "ok"] == [True, True]


def test_a_constructor_that_raises_is_a_build_error_naming_it(tmp_path: object) -> None:
    work = Work(Component("collections:OrderedDict"), Component(toy("Rows")))
    with pytest.raises(Exception, match="not a benchmark"):
        evaluate(RunRequest(work=work, workers=0))
    bad_param = Work(Component(toy("Tally"), {"nope": 1}), Component(toy("Rows")))
    for workers in (0, 2):
        with pytest.raises(BuildError, match="Tally's constructor raised TypeError"):
            evaluate(RunRequest(work=bad_param, workers=workers, trials=1))


def test_ctrl_c_stops_cleanly_with_what_finished() -> None:
    # SIGINT lands while episodes are playing; the outcome keeps the finished ones and says interrupted.
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    # Python's own handler, whatever the test runner was started with (SIGINT is ignored in a background
    # job of a shell without job control).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    req = request("Rows", trials=4, workers=0)
    slow = RunRequest(work=Work(req.work.benchmark, Component(toy("SlowRows"))), trials=4, workers=0)
    timer.start()
    try:
        outcome = evaluate(slow)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert outcome.interrupted and not outcome.complete
    assert 0 < len(outcome.results) < len(outcome.planned)
    assert build_report(outcome)["status"] == "incomplete"


def test_the_executors_report_their_cold_start() -> None:
    for executor in (InProcessExecutor(), PoolExecutor(2)):
        outcome = evaluate(request("Rows", trials=1), executor=executor)
        assert outcome.cold_starts and all(c >= 0 for c in outcome.cold_starts)
        report = build_report(outcome)
        assert report["timing"]["cold_start_s"] is not None and report["timing"]["steps"] > 0
        assert set(report["timing"]["per_step_ms"]) == {"simulation", "rendering", "policy", "overhead"}


def test_every_failure_says_whose_fault_it_is() -> None:
    crashed = evaluate(request("CrashOnTen", trials=1))
    assert {r.fault for r in crashed.results if r.error} == {"policy"}
    fragile = evaluate(
        RunRequest(
            work=Work(Component(toy("Fragile")), Component(toy("Rows"))),
            trials=1,
            workers=0,
            tasks=["bad", "no-start"],
        )
    )
    assert {r.fault for r in fragile.results} == {"benchmark"}
    died = evaluate(request("DieOnTen", workers=2, trials=1))
    assert {r.fault for r in died.results if r.error} == {"platform"}
    assert all(r.fault is None for r in crashed.results if r.finished)
