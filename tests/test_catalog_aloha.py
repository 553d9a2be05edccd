"""ALOHA insertion and transfer-cube against gym-aloha, the cameras rendered only as asked, determinism, and
the scripted transfer-cube expert."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sims import project, red_centre
from yardstick.catalog import resolve_benchmark, resolve_policy
from yardstick.catalog.aloha import ARM_HIGH, ARM_LOW, CAMERAS, HZ, Aloha, AlohaInsertion, AlohaTransferCube
from yardstick.catalog.aloha_expert import TransferCubeExpert
from yardstick.catalog.random_policy import RandomAt50Hz
from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.sdk.decorators import benchmark_spec, policy_spec

slow = pytest.mark.slow
HERE = Path(__file__).resolve().parent
# Seeds the expert must succeed at (it does at every seed 0-49; its rate is in the README).
EXPERT_SEEDS = [0, 3, 7]


@pytest.fixture(scope="module")
def cube() -> Iterator[AlohaTransferCube]:
    bench = AlohaTransferCube(cameras=())
    yield bench
    bench.close()


def test_the_benchmarks_declare_the_protocol() -> None:
    assert resolve_benchmark("aloha") is Aloha
    assert resolve_benchmark("aloha/transfer-cube") is AlohaTransferCube
    assert resolve_benchmark("aloha/insertion") is AlohaInsertion
    assert list(benchmark_spec(Aloha).tasks) == ["insertion", "transfer-cube"]
    for cls in (Aloha, AlohaInsertion, AlohaTransferCube):
        spec = benchmark_spec(cls)
        assert spec.max_seconds == 8.0 and spec.seeds == tuple(range(50))
        assert spec.action_space == (tuple(ARM_LOW * 2), tuple(ARM_HIGH * 2))
    assert resolve_policy("random", "aloha") is RandomAt50Hz and policy_spec(RandomAt50Hz).hz == HZ
    assert resolve_policy("expert", "aloha/transfer-cube") is TransferCubeExpert
    assert policy_spec(TransferCubeExpert).hz == HZ


@slow
def test_the_action_space_is_the_models_actuators() -> None:
    from gym_aloha.constants import unnormalize_puppet_gripper_position

    bench = Aloha(cameras=())
    for task in ("insertion", "transfer-cube"):
        bench.reset(task, 0)
        model = bench._worlds[task].env.physics.model.ptr
        names = [model.camera(i).name for i in range(model.ncam)]
        assert set(CAMERAS) <= set(names)
        ranges = model.actuator_ctrlrange
        for first in (0, 8):  # the left arm's actuators, then the right's
            np.testing.assert_allclose(ranges[first : first + 6, 0], ARM_LOW[:6])
            np.testing.assert_allclose(ranges[first : first + 6, 1], ARM_HIGH[:6])
            # The gripper's normalized opening 0..1 covers its finger's range.
            fingers = ranges[first + 6]
            assert unnormalize_puppet_gripper_position(0.0) <= fingers[0]
            assert unnormalize_puppet_gripper_position(1.0) >= fingers[1]
    bench.close()


@slow
@pytest.mark.parametrize("task", ["insertion", "transfer-cube"])
def test_an_episode_is_gym_alohas(task: str) -> None:
    """The same seed and actions give the joint state gym-aloha's own env gives, and the same rewards."""
    from gym_aloha.env import AlohaEnv

    plain = AlohaEnv(task.replace("-", "_"), obs_type="pixels_agent_pos")
    plain_obs, _ = plain.reset(seed=11)
    ours = Aloha(cameras=())
    obs = ours.reset(task, 11)
    np.testing.assert_array_equal(obs["state"], plain_obs["agent_pos"])
    actions = np.random.default_rng(1).uniform(ARM_LOW * 2, ARM_HIGH * 2, (6, 14))
    for action in actions:
        plain_obs, reward, *_ = plain.step(action)
        obs, _, _, metrics = ours.step(action)
        np.testing.assert_array_equal(obs["state"], plain_obs["agent_pos"])
        assert metrics["reward"] == reward
    ours.close()


