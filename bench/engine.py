"""The engine's cost against a plain loop written directly against Meta-World.

MT10, state only, the scripted expert, the same episodes three ways in one run:
  plain       a loop over Meta-World and its experts, nothing of ours (the ceiling)
  in-process  yardstick's engine in one process (`yardstick eval run --in-process`)
  pool        yardstick's engine on a process pool, one worker per core (`yardstick eval run`)
Each way runs in a fresh interpreter and is timed from before Meta-World is imported to its last episode,
so each pays its own start-up as a user's run does. Each prints steps/s; the ratios are what matter (the
machine is shared and noisy): in-process should keep >= 0.97 of the plain loop, and the pool should be
>= 1.8x in-process on two cores with start-up counted apart (the time until the last worker is ready to
play: its interpreter, its imports and its build; the same measure of the in-process executor is its build).
Both pool figures are printed, with start-up apart and in. Beside the wall-clock ratio, the in-process/plain
ratio of CPU seconds in the window: other people's work on a shared machine moves wall time, not that.
The machine's own ceiling for the pool is measured beside it: two plain loops at once, against one alone
(a virtual machine's two cores may give less than twice one; the pool cannot beat that).
Beside the in-process ratio, what the engine costs a step there (in-process less plain, over the steps) and
what its own loop costs a step around a benchmark and policy that do nothing (`bench/idle.py`): the same
code, run between simulator steps in the first and back to back in the second.
The ways run `--rounds` times, interleaved; each way's best round counts. Last, in-process against plain
in instructions executed (valgrind's callgrind), which others' load on the machine does not move: the runs
of 3 trials less those of 1, so that start-up cancels out and what is left is the engine's cost a step.
Run with `make bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from machine import machine

WAYS = ("plain", "in-process", "pool")
HORIZON = 500
IN_PROCESS_AT_LEAST = 0.97  # of the plain loop's rate
# The trial counts the instructions are counted at: their difference is two trials of every task, with
# start-up (imports, building the ten worlds) cancelled out.
COUNTED_TRIALS = (1, 3)


def plain(trials: int) -> tuple[float, list[list[Any]]]:
    """Meta-World as a researcher would drive it by hand; the same tasks, seeds and end-on-success."""
    started = time.perf_counter()
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    from metaworld.policies import ENV_POLICY_MAP

    from yardstick.catalog.metaworld import MT10_NAMES

    warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high")
    outcomes = []
    for task in MT10_NAMES:
        env: Any = ALL_V3_ENVIRONMENTS[task]()
        env._partially_observable = False  # goal-observable, with the variation drawn from env.seed
        del env.sawyer_observation_space
        env._set_task_called = True
        env._freeze_rand_vec = False
        env.seeded_rand_vec = True
        env.max_path_length = 2**62
        expert_class: Any = ENV_POLICY_MAP[task]  # typed by its abstract base; each entry is concrete
        expert = expert_class()
        for trial in range(trials):
            env.seed(trial)
            obs, _ = env.reset()
            success, steps = False, 0
            while steps < HORIZON and not success:
                obs, _, _, _, info = env.step(expert.get_action(obs))
                steps += 1
                success = bool(info["success"])
            outcomes.append([task, trial, success, steps])
        env.close()
    return time.perf_counter() - started, outcomes


def engine(trials: int, pool: bool) -> tuple[float, list[list[Any]], float]:
    from yardstick.engine import Component, RunRequest, Work, evaluate
    from yardstick.engine.executors import InProcessExecutor
    from yardstick.engine.pool import PoolExecutor, default_workers

    request = RunRequest(work=Work(Component("mt10"), Component("expert")), trials=trials)
    executor = PoolExecutor(default_workers()) if pool else InProcessExecutor()
    outcome = evaluate(request, executor=executor)
    assert outcome.complete, [r.error for r in outcome.results if r.error]
    results = [[r.task, r.trial, r.success, r.steps] for r in outcome.results]
    return outcome.wall_s, results, max(outcome.cold_starts)


def two_at_once(trials: int) -> float:
    """Two plain loops in two fresh interpreters started together: the slower one's wall seconds."""
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--way", "plain", "--trials", str(trials)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    walls: list[float] = []
    for child in children:
        out, _ = child.communicate()
        if child.returncode != 0:
            raise SystemExit("a plain loop of the pair failed")
        walls.append(float(_measured(out)["wall"]))
    return max(walls)


def _measured(stdout: str) -> dict[str, Any]:
    """What a child run of `one_way` printed: its last line (the simulators may print before it)."""
    return dict(json.loads(stdout.strip().splitlines()[-1]))


