"""A call's limit on a loaded machine: real processes on one CPU, a busy neighbour beside the call. The limit
counts the call's own time, not the time the machine kept it waiting for a CPU; and a worker that a signal
kills is reported with the signal's name and the call it was in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from conftest import toy
from deadlines import patience
from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.engine.failures import FailureKind

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/schedstat"), reason="the kernel says no run-queue wait (/proc/*/schedstat)"
)

CPU = max(os.sched_getaffinity(0))

# One guarded call that spins for `work` seconds of its own CPU time under a `limit`, pinned to CPU: what it
# returned, or the reason it was cut.
CALL = """
import json, os, sys, time
from yardstick.engine.guard import POLICY_INFER, CallFailed, Guard

work, limit = float(sys.argv[1]), float(sys.argv[2])
os.sched_setaffinity(0, {int(sys.argv[3])})

def spin():
    end = time.thread_time() + work
    while time.thread_time() < end:
        pass
    return "done"

with Guard(limit) as guard:
    try:
        print(json.dumps({"said": guard.call(POLICY_INFER, spin)}))
    except CallFailed as failed:
        print(json.dumps({"cut": failed.reason}))
"""


# Each process pins itself: a preexec_fn would run Python between fork and exec in this multithreaded
# test process, where a lock another thread held at the fork is never released (a hung child, seen in CI).
SPIN = f"import os\nos.sched_setaffinity(0, {{{CPU}}})\nwhile True: pass"


@contextmanager
def busy_neighbours(count: int) -> Iterator[None]:
    """`count` processes spinning on CPU for as long as the block lasts."""
    spinning = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
        for process in spinning:
            process.wait()


def guarded_call(work_s: float, limit_s: float) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", CALL, str(work_s), str(limit_s), str(CPU)],
        capture_output=True,
        text=True,
        timeout=patience(120),
        check=True,
    )
    return dict(json.loads(done.stdout))


def test_a_call_kept_off_the_cpu_by_busy_neighbours_runs_slower_not_into_its_limit() -> None:
    # A quarter second of work under a half-second limit, sharing its CPU three ways: about three quarters
    # of a second of wall time, two thirds of it waiting for the CPU.
    with busy_neighbours(2):
        assert guarded_call(0.25, 0.5) == {"said": "done"}


def test_a_call_that_spins_forever_on_a_busy_cpu_is_still_cut_saying_what_it_waited() -> None:
    with busy_neighbours(2):
        answer = guarded_call(10**6, 0.5)
    reason = answer.get("cut", "")
    assert reason.startswith("policy.infer ran past its 0.5 s limit (and "), answer
    assert "s more that it waited for a CPU) and was cut" in reason, answer


def test_a_worker_killed_by_a_signal_is_reported_with_the_signal_and_the_call_it_was_in() -> None:
    work = Work(Component(toy("Tally")), Component(toy("SegfaultOnTen")), call_timeout_s=5.0)
    outcome = evaluate(RunRequest(work=work, trials=2, workers=2))
    lost = [r for r in outcome.results if r.failure]
    assert {r.failure for r in lost} == {FailureKind.WORKER_LOST}
    assert {r.task for r in lost} == {"ten"}, lost
    said = "was killed by SIGSEGV (signal 11) in policy.infer"
    for result in lost:
        assert said in (result.outcome()["error"] or ""), result