@slow
def test_only_the_asked_cameras_render_at_the_asked_size() -> None:
    bench = AlohaTransferCube(cameras=["top", "left_wrist"], image_size=[120, 160])
    obs = bench.reset("transfer-cube", 0)
    assert {k for k in obs if k.startswith("image")} == {"image.top", "image.left_wrist"}
    for key in ("image.top", "image.left_wrist"):
        assert obs[key].shape == (120, 160, 3) and obs[key].dtype == np.uint8 and obs[key].std() > 5
    assert set(obs) == {"prompt", "state", "qvel", "env_state", "image.top", "image.left_wrist"}
    bench.close()


@slow
def test_the_top_image_is_upright() -> None:
    """The red cube is where the top camera's geometry puts it in an upright image."""
    bench = AlohaTransferCube(cameras=["top"], image_size=[240, 320])
    obs = bench.reset("transfer-cube", 5)
    for _ in range(20):  # let it fall onto the table
        obs, *_ = bench.step(obs["state"])
    physics = bench._worlds["transfer-cube"].env.physics
    model, data = physics.model.ptr, physics.data.ptr
    expected = project(model, data, "top", obs["env_state"][:3], 240, 320)
    row, column = red_centre(obs["image.top"])
    assert abs(row - expected[0]) < 6 and abs(column - expected[1]) < 6, (row, column, expected)
    bench.close()


@slow
def test_a_seed_places_the_objects_and_gives_the_same_episode(cube: AlohaTransferCube) -> None:
    actions = np.random.default_rng(2).uniform(ARM_LOW * 2, ARM_HIGH * 2, (10, 14))

    def play(seed: int) -> list[np.ndarray]:
        obs = cube.reset("transfer-cube", seed)
        seen = [obs["env_state"]]
        for action in actions:
            obs, *_ = cube.step(action)
            seen.append(np.concatenate([obs["state"], obs["env_state"]]))
        return seen

    first = play(4)
    play(9)
    for a, b in zip(first, play(4), strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], play(5)[0]), "another seed, another cube pose"


def test_bad_arguments_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="hz: ALOHA plays at 50 Hz"):
        Aloha(hz=80)
    with pytest.raises(ValueError, match="cameras"):
        Aloha(cameras=["front"])
    with pytest.raises(ValueError, match="image_size"):
        Aloha(image_size=[10, 10, 3])


@slow
def test_bad_calls_are_refused_clearly(cube: AlohaTransferCube) -> None:
    with pytest.raises(ValueError, match="task: 'insertion' is not a task of AlohaTransferCube"):
        cube.reset("insertion", 0)
    with pytest.raises(ValueError, match="seed"):
        cube.reset("transfer-cube", -1)
    cube.reset("transfer-cube", 0)
    with pytest.raises(ValueError, match=r"action: .* shape \(7,\)"):
        cube.step(np.zeros(7))


@slow
def test_the_expert_transfers_the_cube() -> None:
    work = Work(Component("aloha/transfer-cube", {"cameras": []}), Component("expert"))
    outcome = evaluate(RunRequest(work=work, seeds=EXPERT_SEEDS, workers=0))
    assert len(outcome.results) == len(EXPERT_SEEDS)
    for result in outcome.results:
        assert result.error is None and result.success and result.terminated
        assert result.metrics["max_reward"] == 4.0 and result.steps < 400


@slow
def test_the_same_seed_gives_the_same_episode_in_a_pool() -> None:
    def run(workers: int) -> list[tuple[int, float, float]]:
        work = Work(Component("aloha", {"cameras": []}), Component(f"{HERE / 'sims.py'}:FeedbackAt50Hz"))
        outcome = evaluate(RunRequest(work=work, seeds=[1, 2], workers=workers))
        assert outcome.complete, [r.error for r in outcome.results]
        return [(r.steps, r.metrics["reward"], r.metrics["max_reward"]) for r in outcome.results]

    assert run(0) == run(2)


@slow
def test_targets_that_make_the_physics_diverge_end_the_episode_failed(cube: AlohaTransferCube) -> None:
    cube.reset("transfer-cube", 0)
    extremes = (np.array(ARM_LOW * 2), np.array(ARM_HIGH * 2))
    for step in range(400):
        _, done, success, metrics = cube.step(extremes[step % 2])
        if done:
            break
    assert done and not success and metrics["physics_error"] == 1.0
    with pytest.raises(RuntimeError, match="before reset"):
        cube.step(extremes[0])
