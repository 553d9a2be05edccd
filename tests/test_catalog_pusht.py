"""PushT against gym-pusht: the same rollout as its own env, the success signal, images, and the baselines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from yardstick.catalog import resolve_benchmark, resolve_policy
from yardstick.catalog.pusht import GOAL, TASK, PushT, PushTHeuristic
from yardstick.catalog.random_policy import RandomAt10Hz
from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.sdk.decorators import benchmark_spec, policy_spec


def test_the_benchmark_declares_the_protocol() -> None:
    spec = benchmark_spec(resolve_benchmark("pusht"))
    assert list(spec.tasks) == [TASK] and spec.seeds == tuple(range(50))
    assert spec.max_seconds == 30.0 and spec.action_space == ((0.0, 0.0), (512.0, 512.0))
    assert resolve_policy("random", "pusht") is RandomAt10Hz and policy_spec(RandomAt10Hz).hz == 10
    assert resolve_policy("heuristic", "pusht") is PushTHeuristic


def test_an_episode_is_gym_pushts() -> None:
    import gym_pusht  # noqa: F401  # registers the env
    import gymnasium

    plain = gymnasium.make("gym_pusht/PushT-v0", obs_type="state")
    state, _ = plain.reset(seed=7)
    bench = PushT()
    obs = bench.reset(TASK, 7)
    np.testing.assert_array_equal(obs["state"], state)
    for action in np.random.default_rng(0).uniform(0, 512, (20, 2)):
        state, reward, terminated, _, info = plain.step(action)
        obs, done, success, metrics = bench.step(action)
        np.testing.assert_array_equal(obs["state"], state)
        assert metrics["reward"] == reward and success == info["is_success"] == done == terminated
    image = obs["image.top"]
    assert image.shape == (96, 96, 3) and image.dtype == np.uint8 and image.std() > 10
    plain.close()
    bench.close()


def test_the_block_on_its_goal_is_a_success() -> None:
    bench = PushT(pixels=False)
    obs = bench.reset(TASK, 0)
    assert set(obs) == {"prompt", "state", "agent_pos"}
    # gym-pusht turns the block about its centre of mass after placing it, which moves it: place it where
    # that move lands it on the goal.
    bench.env.reset(options={"reset_to_state": [100.0, 100.0, *GOAL[:2], GOAL[2]]})
    shift = np.asarray(bench.env.block.position) - GOAL[:2]
    bench.env.reset(options={"reset_to_state": [100.0, 100.0, *(GOAL[:2] - shift), GOAL[2]]})
    _, done, success, metrics = bench.step(np.array([100.0, 100.0]))
    assert success and done and metrics["coverage"] > 0.95
    bench.env.reset(options={"reset_to_state": [100.0, 100.0, *(GOAL[:2] - shift), GOAL[2] + math.pi / 2]})
    _, done, success, metrics = bench.step(np.array([100.0, 100.0]))
    assert not success and not done and metrics["coverage"] < 0.95
    bench.close()


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="hz: PushT plays at 10 Hz"):
        PushT(hz=80)
    with pytest.raises(ValueError, match="image_size"):
        PushT(image_size=4)
    bench = PushT(pixels=False)
    with pytest.raises(RuntimeError, match="before reset"):
        bench.step(np.zeros(2))
    with pytest.raises(ValueError, match="task: PushT has one task"):
        bench.reset("push-l", 0)
    bench.reset(TASK, 0)
    with pytest.raises(ValueError, match=r"action: .* shape \(3,\)"):
        bench.step(np.zeros(3))


@pytest.mark.parametrize("policy", ["random", "heuristic"])
def test_the_baselines_play_the_same_episodes_in_a_pool(policy: str) -> None:
    def run(workers: int) -> list[tuple[int, float]]:
        work = Work(Component("pusht", {"pixels": False}), Component(policy))
        outcome = evaluate(RunRequest(work=work, seeds=[0, 1], workers=workers))
        assert outcome.complete, [r.error for r in outcome.results]
        return [(r.steps, r.metrics["max_reward"]) for r in outcome.results]

    here = run(0)
    assert here == run(2)
    assert all(steps <= 300 for steps, _ in here)


def test_the_heuristic_solves_seeds_random_does_not() -> None:
    def run(policy: str) -> list[tuple[bool, float]]:
        work = Work(Component("pusht", {"pixels": False}), Component(policy))
        outcome = evaluate(RunRequest(work=work, seeds=[21, 38]))
        assert outcome.complete, [r.error for r in outcome.results]
        return [(r.success, r.metrics["max_reward"]) for r in outcome.results]

    heuristic, random = run("heuristic"), run("random")
    # Over seeds 0-49 it solves every one (README); these two it solves in about 50 steps.
    assert all(success for success, _ in heuristic)
    assert sum(best for _, best in heuristic) > sum(best for _, best in random) + 1.0
