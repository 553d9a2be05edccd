"""The two `positronic-platform-client` versions users install today, each from a venv of its own (made by
`make`), drive one server across their whole surface: 0.41.2 (the newest, with the version handshake) and
0.37.1. Each call's outcome and the contract version every answer named come back from
`tests/positronic_surface.py`, run by that venv's Python."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_client.errors import PlatformError
from platform_client.eval_plan import EvalPlan

from platform_harness import Harness, running_platform, toy_plan
from yardstick.positronic.handshake import PLATFORM_VERSION
from yardstick.store.models import Run
from yardstick.store.states import RunStatus

ROOT = Path(__file__).parent.parent
SURFACE = Path(__file__).parent / "positronic_surface.py"
VERSIONS = ("0.41.2", "0.37.1")


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    with running_platform(tmp_path_factory.mktemp("clients"), None) as harness:
        yield harness


def surface(platform: Harness, version: str, key: str) -> dict[str, dict[str, Any]]:
    python = ROOT / f".venv-positronic-{version}" / "bin" / "python"
    assert python.exists(), f"{python} is missing: `make env` makes it"
    plan = toy_plan(f"surface-{version}", spec="rows").model_dump_json()
    slow = toy_plan(f"surface-slow-{version}", spec="slow", episodes=20).model_dump_json()
    done = subprocess.run(
        [str(python), str(SURFACE), platform.url, platform.keys[key], plan, slow],
        capture_output=True,
        text=True,
        timeout=600,  # generous: a loaded machine plays the 4 episodes in seconds
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},  # that venv's client, none other
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    return {row["call"]: row for row in rows}


@pytest.mark.parametrize("version", VERSIONS)
def test_each_client_runs_its_whole_surface_against_one_server(platform: Harness, version: str) -> None:
    calls = surface(platform, version, "alice")
    failed = {name: row for name, row in calls.items() if not row["ok"]}
    # Refused as the contract says: a made-up GitHub token is not a sign-in this install takes.
    assert set(failed) == {"users.register", "submissions.cancel ended"}, failed
    assert failed["users.register"]["code"] == "unauthorized"
    assert failed["submissions.cancel ended"]["code"] == "bad_request"  # an ended run stays as it ended
    assert "already finished" in failed["submissions.cancel ended"]["message"]
    for name, row in calls.items():
        assert row["platform_version"] and set(row["platform_version"]) == {PLATFORM_VERSION}, (name, row)

    assert {"toys.tally", "toys.acme"} <= set(calls["catalog.evals"]["said"])
    tasks = {task["id"]: task for task in calls["catalog.tasks"]["said"]}
    if version == "0.41.2":
        assert tasks["three"]["embodiments"] == ["sim"]
        assert all(len(task["embodiments"]) == 1 for task in tasks.values())
    else:  # the field it had, beside the new one it does not know
        assert tasks["three"]["embodiment"] == "sim"
    created = calls["submissions.create"]["said"]
    assert calls["submissions.create again"]["said"] == created  # the transaction key makes it idempotent
    assert calls["submissions.resolve"]["said"] == 4
    assert calls["submissions.get"]["said"]["status"] == "finished"
    assert calls["submissions.get"]["said"]["primary"] == pytest.approx(0.5)  # Tally: even seeds succeed
    assert created in calls["submissions.list"]["said"]
    assert "result.json" in calls["submissions.artifacts"]["said"]
    assert calls["signed url"]["said"] == pytest.approx(0.5)
    # Refunded exactly when a worker had not yet taken the run (test_platform.py holds a pending one back to
    # see the refund): here a free worker may take it before the cancel lands.
    cancelled = calls["submissions.cancel"]["said"]
    with platform.platform.db.reading() as session:
        run = session.get(Run, int(cancelled["id"], 16))  # a submission id is the run id in hex
        assert run is not None and run.status is RunStatus.CANCELLED
        assert cancelled == {"status": "cancelled", "refunded": run.started_at is None, "id": cancelled["id"]}
    assert calls["users.me"]["said"]["tenant"] == "acme"


def test_a_client_older_than_the_oldest_read_is_told_what_to_install(platform: Harness) -> None:
    headers = {"Authorization": f"Bearer {platform.keys['alice']}", "X-Positronic-Client-Version": "0.30.0"}
    answer = httpx.get(f"{platform.url}/v1/users.me", headers=headers, timeout=30)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "bad_request"
    assert f"pip install 'positronic-platform-client=={PLATFORM_VERSION}'" in error["message"]
    assert answer.headers["X-Positronic-Platform-Version"] == PLATFORM_VERSION

    headers["X-Positronic-Client-Version"] = "not-a-version"
    assert httpx.get(f"{platform.url}/v1/users.me", headers=headers, timeout=30).status_code == 400
    del headers["X-Positronic-Client-Version"]  # 0.37.1 names no version, and is served
    assert httpx.get(f"{platform.url}/v1/users.me", headers=headers, timeout=30).status_code == 200


def test_a_plan_on_a_shape_its_tasks_do_not_take_is_refused_naming_task_and_shapes(platform: Harness) -> None:
    client = platform.client("alice")
    plan = toy_plan("wrong-shape").model_dump(mode="json")
    del plan["eval"]
    plan["tasks"] = [{"task_id": "three"}]
    plan["rig_shape"] = "franka"
    with pytest.raises(PlatformError) as refused:
        client.resolve_plan(EvalPlan.model_validate(plan))
    assert refused.value.code is not None and refused.value.code.name == "bad_request"
    assert "'three'" in refused.value.message and "sim" in refused.value.message
