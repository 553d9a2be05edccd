"""A deployment's scaling on the act plane, set as the Sequences SDK sets it: `@seq.policy(min_workers=...)`
at deploy and `seq policy set NAME min_workers=N buffer_workers=N max_gpus=N` after. Workers kept warm serve
with no robot and are never stopped for idling; robots are spread over the workers that serve; the bounds
are checked where they are written. The platform's workers idle out after 3 s here, so a kept worker
outliving its idle time is seen within seconds."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from act_helpers import MODEL, SEQ, Robot, seq, wait_until
from conftest import fresh_database, one_database
from platform_harness import Harness, running_platform
from yardstick.core.act_plane import BEAT_S
from yardstick.store.models import ActSeat, ActWorker, Hosted

EXAMPLES = Path(__file__).parent / "seq_examples"
IDLE_S = 3.0
WARM = "warm-reach"


@pytest.fixture(scope="module", params=one_database("sqlite"))
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    assert SEQ.exists(), f"{SEQ} is missing: `make env` installs the Sequences CLI in a venv apart"
    folder = tmp_path_factory.mktemp(f"scaling-{request.param}")
    with (
        fresh_database(request.param, folder) as url,
        running_platform(folder, url, seat_ttl_s=6.0, act_idle_s=IDLE_S) as harness,
    ):
        harness.wait_for_workers(60)
        shutil.copytree(EXAMPLES / "franka-reach", folder / MODEL)
        deployed = seq(harness, "deploy", str(folder / MODEL))
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        warm = folder / WARM
        shutil.copytree(EXAMPLES / "franka-reach", warm)
        code = (warm / "policy.py").read_text()
        (warm / "policy.py").write_text(
            code.replace('name="franka-reach", gpu="cpu"', f'name="{WARM}", gpu="cpu", min_workers=1')
        )
        deployed = seq(harness, "deploy", str(warm))
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        yield harness


def said(result: Any) -> str:
    return " ".join((result.stdout + result.stderr).replace("│", " ").split())


def workers_of(platform: Harness, name: str) -> list[ActWorker]:
    with platform.platform.db.reading() as session:
        return list(
            session.execute(
                select(ActWorker)
                .join(Hosted, Hosted.id == ActWorker.hosted_id)
                .where(Hosted.name == name, ActWorker.ended_at.is_(None))
            ).scalars()
        )


def outlived_idling(workers: list[ActWorker]) -> Any:
    """A condition: each of `workers` beat again after it had been idle past the platform's idle time and
    a look of its host after that, and is still serving — it was looked at idle and kept."""
    since = max(w.beat_at or w.created_at for w in workers)
    due = since + dt.timedelta(seconds=IDLE_S + 2 * BEAT_S)

    def kept(platform: Harness) -> bool:
        with platform.platform.db.reading() as session:
            now = [session.get(ActWorker, w.id) for w in workers]
        return all(w is not None and w.ended_at is None and w.beat_at is not None and _aware(w.beat_at) > due
                   for w in now)  # fmt: skip

    return kept


def _aware(at: dt.datetime) -> dt.datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


def test_a_deployments_min_workers_serve_with_no_robot_and_do_not_idle_out(platform: Harness) -> None:
    # Deployed with @seq.policy(min_workers=1): a worker serves it before any robot asks.
    serving = wait_until(lambda: [w for w in workers_of(platform, WARM) if w.url])
    kept = outlived_idling(serving)
    wait_until(lambda: kept(platform), timeout=60)
    settings = seq(platform, "policy", "settings", WARM)
    assert settings.returncode == 0 and "min_workers" in said(settings), said(settings)

    # Set to two: a second joins; set to none: both idle out, as any worker with no robot does.
    changed = seq(platform, "policy", "set", WARM, "min_workers=2")
    assert changed.returncode == 0, said(changed)
    two = wait_until(
        lambda: len([w for w in workers_of(platform, WARM) if w.url]) == 2 and workers_of(platform, WARM)
    )
    kept = outlived_idling(two)
    wait_until(lambda: kept(platform), timeout=60)
    released = seq(platform, "policy", "set", WARM, "min_workers=0")
    assert released.returncode == 0, said(released)
    wait_until(lambda: not workers_of(platform, WARM), timeout=60)


def test_robots_are_spread_over_the_workers_that_serve(platform: Harness) -> None:
    changed = seq(platform, "policy", "set", MODEL, "min_workers=2")
    assert changed.returncode == 0, said(changed)
    wait_until(lambda: len([w for w in workers_of(platform, MODEL) if w.url]) == 2)
    robots = [Robot(platform), Robot(platform)]
    try:
        for robot in robots:
            assert robot.ask(observe={"joints": [0.0] * 7, "goal": [0.1] * 7})["ok"]
            assert robot.ask(act=True)["ok"]
        with platform.platform.db.reading() as session:
            seated = session.execute(
                select(ActSeat.worker_id)
                .join(Hosted, Hosted.id == ActSeat.hosted_id)
                .where(Hosted.name == MODEL)
            ).scalars()
            assert len(set(seated)) == 2  # one robot on each: the least busy worker takes the next
    finally:
        for robot in robots:
            robot.close()
        assert seq(platform, "policy", "set", MODEL, "min_workers=0").returncode == 0


def test_scaling_settings_are_checked_where_they_are_written(platform: Harness) -> None:
    too_many = seq(platform, "policy", "set", MODEL, "min_workers=3", "max_gpus=2")
    assert too_many.returncode != 0 and "min_workers 3 is more than max_gpus 2" in said(too_many), said(
        too_many
    )
    not_whole = seq(platform, "policy", "set", MODEL, "buffer_workers=-1")
    assert not_whole.returncode != 0 and "buffer_workers" in said(not_whole), said(not_whole)
    unchanged = seq(platform, "policy", "settings", MODEL)
    assert unchanged.returncode == 0 and "min_workers 3" not in said(unchanged)


def test_a_redeployed_policys_warm_workers_serve_its_new_version(platform: Harness, tmp_path: Path) -> None:
    name = "redeployed-reach"
    code = (EXAMPLES / "franka-reach" / "policy.py").read_text()
    code = code.replace('name="franka-reach", gpu="cpu"', f'name="{name}", gpu="cpu", min_workers=1')
    folder = tmp_path / name
    shutil.copytree(EXAMPLES / "franka-reach", folder)
    (folder / "policy.py").write_text(code)
    assert seq(platform, "deploy", str(folder)).returncode == 0
    [first] = wait_until(lambda: [w for w in workers_of(platform, name) if w.url])
    (folder / "policy.py").write_text(code + "\n# v2\n")
    redeployed = seq(platform, "deploy", str(folder))
    assert redeployed.returncode == 0, said(redeployed)
    earlier = first.version_id
    # The worker warm on v1 ends; the one kept warm now serves the version just deployed.
    serving = wait_until(
        lambda: [w for w in workers_of(platform, name) if w.url and w.id != first.id], timeout=90
    )
    assert all(w.version_id != earlier for w in serving)
    assert all(w.id != first.id for w in workers_of(platform, name))
    robot = Robot(platform, model=name)
    try:
        assert robot.ask(observe={"joints": [0.0] * 7, "goal": [0.1] * 7})["ok"]
        assert robot.ask(act=True)["ok"]
        with platform.platform.db.reading() as session:
            seated = session.execute(
                select(ActWorker.version_id)
                .join(ActSeat, ActSeat.worker_id == ActWorker.id)
                .join(Hosted, Hosted.id == ActSeat.hosted_id)
                .where(Hosted.name == name)
            ).scalars()
            assert set(seated) and earlier not in set(seated)
    finally:
        robot.close()
        assert seq(platform, "policy", "set", name, "min_workers=0").returncode == 0
