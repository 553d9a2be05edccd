"""`make demo`'s claim: the expert's success per task through Yardstick is what a plain Meta-World loop
over the same tasks and seeds gives, episode by episode."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from yardstick.engine import Component, RunRequest, Work, evaluate

SEEDS = (0, 1)


def plain_loop(task: str, seed: int) -> tuple[bool, int]:
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    from metaworld.policies import ENV_POLICY_MAP

    env: Any = ALL_V3_ENVIRONMENTS[task]()
    env._partially_observable = False
    del env.sawyer_observation_space
    env._set_task_called = True
    env._freeze_rand_vec = False
    env.seeded_rand_vec = True
    expert: Any = ENV_POLICY_MAP[task]()
    env.seed(seed)
    obs, _ = env.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for steps in range(1, 501):  # noqa: B007 - read after the loop
            obs, _, _, truncated, info = env.step(expert.get_action(obs))
            if info["success"] or truncated:
                break
    env.close()
    return bool(info["success"]), steps


@pytest.mark.slow
def test_expert_through_the_pool_matches_a_plain_meta_world_loop() -> None:
    outcome = evaluate(RunRequest(work=Work(Component("mt10"), Component("expert")), seeds=SEEDS, workers=2))
    assert outcome.complete
    ours = {(r.task, r.seed): (r.success, r.steps) for r in outcome.results}
    plain = {(task, seed): plain_loop(task, seed) for task, seed in ours}
    assert ours == plain
    by_task: dict[str, list[bool]] = {}
    for (task, _), (success, _) in plain.items():
        by_task.setdefault(task, []).append(success)
    assert len(by_task) == 10 and all(len(v) == len(SEEDS) for v in by_task.values())
