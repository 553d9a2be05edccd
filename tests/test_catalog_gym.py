"""Gymnasium ids as benchmarks, and the random policy."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from yardstick.catalog import resolve_benchmark
from yardstick.catalog.gym import gym_benchmark
from yardstick.catalog.random_policy import RandomPolicy
from yardstick.replay3d.format import read
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.episode import Episode


def episode(action_space: tuple[list[float], list[float]] | None = None, task: str = "t") -> Episode:
    return Episode(id="e", task=task, description="", seed=0, trial=0, action_space=action_space)


# -- gym_benchmark ---------------------------------------------------------------------------------------


def test_a_gym_id_declares_its_task_limit_and_action_space() -> None:
    cls = gym_benchmark("Pendulum-v1")
    assert gym_benchmark("Pendulum-v1") is cls, "built once per id"
    assert resolve_benchmark("gym:Pendulum-v1") is cls
    spec = benchmark_spec(cls)
    assert spec.name == "gym:Pendulum-v1"
    assert list(spec.tasks) == ["Pendulum-v1"]
    assert "PendulumEnv" in spec.tasks["Pendulum-v1"]
    assert spec.seeds == tuple(range(100))
    assert spec.max_seconds == pytest.approx(200 * 0.05)  # max_episode_steps × env.dt
    assert spec.action_space == ((-2.0,), (2.0,))


def test_a_mujoco_id_takes_its_step_length_from_the_model() -> None:
    spec = benchmark_spec(gym_benchmark("InvertedPendulum-v5"))
    assert spec.max_seconds == pytest.approx(1000 * 0.04)  # timestep 0.02 × frame_skip 2
    assert spec.action_space == ((-3.0,), (3.0,))


def test_an_env_without_dt_takes_its_frame_rate() -> None:
    spec = benchmark_spec(gym_benchmark("MountainCarContinuous-v0"))
    assert spec.max_seconds == pytest.approx(999 / 30)


def test_a_random_episode_plays_to_its_time_limit() -> None:
    bench = gym_benchmark("Pendulum-v1")()
    spec = benchmark_spec(type(bench))
    policy = RandomPolicy()
    space = (list(spec.action_space[0]), list(spec.action_space[1])) if spec.action_space else None
    ep = episode(space, "Pendulum-v1")
    obs = bench.reset("Pendulum-v1", 3)
    assert set(obs) == {"state"} and obs["state"].shape == (3,)
    rewards: list[float] = []
    done, success, metrics, steps = False, False, {}, 0
    while not done:
        chunk = policy.act(obs, episode=ep, seed=steps)
        assert chunk.shape == (1, 1)
        obs, done, success, metrics = bench.step(chunk[0])
        rewards.append(metrics["reward"])
        steps += 1
    assert steps == 200, "the registered time limit ends the episode"
    assert success is False
    assert set(metrics) == {"reward", "return"}
    assert metrics["return"] == pytest.approx(sum(rewards)) and metrics["return"] < 0
    bench.close()


def test_a_seed_replays_the_same_episode() -> None:
    bench = gym_benchmark("Pendulum-v1")()
    first = bench.reset("Pendulum-v1", 5)["state"]
    bench.step(np.array([1.0]))
    np.testing.assert_array_equal(bench.reset("Pendulum-v1", 5)["state"], first)
    assert not np.array_equal(bench.reset("Pendulum-v1", 6)["state"], first)
    with pytest.raises(ValueError, match="task"):
        bench.reset("CartPole-v1", 0)
    with pytest.raises(ValueError, match="action"):
        bench.step(np.zeros(3))
    bench.close()


def test_unknown_ids_and_discrete_actions_are_refused() -> None:
    with pytest.raises(ValueError, match="'Nope-v0' is not a registered Gymnasium environment"):
        gym_benchmark("Nope-v0")
    with pytest.raises(ValueError, match="Pendulum-v9"):
        gym_benchmark("Pendulum-v9")
    with pytest.raises(ValueError, match="Box"):
        gym_benchmark("CartPole-v1")
    with pytest.raises(ValueError, match="env_id"):
        gym_benchmark("")


# -- RandomPolicy ----------------------------------------------------------------------------------------


def test_the_random_policy_declares_one_step_at_80_hz() -> None:
    spec = policy_spec(RandomPolicy)
    assert spec.hz == 80 and spec.action_chunk_len == 1
    assert spec.infer_keywords == {"episode", "seed"}


def test_a_seed_replays_and_another_seed_differs() -> None:
    policy = RandomPolicy()
    a = policy.act({}, episode=episode(), seed=7)
    b = RandomPolicy().act({}, episode=episode(), seed=7)
    c = policy.act({}, episode=episode(), seed=8)
    assert a.shape == (1, 4) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_draws_stay_within_the_action_space() -> None:
    space = ([-0.5, 0.0, 10.0], [0.5, 0.01, 20.0])
    low, high = np.array(space[0], np.float32), np.array(space[1], np.float32)
    draws = np.concatenate([RandomPolicy().act({}, episode=episode(space), seed=s) for s in range(300)])
    assert draws.shape == (300, 3)
    assert np.all(draws >= low) and np.all(draws <= high)
    assert np.all(draws.max(axis=0) - draws.min(axis=0) > (high - low) * 0.9), "spread across the range"


def test_without_an_action_space_it_draws_from_its_own_range() -> None:
    draws = np.concatenate(
        [RandomPolicy(dim=2, low=3.0, high=4.0).act({}, episode=episode(), seed=s) for s in range(100)]
    )
    assert draws.shape == (100, 2) and np.all(draws >= 3.0) and np.all(draws <= 4.0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"dim": 0}, "dim"), ({"low": 1.0, "high": -1.0}, "low"), ({"high": float("inf")}, "high")],
)
def test_a_bad_range_is_refused(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}:"):
        RandomPolicy(**kwargs)  # type: ignore[arg-type]


def test_a_mujoco_env_is_replayed_in_3d_and_another_plays_on_without_one(tmp_path: Path) -> None:
    """`--record replay` on gym:Pusher-v5 (MuJoCo) keeps each episode's replay and the scene it is drawn in;
    on gym:Pendulum-v1 (no simulator to read) the episode plays and the run says why it has none."""
    yardstick = Path(sys.executable).with_name("yardstick")
    ran = subprocess.run(
        [str(yardstick), "eval", "run", "--benchmark", "gym:Pusher-v5", "--policy", "random", "--trials", "1",
         "--out", str(tmp_path / "pusher"), "--record", "replay"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "MUJOCO_GL": "egl"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    replay = read(tmp_path / "pusher" / "episodes" / "000000" / "replay.seqreplay")
    scene = tmp_path / "pusher" / "scenes" / f"{replay.scene_sha256}.glb"
    assert hashlib.sha256(scene.read_bytes()).hexdigest() == replay.scene_sha256
    assert replay.frames == 101 and replay.nodes  # the reset's frame and one a step of its 100
    assert np.ptp(replay.pos, axis=0).max() > 0.01  # the arm moved
    pendulum = subprocess.run(
        [str(yardstick), "eval", "run", "--benchmark", "gym:Pendulum-v1", "--policy", "random",
         "--trials", "1", "--out", str(tmp_path / "pendulum"), "--record", "replay"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert pendulum.returncode == 0 and "declares no replay" in pendulum.stderr, pendulum.stderr
    assert not list((tmp_path / "pendulum").rglob("*.seqreplay"))
