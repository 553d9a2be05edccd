"""LIBERO, PushT and ALOHA through Yardstick's engine against a plain loop over the same package.

For each benchmark, in one run: a plain loop (the package's env driven by hand, its frames rendered with the
same tuned renderer at the same size) and the engine in this process (`yardstick eval run --in-process`),
the same task, seed and actions (the robot held still). Each way plays the episode twice on one world and
times the second, from its reset to its last step: the world's build (1.4 s of LIBERO's) and a first reset
unlike the next (LIBERO's second hard reset of an env takes 0.3-0.6 s longer than its first) fall outside
both clocks. Printed: steps/s, ms a step, ms a frame of the rendering, and the engine's steps/s as a ratio
of the plain loop's (target >= 0.95), beside the same ratio in CPU seconds of this process (its renderer's
threads included), which other people's work on a shared machine moves less. The machine is shared and
noisy: each way runs `--rounds` times, interleaved, and its best round counts (3 rounds unless told). Run
with `make bench`.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import yardstick as ys
from machine import machine

os.environ.setdefault("MUJOCO_GL", "egl")
HERE = Path(__file__).resolve()
AT_LEAST = 0.95  # the engine's steps/s against the plain loop's


@ys.policy(hz=20, action_chunk_len=1)
class HoldLibero:
    @ys.infer
    def act(self, obs: Any) -> np.ndarray:
        return np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]])


@ys.policy(hz=10, action_chunk_len=1)
class HoldPushT:
    @ys.infer
    def act(self, obs: Any) -> np.ndarray:
        return np.array([[256.0, 256.0]])


@ys.policy(hz=50, action_chunk_len=1)
class HoldAloha:
    @ys.infer
    def act(self, obs: Any) -> np.ndarray:
        from gym_aloha.constants import START_ARM_POSE

        pose = list(START_ARM_POSE)
        return np.array([[*pose[:6], 0.5, *pose[8:14], 0.5]])


def second_of_two(
    steps: int, reset: Callable[[], object], step: Callable[[], object], frame: Callable[[], object]
) -> tuple[float, float, float]:
    """(seconds for reset + steps, seconds of rendering, CPU seconds) of the second of two episodes: a reset
    and its frame, then `steps` steps and a frame after each."""
    for _ in range(2):
        started, cpu = time.perf_counter(), time.process_time()
        reset()
        render = _timed(frame)
        for _ in range(steps):
            step()
            render += _timed(frame)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return wall, render, cpu


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def plain_libero(steps: int, size: int) -> tuple[float, float, float]:
    """LIBERO's ControlEnv and a tuned renderer by hand."""
    from yardstick.catalog.libero import SETTLE_ACTION, SETTLE_STEPS
    from yardstick.catalog.libero_env import build_env, init_states
    from yardstick.catalog.libero_tasks import TASKS
    from yardstick.catalog.rendering import CameraRig

    task = TASKS["libero_spatial"][0]
    env = build_env("libero_spatial", task.name)
    states = init_states("libero_spatial", task.name)
    camera: CameraRig | None = None

    def reset() -> None:
        nonlocal camera
        env.seed(0)
        env.reset()
        env.set_init_state(states[0])
        for _ in range(SETTLE_STEPS):
            env.step(SETTLE_ACTION)
        if camera is not None:  # made for the model the reset replaced
            camera.close()
            camera = None

    def frame() -> None:
        # The engine's LIBERO makes its camera anew after each reset and counts that as rendering: the same
        # here, at the reset's frame.
        nonlocal camera
        if camera is None:
            model = env.sim.model._model
            camera = CameraRig(model, {"agentview": "agentview"}, size, size, hidden_groups=(0,))
        camera.frames(env.sim.data._data)

    try:
        return second_of_two(steps, reset, lambda: env.step(SETTLE_ACTION), frame)
    finally:
        if camera is not None:
            camera.close()
        env.close()


def plain_pusht(steps: int, size: int) -> tuple[float, float, float]:
    """PushT's env rendering its own frames."""
    from gym_pusht.envs.pusht import PushTEnv

    env = PushTEnv(obs_type="state", observation_width=size, observation_height=size)
    action = np.array([256.0, 256.0])
    return second_of_two(steps, lambda: env.reset(seed=0), lambda: env.step(action), env._render)


