"""A benchmark and a policy in one file, to show the authoring API end to end.

    yardstick eval run --benchmark examples/reach2d.py:Reach2D --policy examples/reach2d.py:GoTo

Reach2D moves a point in the plane towards a goal; the seed places the goal. It takes its control rate
from the policy it evaluates ("{policy.hz}"), so a step is always 1/hz seconds of its simulated time.
GoTo answers chunks of 8 moves and asks again after 4.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import yardstick as ys


@ys.benchmark(
    tasks={"near": "Reach a goal 0.5 m away", "far": "Reach a goal 2 m away"},
    seeds=range(20),
    max_seconds={"near": 3.0, "far": 5.0},
    init={"hz": "{policy.hz}"},
    action_space=([-1.0, -1.0], [1.0, 1.0]),
)
class Reach2D:
    def __init__(self, hz: float = 10.0, speed: float = 1.0) -> None:
        self.dt = 1.0 / hz
        self.speed = speed  # metres a second at full action

    @ys.reset
    def start(self, task: str, seed: int) -> dict[str, Any]:
        rng = np.random.default_rng(seed)
        angle = rng.uniform(0, 2 * np.pi)
        radius = 0.5 if task == "near" else 2.0
        self.goal = radius * np.array([np.cos(angle), np.sin(angle)])
        self.position = np.zeros(2)
        self.travelled = 0.0
        return self._observe()

    @ys.step
    def move(self, action: Any) -> tuple[dict[str, Any], bool, bool, dict[str, float]]:
        velocity = np.clip(np.asarray(action, dtype=float), -1.0, 1.0) * self.speed
        self.position = self.position + velocity * self.dt
        self.travelled += float(np.linalg.norm(velocity * self.dt))
        distance = float(np.linalg.norm(self.goal - self.position))
        reached = distance < 0.05
        return self._observe(), reached, reached, {"distance": distance, "travelled": self.travelled}

    def _observe(self) -> dict[str, Any]:
        return {"position": self.position.copy(), "goal": self.goal.copy()}


@ys.policy(hz=10, action_chunk_len=8, action_chunk_exec_len=4)
class GoTo:
    """Heads for the goal, slowing down near it; plans 8 steps ahead assuming its moves land."""

    def __init__(self, gain: float = 2.0) -> None:
        self.gain = gain

    @ys.infer
    def act(self, obs: dict[str, Any]) -> np.ndarray:
        position, goal = obs["position"], obs["goal"]
        rows = []
        for _ in range(8):
            step = np.clip(self.gain * (goal - position), -1.0, 1.0)
            rows.append(step)
            position = position + step * 0.1
        return np.array(rows)
