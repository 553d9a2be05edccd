"""PushT (gym-pusht, after Diffusion Policy) as a Yardstick benchmark, and a hand-written pushing heuristic.

The protocol (Diffusion Policy's and LeRobot's): a round agent pushes a T-shaped block onto a T-shaped goal
on a 512 × 512 board, 10 Hz, at most 300 steps (30 s). The action is the agent's target position in pixels,
two numbers in [0, 512] (a PD controller drives it there). The seed places the agent and the block as
gym-pusht's `reset(seed)` does. An episode succeeds, and ends, when the block covers more than 95 %
of the goal (`info["is_success"]`).

Observations: `prompt`, `state` (5: agent x, y, block x, y, block angle), `agent_pos` (2), and with
`pixels=True` (the default) `image.top`, the board from above (uint8, image_size × image_size, 96 by default
as Diffusion Policy's image policies see it). Metrics: `coverage` of the goal by the block, `reward`
(coverage / 0.95, at most 1) and the episode's best, `max_reward`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from yardstick.catalog.extras import PUSHT, require
from yardstick.sdk.decorators import benchmark, infer, policy, reset, step
from yardstick.sdk.episode import Episode
from yardstick.sdk.timing import timed

HZ = 10.0  # gym-pusht's control_hz
MAX_STEPS = 300
TASK = "push-t"
DESCRIPTION = "Push the T-shaped block onto the T-shaped target"
BOARD = 512.0


class _PushTBody:
    def __init__(self, hz: float = HZ, pixels: bool = True, image_size: int = 96) -> None:
        if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not math.isclose(hz, HZ):
            raise ValueError(
                f"hz: PushT plays at {HZ:g} Hz (its controller runs 10 physics steps an action), so the "
                f"policy must play at {HZ:g} Hz, not {hz!r}"
            )
        if isinstance(image_size, bool) or not isinstance(image_size, int) or not 16 <= image_size <= 1024:
            raise ValueError(
                f"image_size: an image is image_size × image_size pixels, 16 to 1024, not {image_size!r}"
            )
        require(PUSHT, "PushT")
        from gym_pusht.envs.pusht import PushTEnv

        self.pixels = bool(pixels)
        self.env = PushTEnv(obs_type="state", observation_width=image_size, observation_height=image_size)
        self._started = False
        self._best = 0.0

    @reset
    def reset(self, task: str, seed: int) -> dict[str, Any]:
        """Start with the agent and the block placed by `seed`."""
        if task != TASK:
            raise ValueError(f"task: PushT has one task, {TASK!r}, not {task!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed: a PushT seed is an int of at least 0, not {seed!r}")
        state, _ = self.env.reset(seed=int(seed))
        self._started, self._best = True, 0.0
        return self._observe(state)

    @step
    def step(self, action: Any) -> tuple[dict[str, Any], bool, bool, dict[str, float]]:
        """Drive the agent towards `action` (x, y in pixels, 0 to 512) for 0.1 s. Returns (observation,
        done, success, metrics): done is success, the goal more than 95 % covered."""
        if not self._started:
            raise RuntimeError("PushT.step before reset: reset(task, seed) starts an episode")
        played = np.asarray(action, dtype=np.float64)
        if played.shape != (2,):
            raise ValueError(
                f"action: a PushT action is 2 numbers (x, y in pixels), not shape {played.shape}"
            )
        if not np.all(np.isfinite(played)):
            raise ValueError(f"action: every number of an action is finite, not {played.tolist()}")
        state, reward, _, _, info = self.env.step(played)
        self._best = max(self._best, float(reward))
        success = bool(info["is_success"])
        metrics = {"coverage": float(info["coverage"]), "reward": float(reward), "max_reward": self._best}
        return self._observe(state), success, success, metrics

    def close(self) -> None:
        self.env.close()

    def _observe(self, state: npt.NDArray[np.float64]) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "prompt": DESCRIPTION,
            "state": np.asarray(state, dtype=np.float64),
            "agent_pos": np.asarray(state[:2], dtype=np.float64),
        }
        if self.pixels:
            with timed("rendering"):
                obs["image.top"] = np.ascontiguousarray(self.env._render())
        return obs


@benchmark(
    name="pusht",
    tasks={TASK: DESCRIPTION},
    seeds=range(50),
    max_seconds=MAX_STEPS / HZ,
    init={"hz": "{policy.hz}"},
    action_space=([0.0, 0.0], [BOARD, BOARD]),
)
class PushT(_PushTBody):
    """PushT: one task, seeds 0-49, 10 Hz, 300 steps, the agent's target in pixels."""

    BUILTIN_POLICIES: ClassVar[dict[str, str]] = {
        "random": "yardstick.catalog.random_policy:RandomAt10Hz",
        "heuristic": "yardstick.catalog.pusht:PushTHeuristic",
    }


# The goal pose gym-pusht fixes: x, y, angle.
GOAL = np.array([256.0, 256.0, math.pi / 4])


@policy(hz=HZ)
class PushTHeuristic:
    """A hand-written pusher: it aligns the block with the goal by pushing it from the side opposite to where
    it must go, turning it by pushing one end of the T's bar. A floor for learned policies, not an expert.

    Each step: if the block is far from the goal position, the agent goes behind the block (on the line from
    the goal through the block, `STANDOFF` pixels past it) and then pushes through it towards the goal; once
    close, it turns the block by pushing the bar's end that leads the turn."""

    STANDOFF = 45.0
    PUSH = 30.0

    @infer
    def act(self, obs: dict[str, Any], *, episode: Episode) -> npt.NDArray[np.float64]:
        agent = np.asarray(obs["state"][:2], dtype=np.float64)
        block = np.asarray(obs["state"][2:4], dtype=np.float64)
        angle = float(obs["state"][4])
        to_goal = GOAL[:2] - block
        distance = float(np.linalg.norm(to_goal))
        turn = (GOAL[2] - angle + math.pi) % (2 * math.pi) - math.pi
        if distance > 15.0:
            direction = to_goal / distance
            behind = block - direction * self.STANDOFF
            # Go round the block to the pushing side first, then push through it.
            if np.linalg.norm(agent - behind) > 12.0 and np.dot(agent - block, direction) > -20.0:
                side = np.array([-direction[1], direction[0]])
                if np.dot(agent - block, side) < 0:
                    side = -side
                target = block + side * self.STANDOFF * 1.5 - direction * self.STANDOFF * 0.5
            elif np.linalg.norm(agent - behind) > 12.0:
                target = behind
            else:
                target = block + direction * self.PUSH
        elif abs(turn) > 0.08:
            # The bar's ends lie along the block's x axis; pushing an end sideways turns the block.
            bar = np.array([math.cos(angle), math.sin(angle)])
            normal = np.array([-bar[1], bar[0]]) * (1.0 if turn > 0 else -1.0)
            end = block + bar * 45.0
            start = end - normal * 30.0
            target = start if np.linalg.norm(agent - start) > 10.0 else end + normal * 20.0
        else:
            target = block + to_goal
        return np.clip(target, 0.0, BOARD)[None, :]