def plain_aloha(steps: int, size: int) -> tuple[float, float, float]:
    """ALOHA's dm_control env and a tuned renderer."""
    from gym_aloha.constants import START_ARM_POSE

    from yardstick.catalog.aloha import build_env, place_objects
    from yardstick.catalog.rendering import CameraRig

    env = build_env("transfer-cube")
    rig = CameraRig(env.physics.model.ptr, {"top": "top"}, size, size * 4 // 3)
    pose = list(START_ARM_POSE)
    action = np.array([*pose[:6], 0.5, *pose[8:14], 0.5])
    try:
        return second_of_two(
            steps,
            lambda: place_objects(env, "transfer-cube", 0),
            lambda: env.step(action),
            lambda: rig.frames(env.physics.data.ptr),
        )
    finally:
        rig.close()


def engine(benchmark: str, params: dict[str, Any], policy: str, task: str) -> tuple[float, int, float, float]:
    """(seconds the episode took, its steps, seconds of rendering, CPU seconds) through the engine in this
    process.

    The episode is seed 0 played twice, and the second counts: LIBERO and ALOHA build a task's world at its
    first reset, inside the first episode's time, where the plain loops build theirs before the clock
    starts (the world's build, 1.4 s of LIBERO's, counted on one side only read as the engine's cost)."""
    work = ys.engine.Work(ys.engine.Component(benchmark, params), ys.engine.Component(f"{HERE}:{policy}"))
    request = ys.engine.RunRequest(work=work, tasks=[task], seeds=[0], trials=2, workers=0)
    cpu_at: list[float] = []  # as each episode ends: the second's CPU seconds are the difference
    outcome = ys.engine.evaluate(request, on_result=lambda _: cpu_at.append(time.process_time()))
    first, again = outcome.results
    assert first.error is None and again.error is None, (first.error, again.error)
    assert (first.steps, first.success) == (again.steps, again.success), "seed 0 played differently"
    return again.wall_seconds, again.steps, again.timing.rendering, cpu_at[1] - cpu_at[0]


Plain = Callable[[int, int], tuple[float, float, float]]
CASES: dict[str, tuple[str, dict[str, Any], str, str, Plain, int]] = {
    # name: benchmark, its params, the policy, the task, the plain loop, the image size
    "libero_spatial": (
        "libero_spatial",
        {"cameras": ["agentview"], "image_size": 128},
        "HoldLibero",
        "black-bowl-between-plate-ramekin",
        plain_libero,
        128,
    ),
    "pusht": ("pusht", {"pixels": True, "image_size": 96}, "HoldPushT", "push-t", plain_pusht, 96),
    "aloha": (
        "aloha/transfer-cube",
        {"cameras": ["top"], "image_size": [240, 320]},
        "HoldAloha",
        "transfer-cube",
        plain_aloha,
        240,
    ),
}


def main() -> None:
    import yardstick.engine  # noqa: F401  # ys.engine below

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=sorted(CASES), action="append")
    args = parser.parse_args()
    print(machine(), flush=True)
    for name in args.only or list(CASES):
        benchmark, params, policy, task, plain, size = CASES[name]
        engine(benchmark, params, policy, task)  # imports and warms what both ways share
        ways: dict[str, list[tuple[float, float, float]]] = {"plain": [], "engine": []}
        steps = 0
        for _ in range(args.rounds):
            wall, steps, rendered, cpu = engine(benchmark, params, policy, task)
            ways["engine"].append((wall, rendered, cpu))
            ways["plain"].append(plain(steps, size))
        (plain_s, plain_render, _), (engine_s, engine_render, _) = (min(ways[w]) for w in ("plain", "engine"))
        cpu_ratio = min(r[2] for r in ways["plain"]) / min(r[2] for r in ways["engine"])
        frames = steps + 1
        ratio = plain_s / engine_s
        print(
            f"{name:15s} {steps} steps | plain {frames / plain_s:7.1f} steps/s, "
            f"{1000 * plain_s / frames:6.2f} ms a step, {1000 * plain_render / frames:6.2f} ms a frame | "
            f"engine {frames / engine_s:7.1f} steps/s, {1000 * engine_s / frames:6.2f} ms a step, "
            f"{1000 * engine_render / frames:6.2f} ms a frame | ratio {ratio:.3f}, "
            f"in CPU seconds {cpu_ratio:.3f} "
            f"(target >= {AT_LEAST}: {'met' if ratio >= AT_LEAST else 'NOT met'})",
            flush=True,
        )


if __name__ == "__main__":
    main()
