"""A benchmark and a policy that do nothing: what the engine's own loop costs a step when nothing else runs
between its steps (its code and data stay in the caches). `bench/engine.py` prints it beside what the engine
costs a step between Meta-World's steps."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

import yardstick as ys

STEPS = 5000  # an episode
OBSERVATION = {"state": np.zeros(39)}
CHUNK = np.zeros((1, 4), dtype=np.float32)


@ys.benchmark(tasks={"idle": "Nothing happens"}, seeds=range(4), max_seconds=STEPS / 80 + 1)
class Idle:
    @ys.reset
    def reset(self, task: str, seed: int) -> dict[str, Any]:
        self.steps = 0
        return OBSERVATION

    @ys.step
    def step(self, action: Any) -> tuple[dict[str, Any], bool, bool, dict[str, float]]:
        self.steps += 1
        return OBSERVATION, self.steps >= STEPS, False, {"reward": 0.0}


@ys.policy(hz=80)
class IdlePolicy:
    @ys.infer
    def act(self, obs: Any, *, episode: ys.Episode | None = None) -> np.ndarray:
        return CHUNK


def engine_cost(rounds: int = 3) -> float:
    """Seconds a step the engine in process adds to calling the same benchmark and policy by hand, the best
    round of each."""
    from yardstick.engine import Component, RunRequest, Work, evaluate
    from yardstick.engine.executors import InProcessExecutor

    here = Path(__file__).resolve()
    work = Work(Component(f"{here}:Idle"), Component(f"{here}:IdlePolicy"))
    through, by_hand = float("inf"), float("inf")
    for _ in range(rounds):
        outcome = evaluate(RunRequest(work=work, trials=4), executor=InProcessExecutor())
        through = min(through, outcome.wall_s / sum(r.steps for r in outcome.results))
        by_hand = min(by_hand, _by_hand(4))
    return through - by_hand


def _by_hand(episodes: int) -> float:
    benchmark, policy = Idle(), IdlePolicy()
    started = time.perf_counter()
    for seed in range(episodes):
        obs, done = benchmark.reset("idle", seed), False
        while not done:
            obs, done, _, _ = benchmark.step(policy.act(obs)[0])
    return (time.perf_counter() - started) / (episodes * STEPS)
