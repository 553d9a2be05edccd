"""What a box costs: its start-up, and an episode played in one against the same episode played unboxed.

Start-up: a box that runs `python -c pass` (bwrap, its namespaces, the allow-list root, the interpreter's
start) against the same interpreter started plainly, with the box's limits (rlimits and, where the machine
gives them, control groups) and without any (no control group, no rlimit).

Episodes: Meta-World MT10 with its scripted expert, state only (the steps a CPU does most of an eval's work
in), the same episodes three ways in one run, each with its world built first and timed over the second
batch (so the box's cold start is apart, as a warm box's is across an eval's batches):
  unboxed      the engine in this process (its `Runtime`, kept warm as a worker keeps it)
  boxed        the same work in a box kept warm (`BoxedExecutor`), the policy in the same box
  boxed, bare  the same, the box given no control group and no limits
Target: boxed <= 1.1x unboxed. The ways run `--rounds` times, interleaved; each way's best round counts.
Run with `make bench` (or `python bench/sandbox.py`).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import machine
from yardstick.engine import Component, RunRequest, Work
from yardstick.engine.results import EpisodeSpec
from yardstick.engine.run import prepare
from yardstick.engine.runtime import Runtime
from yardstick.hosted.limits import BoxLimits
from yardstick.worker.boxes import groups, sandbox
from yardstick.worker.boxes.groups import Groups
from yardstick.worker.boxes.player import BoxedExecutor

TARGET = 1.1
UNLIMITED = BoxLimits(
    memory_bytes=1 << 50, processes=1 << 20, file_bytes=1 << 50, open_files=1 << 16, scratch_bytes=1 << 34
)


def startup(count: int, held: BoxLimits) -> float:
    """The median seconds to start and end `python -c pass` in a box."""
    box = sandbox.Box(python=sys.executable, limits=held)
    times = []
    for _ in range(count):
        began = time.perf_counter()
        finished = sandbox.run(box, [sys.executable, "-c", "pass"], timeout_s=30)
        times.append(time.perf_counter() - began)
        assert finished.returncode == 0, finished
    return statistics.median(times)


def plain_startup(count: int) -> float:
    times = []
    for _ in range(count):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def without_groups() -> Groups:
    """This process's boxes get no control group from now on; what they had before is returned."""
    before = groups.groups()
    groups._found = Groups()
    return before


def episodes(trials: int) -> tuple[Work, list[EpisodeSpec]]:
    work = Work(Component("mt10"), Component("expert"), call_timeout_s=60.0)
    _, _, planned = prepare(RunRequest(work=work, trials=trials, workers=0))
    return work, planned


def unboxed(work: Work, planned: list[EpisodeSpec]) -> float:
    """Seconds for the episodes on the engine in this process, kept warm as a worker keeps it."""
    runtime = Runtime(work)
    try:
        list(runtime.run(planned[:10]))  # the worlds built
        began = time.perf_counter()
        results = list(runtime.run(planned))
        assert all(r.finished for r in results)
        return time.perf_counter() - began
    finally:
        runtime.close()


def boxed(work: Work, planned: list[EpisodeSpec], held: BoxLimits, folder: Path) -> tuple[float, float]:
    """(seconds for the batch, the box's cold start) of the episodes in a warm box."""
    with BoxedExecutor(folder, limits=held) as executor:
        list(executor.run(work, planned[:10]))  # its box started and its worlds built
        began = time.perf_counter()
        results = list(executor.run(work, planned))
        took = time.perf_counter() - began
        assert all(r.finished for r in results), [r.error for r in results if r.error]
        return took, executor.cold_starts[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    held = BoxLimits()
    print(f"limits: {held.describe()}; held by rlimits and {groups.groups().describe()}")
    plain = plain_startup(10)
    limited = startup(10, held)
    found = without_groups()
    bare = startup(10, UNLIMITED)
    groups._found = found
    print(f"start-up (python -c pass, median of 10): plain {plain * 1000:.0f} ms, boxed with limits "
          f"{limited * 1000:.0f} ms (+{(limited - plain) * 1000:.0f} ms), boxed bare {bare * 1000:.0f} ms "
          f"(+{(bare - plain) * 1000:.0f} ms)")  # fmt: skip
    work, planned = episodes(args.trials)
    steps_seen: dict[str, float] = {
        "unboxed": float("inf"),
        "boxed": float("inf"),
        "boxed, bare": float("inf"),
    }
    cold: list[float] = []
    folder = Path(tempfile.mkdtemp(prefix="bench-box-"))  # its import root: the catalogue is Yardstick's own
    for _ in range(args.rounds):
        steps_seen["unboxed"] = min(steps_seen["unboxed"], unboxed(work, planned))
        took, started = boxed(work, planned, held, folder)
        steps_seen["boxed"] = min(steps_seen["boxed"], took)
        cold.append(started)
        found = without_groups()
        try:
            took, _ = boxed(work, planned, UNLIMITED, folder)
        finally:
            groups._found = found
        steps_seen["boxed, bare"] = min(steps_seen["boxed, bare"], took)
    base = steps_seen["unboxed"]
    print(f"{len(planned)} episodes of MT10 (expert, state), best of {args.rounds} rounds; a box's cold "
          f"start (interpreter, imports, its run built) {statistics.median(cold):.2f} s, apart")  # fmt: skip
    for way, took in steps_seen.items():
        print(f"  {way:<12} {took:6.2f} s   {took / base:5.3f}x unboxed")
    ratio = steps_seen["boxed"] / base
    print(f"boxed / unboxed {ratio:.3f} (target <= {TARGET}): {'met' if ratio <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
