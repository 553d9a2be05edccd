"""The virtual clock, chunk playback, the seed mapping and per-episode state, played exactly on toys."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from yardstick.engine.guard import Guard
from yardstick.engine.loop import Playback, play
from yardstick.engine.plan import plan_episodes
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.worlds import ManyWorlds, SingleWorld
from yardstick.sdk.calls import InProcessPolicy, inference_seed
from yardstick.sdk.decorators import benchmark_spec, policy, policy_spec
from yardstick.sdk.decorators import infer as ys_infer
from yardstick.sdk.errors import SpecError

sys.path.insert(0, str(Path(__file__).parent))
import toys


def run_toy(
    policy_cls: type, episodes: list[EpisodeSpec], playback: Playback = Playback(), timeout: float = 5.0
) -> tuple[list[EpisodeResult], toys.Tally]:
    bench = toys.Tally()
    spec = benchmark_spec(toys.Tally)
    driver = InProcessPolicy(policy_cls(), policy_spec(policy_cls))
    with Guard(timeout) as guard:
        results = list(play(iter(episodes), SingleWorld(bench, spec), driver, spec, guard, playback))
    return results, bench


def played(bench: toys.Tally) -> list[float]:
    return [float(np.asarray(a).ravel()[0]) for a in bench.played]


def episode(task: str, seed: int = 0, index: int = 0) -> EpisodeSpec:
    return EpisodeSpec(index=index, task=task, trial=0, seed=seed)


def test_chunks_play_open_loop_and_the_policy_is_asked_again_at_its_replan_step() -> None:
    # Rows: hz 10, 4-row chunks, asked again every 2 steps; row i of a chunk asked at step t is t*100+i.
    [result], bench = run_toy(toys.Rows, [episode("ten")])
    assert played(bench) == [0, 1, 200, 201, 400, 401, 600, 601, 800, 801]
    assert (result.steps, result.inferences, result.robot_seconds) == (10, 5, 1.0)
    assert result.terminated and not result.truncated and result.success


def test_an_episode_is_cut_when_its_robot_time_runs_out() -> None:
    # max_seconds 2.0 at 10 Hz: 20 steps of robot time, then truncated.
    [result], _ = run_toy(toys.Rows, [episode("never")])
    assert (result.steps, result.robot_seconds) == (20, 2.0)
    assert result.truncated and not result.terminated and not result.success


def test_charged_inference_plays_the_old_chunk_on_and_skips_the_stale_rows_of_the_new() -> None:
    # 250 ms at 10 Hz is 3 steps: asked at step 2, the answer lands at step 5 and plays from its row 3;
    # meanwhile the old chunk plays out (rows 2, 3) and holds its last row.
    [result], bench = run_toy(toys.Rows, [episode("ten")], Playback(charge_inference=True, latency_ms=250))
    assert played(bench) == [0, 1, 2, 3, 3, 203, 203, 203, 503, 503]
    assert result.inferences == 4  # asked at steps 0, 2, 5 and 8


def test_charged_inference_with_a_latency_under_one_step_changes_nothing_but_the_delay() -> None:
    # 50 ms is half a step: the answer is a step late, so each chunk starts at its row 1.
    _, bench = run_toy(toys.Rows, [episode("ten")], Playback(charge_inference=True, latency_ms=50))
    assert played(bench) == [0, 1, 2, 201, 202, 401, 402, 601, 602, 801]


def test_a_chunk_shorter_than_the_replan_step_is_asked_again_when_it_runs_out() -> None:
    from yardstick.sdk.decorators import infer

    @policy(hz=10, action_chunk_len=8, action_chunk_exec_len=6)
    class Short:
        @infer
        def act(self, obs: dict[str, Any]) -> np.ndarray:
            return np.array([[obs["t"] * 100 + i] for i in range(3)])

    _, bench = run_toy(Short, [episode("ten")])
    assert played(bench) == [0, 1, 2, 300, 301, 302, 600, 601, 602, 900]


def test_rows_past_action_chunk_len_never_play() -> None:
    from yardstick.sdk.decorators import infer

    @policy(hz=10, action_chunk_len=2)
    class Long:
        @infer
        def act(self, obs: dict[str, Any]) -> np.ndarray:
            return np.array([[obs["t"] * 100 + i] for i in range(50)])

    _, bench = run_toy(Long, [episode("three")])
    assert played(bench) == [0, 1, 200]


def test_trial_k_runs_seed_k_mod_len_seeds_and_repeats_are_marked() -> None:
    spec = benchmark_spec(toys.Tally)  # seeds 0..3
    episodes = plan_episodes(spec, tasks=["ten", "three"], trials=6)
    assert [(e.task, e.trial, e.seed, e.repeat) for e in episodes[:6]] == [
        ("ten", 0, 0, False),
        ("ten", 1, 1, False),
        ("ten", 2, 2, False),
        ("ten", 3, 3, False),
        ("ten", 4, 0, True),
        ("ten", 5, 1, True),
    ]
    assert [e.index for e in episodes] == list(range(12))
    assert [e.seed for e in plan_episodes(spec, tasks=["ten"], seeds=[3, 1], trials=3)] == [3, 1, 3]
    assert len(plan_episodes(spec)) == 3 * 4  # default: one trial per seed


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tasks": ["nope"]}, "tasks"),
        ({"seeds": [99]}, "seeds"),
        ({"trials": 0}, "trials"),
        ({"tasks": ["ten", "ten"]}, "tasks"),
        ({"seeds": [1, 1]}, "seeds"),
    ],
)
def test_a_run_naming_what_the_benchmark_lacks_is_refused(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as refused:
        plan_episodes(benchmark_spec(toys.Tally), **kwargs)
    assert refused.value.field == field


def test_a_sampling_policy_gets_seeds_from_the_episode_seed_and_the_inference_count() -> None:
    episodes = [
        episode("ten", seed=1, index=0),
        episode("ten", seed=1, index=1),
        episode("ten", seed=2, index=2),
    ]
    first, bench = run_toy(toys.Sampler, episodes)
    again, _ = run_toy(toys.Sampler, episodes)
    assert [r.outcome() for r in first] == [r.outcome() for r in again]
    assert first[0].metrics["total"] == first[1].metrics["total"]  # same seed, same draws
    assert first[0].metrics["total"] != first[2].metrics["total"]
    assert inference_seed(1, 0) != inference_seed(1, 1) != inference_seed(2, 0)
    assert all(-1.0 <= a <= 1.0 for a in played(bench))  # drawn within the declared action space


def test_vectorized_worlds_give_the_results_of_one_world_at_a_time() -> None:
    spec = benchmark_spec(toys.Tally)
    episodes = plan_episodes(spec, trials=5)
    single, _ = run_toy(toys.Rows, episodes)
    many_spec = benchmark_spec(toys.TallyMany)
    toys.BatchedRows.calls = []
    driver = InProcessPolicy(toys.BatchedRows(), policy_spec(toys.BatchedRows))
    with Guard(5) as guard:
        many = list(
            play(iter(episodes), ManyWorlds(toys.TallyMany(4), many_spec, 4), driver, many_spec, guard)
        )
    assert sorted((r.outcome() for r in many), key=lambda o: o["index"]) == [r.outcome() for r in single]
    assert max(toys.BatchedRows.calls) == 4  # one call for all four worlds at a step


def test_a_batched_policy_is_handed_a_size_it_accepts_padded_and_answers_are_trimmed() -> None:
    from yardstick.sdk.decorators import infer

    seen: list[int] = []

    @policy(hz=10, batch_sizes=[4])
    class OnlyFour:
        @infer
        def act(self, obs: list[Any]) -> list[np.ndarray]:
            seen.append(len(obs))
            return [np.array([[i]]) for i in range(len(obs))]

    driver = InProcessPolicy(OnlyFour(), policy_spec(OnlyFour))
    answers = driver.infer([{}, {}, {}], [], [])
    assert seen == [4] and [int(a[0][0]) for a in answers] == [0, 1, 2]


def test_episode_state_is_the_policys_own_per_episode() -> None:
    results, _ = run_toy(toys.Sampler, [episode("three", index=0), episode("ten", index=1)])
    assert [r.inferences for r in results] == [3, 10]


def test_only_numeric_metrics_are_kept_and_success_is_among_them() -> None:
    [result], _ = run_toy(toys.Rows, [episode("three")])
    assert result.metrics == {"total": 201.0, "success": 1.0}


@policy(hz=10)
class ThreeWide:
    @ys_infer
    def act(self, obs: dict[str, Any]) -> Any:
        return np.zeros((1, 3))


def test_an_action_of_the_wrong_width_fails_on_step_one_as_the_policys() -> None:
    (result,), bench = run_toy(ThreeWide, [episode("ten")])
    assert result.failure is not None and result.failure.value == "malformed_answer"
    assert result.fault is not None and result.fault.value == "policy"
    assert "action_space takes 1" in (result.error or "") and result.steps == 0
    assert bench.played == []  # nothing reached the simulator