def one_way(way: str, trials: int) -> None:
    """Run in a fresh interpreter: print one JSON line."""
    # CPU seconds of this process over the same window (the pool's workers are not counted: it is printed
    # for in-process against plain only).
    cpu = time.process_time()
    if way == "plain":
        wall, outcomes = plain(trials)
        cold = 0.0
    else:
        wall, outcomes, cold = engine(trials, pool=way == "pool")
    cpu = time.process_time() - cpu
    print(json.dumps({"wall": wall, "outcomes": outcomes, "cold_start": cold, "cpu": cpu}))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="episodes per task (seeds 0..trials-1)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--instructions",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also count in-process against plain in instructions, under valgrind (about 12 min on 2 cores)",
    )
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.way:
        one_way(args.way, args.trials)
        return

    print(machine(), flush=True)
    best: dict[str, float] = {}
    steady: dict[str, float] = {}  # wall less start-up, each way's best round
    cpu: dict[str, float] = {}
    reference: list[list[Any]] | None = None
    cold = 0.0
    pair_best = float("inf")
    for round_ in range(args.rounds):
        for way in WAYS:
            child = subprocess.run(
                [sys.executable, __file__, "--way", way, "--trials", str(args.trials)],
                capture_output=True,
                text=True,
                check=True,
            )
            measured = _measured(child.stdout)
            if reference is None:
                reference = measured["outcomes"]
            elif measured["outcomes"] != reference:
                raise SystemExit(f"{way} played different episodes from the plain loop")
            if measured["wall"] < best.get(way, float("inf")):
                best[way] = measured["wall"]
                if way == "pool":
                    cold = measured["cold_start"]
            steady[way] = min(steady.get(way, float("inf")), measured["wall"] - measured["cold_start"])
            cpu[way] = min(cpu.get(way, float("inf")), measured["cpu"])
            print(
                f"round {round_ + 1}  {way:<10}  {measured['wall']:6.2f} s  "
                f"(start-up {measured['cold_start']:.2f} s)",
                flush=True,
            )

        pair = two_at_once(args.trials)
        pair_best = min(pair_best, pair)
        print(
            f"round {round_ + 1}  plain x2    {pair:6.2f} s  (two plain loops at once, the slower)",
            flush=True,
        )

    assert reference is not None
    steps = sum(o[3] for o in reference)
    rate = {way: steps / wall for way, wall in best.items()}
    print(f"\nMT10 x {args.trials} trials, expert, state only: {steps} steps, identical in all three ways")
    print(f"{'way':<12}{'steps/s':>10}{'vs plain':>10}{'vs in-process':>15}")
    for way in WAYS:
        vs_plain, vs_inproc = rate[way] / rate["plain"], rate[way] / rate["in-process"]
        print(f"{way:<12}{rate[way]:>10.0f}{vs_plain:>10.3f}{vs_inproc:>15.3f}")
    inproc = rate["in-process"] / rate["plain"]
    print(
        f"\nin-process / plain = {inproc:.3f}  ({_against(inproc, IN_PROCESS_AT_LEAST)}); "
        f"in CPU seconds {cpu['plain'] / cpu['in-process']:.3f}"
    )
    beside = (best["in-process"] - best["plain"]) / steps
    print(
        f"the engine's own cost a step: {beside * 1e6:.1f} us beside Meta-World's steps (in-process less "
        f"plain), {idle_cost() * 1e6:.1f} us with nothing else between its steps (bench/idle.py)"
    )
    apart = steady["in-process"] / steady["pool"]
    print(
        f"pool / in-process  = {apart:.3f} with start-up counted apart  (target >= 1.8 on two cores: "
        f"{_met(apart, 1.8)}); {rate['pool'] / rate['in-process']:.3f} with the workers' {cold:.2f} s "
        "start-up in"
    )
    ceiling = 2 * best["plain"] / pair_best
    print(
        f"the machine's own: two plain loops at once do {ceiling:.3f}x the work of one alone in the same "
        f"time (the pool's ceiling here); pool / that = {apart / ceiling:.3f}"
    )
    if args.instructions:
        count_instructions()


def idle_cost() -> float:
    """The engine's own seconds a step around a benchmark and policy that do nothing (a fresh interpreter)."""
    child = subprocess.run(
        [sys.executable, "-c", "import idle; print(idle.engine_cost())"],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(child.stdout.strip().splitlines()[-1])


def instructions(way: str, trials: int) -> tuple[int, int]:
    """The instructions a run of `way` executes, counted by callgrind, and the steps it played."""
    counted = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    child = subprocess.run(
        [*counted, sys.executable, __file__, "--way", way, "--trials", str(trials)],
        capture_output=True,
        text=True,
        check=True,
    )
    collected = re.search(r"Collected : (\d+)", child.stderr)
    if collected is None:
        raise SystemExit(f"callgrind printed no count for {way}: {child.stderr[-500:]}")
    return int(collected.group(1)), sum(o[3] for o in _measured(child.stdout)["outcomes"])


def count_instructions() -> None:
    """In-process against plain in instructions executed: what the engine adds a step, which the machine's
    load does not move (wall seconds on a shared machine vary more than the 3% the target allows)."""
    if shutil.which("valgrind") is None:
        print("\nin instructions: skipped (no valgrind; Debian's package `valgrind` has it)")
        return
    ways = ("plain", "in-process")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as runs:
        # The longer runs first, side by side: the pair of short ones follows them.
        running = {(w, t): runs.submit(instructions, w, t) for t in reversed(COUNTED_TRIALS) for w in ways}
    counted = {run: future.result() for run, future in running.items()}
    low, high = COUNTED_TRIALS
    work = {w: counted[w, high][0] - counted[w, low][0] for w in ways}
    steps = {w: counted[w, high][1] - counted[w, low][1] for w in ways}
    if steps["plain"] != steps["in-process"]:
        raise SystemExit(f"the counted runs played different steps: {steps}")
    ratio = work["plain"] / work["in-process"]
    print(
        f"\nin instructions (callgrind, trials {high} less trials {low}: {steps['plain']} steps): plain "
        f"{work['plain'] / steps['plain']:,.0f} a step, in-process {work['in-process'] / steps['plain']:,.0f}"
        f": in-process / plain = {ratio:.3f}  ({_against(ratio, IN_PROCESS_AT_LEAST)})"
    )


def _against(value: float, target: float) -> str:
    return f"target >= {target:g}: {_met(value, target)}"


def _met(value: float, target: float) -> str:
    return "met" if value >= target else "NOT met"


if __name__ == "__main__":
    main()
