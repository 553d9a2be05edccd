"""The public evals of `positronic-evals` 0.2.0 that run on ABC's simulator, which is not installed here:
`catalog.evals` lists them, and a plan naming one is refused by name (`eval_unavailable`, saying the
simulator is missing), through the real client against a real gateway, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from platform_client.enums import ErrorCode
from platform_client.errors import PlatformError
from platform_client.eval_plan import EvalPlan
from positronic_evals.evals import ABC_MULTITASK_TASKS, ABC_SCORED_TASKS

from platform_harness import running_platform, toy_plan

ABC_EVALS = {
    "abc.yam_bimanual": list(ABC_SCORED_TASKS),
    "abc.yam_bimanual_multitask": list(ABC_MULTITASK_TASKS),
}


def _naming(eval_name: str, key: str) -> EvalPlan:
    plan = toy_plan(key).model_dump(mode="json", exclude_none=True)
    return EvalPlan.model_validate({**plan, "eval": eval_name})


def test_the_abc_evals_are_listed_and_a_plan_naming_one_is_refused_for_its_missing_simulator(
    tmp_path: Path, database_url: str
) -> None:
    with running_platform(tmp_path, database_url, workers=0) as platform:
        client = platform.client("alice")

        listed = {entry.id: entry for entry in client.catalog_evals().evals}
        for name, tasks in ABC_EVALS.items():
            entry = listed[name]
            assert entry.tasks == tasks and not entry.composable and entry.embodiment == "sim"
            assert "not installed on this platform" in entry.description
        assert len(ABC_EVALS["abc.yam_bimanual"]) == 29 and len(ABC_EVALS["abc.yam_bimanual_multitask"]) == 5

        for name in ABC_EVALS:
            for call in (client.resolve_plan, client.create_submission):
                with pytest.raises(PlatformError) as refused:
                    call(_naming(name, f"abc-{name}"))
                assert refused.value.code is ErrorCode.eval_unavailable
                assert name in str(refused.value) and "ABC's simulator" in str(refused.value)
                assert "not installed" in str(refused.value)
        assert client.list_submissions().submissions == []

        # An eval that no platform defines is still `not_found`, listing what is on offer.
        with pytest.raises(PlatformError) as unknown:
            client.resolve_plan(_naming("abc.held_out", "held-out"))
        assert unknown.value.code is ErrorCode.not_found
