"""LIBERO, PushT and ALOHA through Yardstick's engine against a plain loop over the same package.

For each benchmark, in one run: a plain loop (the package's env driven by hand, its frames rendered with the
same tuned renderer at the same size) and the engine in this process (`yardstick eval run --in-process`),
the same task, seeds and actions (the robot held still), both timed from the reset to the episode's last
step. Printed: steps/s, ms a step, ms a frame of the rendering, and the engine's steps/s as a ratio of the
plain loop's (target >= 0.95). The machine is shared and noisy: each way runs `--rounds` times, interleaved,
and its best round counts (3 rounds unless told). Run with `make bench`.
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

os.environ.setdefault("MUJOCO_GL", "egl")
HERE = Path(__file__).resolve()


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


def plain_libero(steps: int, size: int) -> tuple[float, float]:
    """(seconds for reset + steps, seconds of rendering): LIBERO's ControlEnv and a tuned renderer by hand."""
    from yardstick.catalog.libero import SETTLE_ACTION, SETTLE_STEPS
    from yardstick.catalog.libero_env import build_env, init_states
    from yardstick.catalog.libero_tasks import TASKS
    from yardstick.catalog.rendering import CameraRig

    task = TASKS["libero_spatial"][0]
    env = build_env("libero_spatial", task.name)
    states = init_states("libero_spatial", task.name)
    started = time.perf_counter()
    env.seed(0)
    env.reset()
    env.set_init_state(states[0])
    for _ in range(SETTLE_STEPS):
        env.step(SETTLE_ACTION)
    rig = CameraRig(env.sim.model._model, {"agentview": "agentview"}, size, size, hidden_groups=(0,))
    render = 0.0
    for _ in range(steps + 1):
        t0 = time.perf_counter()
        rig.frames(env.sim.data._data)
        render += time.perf_counter() - t0
        env.step(SETTLE_ACTION)
    wall = time.perf_counter() - started
    rig.close()
    env.close()
    return wall, render


def plain_pusht(steps: int, size: int) -> tuple[float, float]:
    from gym_pusht.envs.pusht import PushTEnv

    env = PushTEnv(obs_type="state", observation_width=size, observation_height=size)
    started = time.perf_counter()
    env.reset(seed=0)
    render = 0.0
    for _ in range(steps + 1):
        t0 = time.perf_counter()
        env._render()
        render += time.perf_counter() - t0
        env.step(np.array([256.0, 256.0]))
    return time.perf_counter() - started, render


def plain_aloha(steps: int, size: int) -> tuple[float, float]:
    from gym_aloha.constants import START_ARM_POSE

    from yardstick.catalog.aloha import build_env, place_objects
    from yardstick.catalog.rendering import CameraRig

    env = build_env("transfer-cube")
    rig = CameraRig(env.physics.model.ptr, {"top": "top"}, size, size * 4 // 3)
    pose = list(START_ARM_POSE)
    action = np.array([*pose[:6], 0.5, *pose[8:14], 0.5])
    started = time.perf_counter()
    place_objects(env, "transfer-cube", 0)
    render = 0.0
    for _ in range(steps + 1):
        t0 = time.perf_counter()
        rig.frames(env.physics.data.ptr)
        render += time.perf_counter() - t0
        env.step(action)
    wall = time.perf_counter() - started
    rig.close()
    return wall, render


def engine(benchmark: str, params: dict[str, Any], policy: str, task: str) -> tuple[float, int, float]:
    """(seconds the episode took, its steps, seconds of rendering) through the engine in this process."""
    work = ys.engine.Work(ys.engine.Component(benchmark, params), ys.engine.Component(f"{HERE}:{policy}"))
    request = ys.engine.RunRequest(work=work, tasks=[task], seeds=[0], trials=1, workers=0)
    outcome = ys.engine.evaluate(request)
    (result,) = outcome.results
    assert result.error is None, result.error
    return result.wall_seconds, result.steps, result.timing.rendering


CASES: dict[str, tuple[str, dict[str, Any], str, str, Callable[[int, int], tuple[float, float]], int]] = {
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
    for name in args.only or list(CASES):
        benchmark, params, policy, task, plain, size = CASES[name]
        engine(benchmark, params, policy, task)  # builds and warms both (the env is kept per process)
        best_plain, best_engine = float("inf"), float("inf")
        steps, render_plain, render_engine = 0, 0.0, 0.0
        for _ in range(args.rounds):
            wall, steps_played, rendered = engine(benchmark, params, policy, task)
            if wall < best_engine:
                best_engine, steps, render_engine = wall, steps_played, rendered
            wall, rendered = plain(steps, size)
            if wall < best_plain:
                best_plain, render_plain = wall, rendered
        plain_rate, engine_rate = (steps + 1) / best_plain, (steps + 1) / best_engine
        print(
            f"{name:15s} {steps} steps | plain {plain_rate:7.1f} steps/s, "
            f"{1000 / plain_rate:6.2f} ms a step, "
            f"{1000 * render_plain / (steps + 1):6.2f} ms a frame | engine {engine_rate:7.1f} steps/s, "
            f"{1000 / engine_rate:6.2f} ms a step, {1000 * render_engine / (steps + 1):6.2f} ms a frame | "
            f"ratio {engine_rate / plain_rate:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
