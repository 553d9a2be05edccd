"""How soon a robot adapter's stop() holds the arm: the simulated Franka, against one control period.

A rig's loop drives `SimulatedFranka` as it would a robot: at 15 Hz of wall time, each period one `act` (a
joint target on a sweep that speeds the arm up to `--speed` rad/s a joint, as a policy moves it) and one
`observe` (both cameras at 128², the state). Once the sweep is near its fastest, another thread calls
`stop()` at a random moment of a period; the loop keeps acting (the actions now ignored) until the arm is
still: every joint slower than `--still` rad/s. Each trial starts again at `move_to("nominal")`.

Two latencies from the stop() call, each trial, both in wall time:
  simulation   to the end of the first act after which the simulation's joint velocities are all below the
               threshold (what the arm does; looked at past the adapter, at the end of each period)
  observed     to the first observe() whose joints moved less than threshold × period since the previous
               one (what the rig can see: the mean speed over a period, which a short ringing after the
               brake does not show)
The simulation's time passes only in `act`: a stop that lands between two acts brakes the arm in the next
one, as a real arm's controller would at once. So both latencies include the wait for the next act (up to a
period), and the simulation's also the periods the arm takes to settle below the threshold.
Prints min / median / max in ms and the median over the baseline, one control period (1/hz, and the loop's
own period measured in this run). Run with `python bench/rig_stop.py` (about half a minute).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from machine import machine

if TYPE_CHECKING:
    from yardstick.catalog.sim_franka import SimulatedFranka

os.environ.setdefault("MUJOCO_GL", "egl")

# The sweep's direction a joint (the largest 1): every joint moves, the shoulder and wrist most.
DIRECTION = np.array([1.0, 0.6, -0.8, 0.8, 0.8, -0.6, 1.0])
SWEEP_HZ = 0.25  # the sweep is fastest a quarter of its cycle in, after 1 s
GIVE_UP = 3.0  # seconds after the stop that a trial not yet still is counted as never still


@dataclass
class Trial:
    simulation: float  # seconds from stop() to the simulation still (inf: never, within GIVE_UP)
    observed: float  # seconds from stop() to an observation showing it still
    speed: float  # the fastest joint at the last act before the stop, rad/s
    braking: float  # the most a joint moved from the last observation before the stop, rad
    periods: list[float]  # the loop's periods, seconds


def trial(arm: SimulatedFranka, speed: float, still: float, rng: random.Random) -> Trial:
    """One sweep, stopped from another thread near its fastest; the loop paced at the robot's rate."""
    from yardstick.catalog.sim_franka import HZ, JOINTS, POSES

    period = 1.0 / HZ
    nominal = np.array(POSES["nominal"])
    amplitude = speed / (2 * math.pi * SWEEP_HZ)
    arm.move_to("nominal")

    def target(t: float) -> npt.NDArray[np.float64]:
        offset = DIRECTION * amplitude * (1 - math.cos(2 * math.pi * SWEEP_HZ * t))
        row: npt.NDArray[np.float64] = np.r_[nominal + offset, 0.0]
        return row

    stopped = threading.Event()
    stop_at: list[float] = []

    def fire() -> None:
        stop_at.append(time.perf_counter())
        arm.stop()
        stopped.set()

    # Near the sweep's fastest (1 s in), at a random moment of a period.
    timer = threading.Timer(1 / (4 * SWEEP_HZ) + rng.uniform(-period / 2, period / 2), fire)
    started = time.perf_counter()
    timer.start()
    # The arm's joints' velocities in the simulation, looked at past the adapter.
    qvel = [arm.model.joint(f"panda/joint{i}").dofadr[0] for i in range(1, JOINTS + 1)]
    simulation = observed = math.inf
    speed_at_stop = braking = 0.0
    last = arm.observe()["state"]["joints"]
    before_stop = last
    ticks: list[float] = []
    k = 0
    try:
        while True:
            tick = time.perf_counter()
            ticks.append(tick)
            was_stopped = stopped.is_set()
            arm.act(target(tick - started))
            acted = time.perf_counter()
            seen = arm.observe()["state"]["joints"]
            looked = time.perf_counter()
            if was_stopped or stopped.is_set():
                since = stop_at[0]
                if math.isinf(simulation) and np.abs(arm.data.qvel[qvel]).max() < still:
                    simulation = acted - since
                if math.isinf(observed) and np.abs(seen - last).max() < still * period:
                    observed = looked - since
                braking = max(braking, float(np.abs(seen - before_stop).max()))
                if not (math.isinf(simulation) or math.isinf(observed)) or looked - since > GIVE_UP:
                    break
            else:
                speed_at_stop = float(np.abs(arm.data.qvel[qvel]).max())
                before_stop = seen
            last = seen
            k += 1
            # Paced as a rig paces its loop: the next period starts 1/hz after this one did.
            time.sleep(max(0.0, started + k * period - time.perf_counter()))
    finally:
        timer.cancel()
        timer.join()
    return Trial(simulation, observed, speed_at_stop, braking, list(np.diff(ticks)))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--speed", type=float, default=0.5, help="the sweep's fastest, rad/s a joint")
    parser.add_argument("--still", type=float, default=0.02, help="still: every joint below this, rad/s")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(machine(), flush=True)

    from yardstick.catalog.sim_franka import HZ, SimulatedFranka

    built = time.perf_counter()
    arm = SimulatedFranka()
    build = time.perf_counter() - built
    rng = random.Random(args.seed)
    try:
        # What one period of the loop costs the adapter, measured before the trials.
        arm.move_to("nominal")
        costs = []
        for _ in range(50):
            started = time.perf_counter()
            arm.act(np.r_[arm.observe()["state"]["joints"], 0.0])
            arm.observe()
            costs.append(time.perf_counter() - started)
        trials = [trial(arm, args.speed, args.still, rng) for _ in range(args.trials)]
    finally:
        arm.close()

    period = 1.0 / HZ
    measured = statistics.median(p for t in trials for p in t.periods)
    print(
        f"SimulatedFranka at {HZ:g} Hz, cameras 128²: built in {build:.2f} s; act + observe "
        f"{statistics.median(costs) * 1000:.1f} ms (median of 50)"
    )
    print(
        f"{args.trials} trials: a sweep at up to {args.speed:g} rad/s a joint, stopped from another thread; "
        f"speed at the stop {statistics.median(t.speed for t in trials):.2f} rad/s (median, fastest joint)"
    )
    print(
        f"baseline: one control period, {period * 1000:.1f} ms "
        f"(the loop's, measured in this run: {measured * 1000:.1f} ms)"
    )
    print(f"from stop() to still (every joint below {args.still:g} rad/s), ms:")
    print(f"{'':>12} {'min':>7} {'median':>7} {'max':>7} {'never':>6} {'median/period':>14}")
    for label in ("simulation", "observed"):
        values = [getattr(t, label) for t in trials]
        finite = sorted(v for v in values if math.isfinite(v)) or [math.inf]
        median = statistics.median(finite)
        print(
            f"{label:>12} {finite[0] * 1000:>7.1f} {median * 1000:>7.1f} {finite[-1] * 1000:>7.1f} "
            f"{len(values) - len([v for v in values if math.isfinite(v)]):>6} {median / period:>14.2f}"
        )
    print(
        f"braking: the joints moved at most {max(t.braking for t in trials):.4f} rad after the last "
        f"observation before the stop (median {statistics.median(t.braking for t in trials):.4f})"
    )


if __name__ == "__main__":
    main()
