"""Small MuJoCo benchmarks (yardstick.sdk) whose replays say looks the model does not carry, for the local
runs of `test_replay_looks.py` and the viewer's test: a cart pushed along a rail and a ball dropped beside
it. `LooksBench`'s cart turns red from its second step on and its ball is hidden from its third; the looks
method says all of it at every frame, as a benchmark would. Others get their looks wrong, or are vectorized,
or declare a SAPIEN replay."""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

import yardstick as ys

XML = """
<mujoco>
  <worldbody>
    <light pos="0 0 3"/>
    <geom name="floor" type="plane" size="2 2 0.1" rgba="0.8 0.8 0.8 1"/>
    <body name="cart" pos="0 0 0.1">
      <joint name="rail" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.1 0.1 0.1" rgba="0.2 0.4 0.8 1"/>
    </body>
    <body name="ball" pos="0 0.5 1">
      <freejoint/>
      <geom type="sphere" size="0.05" rgba="0.9 0.2 0.2 1"/>
    </body>
  </worldbody>
</mujoco>
"""
BLUE, RED, GREEN = [0.2, 0.4, 0.8, 1.0], [1.0, 0.0, 0.0, 1.0], [0.0, 0.8, 0.2, 1.0]
STEPS = 6  # an episode's steps: frames 0 (the reset's) to 6
TASKS = {"push": "push the cart along its rail"}
REPLAY = {"engine": "mujoco", "state": "sim", "looks": "looks"}


class _Cart:
    """One world: the cart pushed by the action, the ball falling."""

    def __init__(self) -> None:
        self.model = mujoco.MjModel.from_xml_string(XML)
        self.data = mujoco.MjData(self.model)
        self.steps = 0

    def reset(self) -> dict[str, Any]:
        mujoco.mj_resetData(self.model, self.data)
        mujoco.mj_forward(self.model, self.data)
        self.steps = 0
        return {"x": float(self.data.qpos[0])}

    def step(self, action: Any) -> tuple[dict[str, Any], bool, bool]:
        self.data.qpos[0] += float(np.asarray(action).reshape(-1)[0])
        mujoco.mj_step(self.model, self.data)
        self.steps += 1
        return {"x": float(self.data.qpos[0])}, self.steps >= STEPS, self.steps >= STEPS


@ys.benchmark(tasks=TASKS, seeds=range(2), max_seconds=2.0, replay=REPLAY)
class LooksBench:
    def __init__(self) -> None:
        self.world = _Cart()

    def sim(self) -> Any:
        return self.world.model, self.world.data

    def looks(self) -> Any:
        steps = self.world.steps
        # Numpy values, as a benchmark may well hand them.
        return {
            "cart": {"rgba": np.array(RED if steps >= 2 else BLUE)},
            "ball": {"visible": np.bool_(steps < 3)},
        }

    @ys.reset
    def reset(self, task: str, seed: int) -> dict[str, Any]:
        return self.world.reset()

    @ys.step
    def step(self, action: Any) -> tuple[dict[str, Any], bool, bool]:
        return self.world.step(action)


@ys.benchmark(tasks=TASKS, seeds=range(1), max_seconds=2.0, replay=REPLAY)
class RaisingLooks(LooksBench):
    def looks(self) -> Any:
        if self.world.steps >= 2:
            raise RuntimeError("the paint ran out")
        return super().looks()


@ys.benchmark(tasks=TASKS, seeds=range(1), max_seconds=2.0, replay=REPLAY)
class ListedLooks(LooksBench):
    def looks(self) -> Any:
        return [("cart", RED)] if self.world.steps >= 2 else super().looks()


@ys.benchmark(tasks=TASKS, seeds=range(1), max_seconds=2.0, replay=REPLAY)
class ThreeColours(LooksBench):
    def looks(self) -> Any:
        return {"cart": {"rgba": [1.0, 0.0, 0.0]}} if self.world.steps >= 2 else super().looks()


@ys.benchmark(tasks=TASKS, seeds=range(4), max_seconds=2.0, replay=REPLAY, init={"worlds": "{num_worlds}"})
class ManyCarts:
    """Two worlds a call; each world's cart is coloured by the seed it plays (blue: even, green: odd)."""

    def __init__(self, worlds: int) -> None:
        self.worlds = [_Cart() for _ in range(worlds)]
        self.seeds = [0] * worlds

    def sim(self, world: int) -> Any:
        return self.worlds[world].model, self.worlds[world].data

    def looks(self, world: int) -> Any:
        return {"cart": {"rgba": GREEN if self.seeds[world] % 2 else BLUE}}

    @ys.reset
    def reset(self, worlds: list[int], tasks: list[str], seeds: list[int]) -> list[dict[str, Any]]:
        for world, seed in zip(worlds, seeds, strict=True):
            self.seeds[world] = seed
        return [self.worlds[world].reset() for world in worlds]

    @ys.step
    @ys.concurrent(sizes=[2])
    def step(self, worlds: list[int], actions: list[Any]) -> list[tuple[dict[str, Any], bool, bool]]:
        return [self.worlds[world].step(action) for world, action in zip(worlds, actions, strict=True)]


@ys.benchmark(tasks=TASKS, seeds=range(2), max_seconds=2.0, replay={"engine": "sapien", "state": "scene"})
class SapienDeclared(LooksBench):
    """Declares a SAPIEN replay (SAPIEN is not installed here: its world is the MuJoCo cart's)."""

    def scene(self) -> Any:
        raise AssertionError("Yardstick reads no SAPIEN scene")


@ys.policy(hz=10)
class Push:
    @ys.infer
    def act(self, obs: Any) -> np.ndarray:
        return np.full((1, 1), 0.05)
