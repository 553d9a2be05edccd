"""The core as itself, no door or HTTP between: an endpoint target read back from what a run's row keeps is
the target that was filed, a hosted version's benchmark reference names it alone; and runs filed, admitted,
held to their credits and ended in process, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import func, select

from yardstick.billing import credits, money
from yardstick.billing.credits import CreditLedger
from yardstick.core import admin
from yardstick.core.accounts import Caller, caller_for_user
from yardstick.core.install import open_install
from yardstick.core.platform import Platform
from yardstick.core.refusals import Refusal, RefusalKind
from yardstick.core.runs import (
    BenchmarkTarget,
    EndpointTarget,
    Filing,
    PlannedEpisode,
    RunPlan,
    hosted_ref,
    hosted_version,
)
from yardstick.core.settings import Settings
from yardstick.engine.failures import FailureKind
from yardstick.store.models import CreditAccount, Org, Run, RunEpisode
from yardstick.store.states import BillingMode, Contract, LedgerKind, RunStatus, TargetKind
from yardstick.wire.address import HostPort


@pytest.mark.parametrize(
    "target",
    [
        EndpointTarget("a", TargetKind.SERVED, "websocket", spec="expert", params={"gain": 2.0}),
        EndpointTarget("b", TargetKind.HOSTED, "websocket", spec="7", benchmark_params={"noise": 0.1}),
        EndpointTarget("c", TargetKind.REMOTE, "grpc", address=HostPort("gpu.lab", 443)),
    ],
)
def test_an_endpoint_target_round_trips_through_a_runs_row(target: EndpointTarget) -> None:
    kept = json.loads(json.dumps(target.as_json()))  # as the JSON column keeps it
    assert EndpointTarget.from_json(target.name, kept) == target


def test_a_hosted_reference_names_its_version_and_nothing_else_does() -> None:
    assert hosted_version(hosted_ref(42)) == 42
    for other in ("mt10", "hosted:", "hosted:x", "gym:CartPole-v1", "/path/bench.py:Bench"):
        assert hosted_version(other) is None


# --- runs, admission, the ledger and the lifecycle, in process on both databases -------------------------

TARIFF = money.Tariff.for_rates(money.CREDIT_SCALE // 10, money.CREDIT_SCALE, duration_rounding_sec=1)
CAP_S = 2.0


@dataclass
class Core:
    platform: Platform
    caller: Caller
    org: Org

    def file(self, key: str | None = None, digest: str = "d1", episodes: int = 2) -> tuple[Run, bool]:
        return self.platform.runs.file(self.caller, self.org, _filing(self, key, digest, episodes))

    def account(self) -> tuple[int, int]:
        with self.platform.db.reading() as session:
            found = session.get(CreditAccount, self.org.id)
            return (found.posted_units, found.reserved_units) if found else (0, 0)

    def counts(self) -> tuple[int, int]:
        """(runs, episodes) on file."""
        with self.platform.db.reading() as session:
            runs = session.execute(select(func.count()).select_from(Run)).scalar_one()
            episodes = session.execute(select(func.count()).select_from(RunEpisode)).scalar_one()
            return runs, episodes

    def play_all(self, run_id: int, robot_seconds: float) -> None:
        """Every queued episode of the run leased and landed, as a worker lands them."""
        while leased := self.platform.queue.lease("test-worker", 10):
            for episode in leased:
                assert episode.submission_id == run_id
                result = {"success": True, "robot_seconds": robot_seconds, "steps": 5}
                assert self.platform.queue.complete("test-worker", episode.id, result).accepted


def _filing(core: Core, key: str | None, digest: str, episodes: int) -> Filing:
    planned = tuple(PlannedEpisode(i, 0, "three", "three", "policy", i, i, CAP_S) for i in range(episodes))
    plan = RunPlan(
        episodes=planned,
        endpoints={"policy": EndpointTarget("policy", TargetKind.SERVED, "websocket", spec="rows")},
        benchmark=BenchmarkTarget("toys:Tally"),
        eval=None,
        sampled=False,
    )
    quote = core.platform.ledger.quote(core.platform.runs.billing_mode(core.org), plan.priced())
    return Filing(
        plan=plan,
        contract=Contract.SEQUENCES,
        digest=digest,
        request={"asked": digest},
        answer={},
        transaction_key=key,
        quote=quote,
    )


@contextmanager
def _core(url: str, tmp: Path, *, billing_mode: str, per_day: int = 20) -> Iterator[Core]:
    install = open_install(Settings(data_dir=tmp / "data", database_url=url))
    platform = Platform(install, ledger=CreditLedger(TARIFF))
    try:
        with platform.db.writing() as session:
            admin.create_org(session, "lab", per_day=per_day, concurrent=100, billing_mode=billing_mode)
            caller = caller_for_user(session, admin.create_user(session, "ada", orgs=["lab"]))
        yield Core(platform, caller, caller.orgs[0])
    finally:
        platform.close()


@pytest.fixture
def packaged(database_url: str, tmp_path: Path) -> Iterator[Core]:
    with _core(database_url, tmp_path, billing_mode=BillingMode.PACKAGED, per_day=2) as core:
        yield core


@pytest.fixture
def paying(database_url: str, tmp_path: Path) -> Iterator[Core]:
    with _core(database_url, tmp_path, billing_mode=BillingMode.PAY_AS_YOU_GO) as core:
        yield core


def test_a_filed_run_queues_its_episodes_and_its_key_answers_the_same_run_once(packaged: Core) -> None:
    run, filed = packaged.file(key="k1")
    assert filed and run.status == RunStatus.PENDING and run.episodes_total == 2
    assert [e.index for e in packaged.platform.runs.episodes(run.id)] == [0, 1]
    again, filed_again = packaged.file(key="k1")
    assert (again.id, filed_again) == (run.id, False)
    with pytest.raises(Refusal) as other:
        packaged.file(key="k1", digest="another request")
    assert other.value.kind is RefusalKind.CONFLICT
    assert packaged.counts() == (1, 2)


def test_admission_refuses_a_run_past_the_orgs_day_and_files_nothing_of_it(packaged: Core) -> None:
    packaged.file()
    packaged.file()
    with pytest.raises(Refusal) as refused:
        packaged.file()
    assert refused.value.kind is RefusalKind.QUOTA_EXCEEDED
    assert packaged.counts() == (2, 4)


def test_a_run_that_fails_by_the_platforms_fault_gives_its_quota_back(packaged: Core) -> None:
    first, _ = packaged.file()
    packaged.file()
    assert packaged.platform.lifecycle.fail(first.id, FailureKind.WORKER_LOST, "the worker was lost")
    assert not packaged.platform.lifecycle.fail(first.id, FailureKind.WORKER_LOST, "again"), "ended once"
    third, filed = packaged.file()  # the day's two runs, less the one given back
    assert filed and third.id != first.id


def test_a_pay_as_you_go_run_holds_its_quote_and_is_refused_when_the_org_cannot_cover_it(
    paying: Core,
) -> None:
    with pytest.raises(Refusal) as refused:
        paying.file()
    assert refused.value.kind is RefusalKind.INSUFFICIENT_CREDITS
    assert paying.counts() == (0, 0) and paying.account() == (0, 0)

    with paying.platform.db.writing() as session:
        credits.post(session, paying.org.id, money.CREDIT_SCALE, kind=LedgerKind.GRANT)
    run, _ = paying.file()
    most = 2 * TARIFF.charge_units(round(CAP_S * money.NANOSECONDS_PER_SECOND))
    assert paying.account() == (money.CREDIT_SCALE, most)

    paying.play_all(run.id, robot_seconds=0.5)
    assert paying.platform.lifecycle.finish(run.id)
    assert not paying.platform.lifecycle.finish(run.id), "finished and settled once"
    charged = 2 * TARIFF.charge_units(money.NANOSECONDS_PER_SECOND // 2)
    assert paying.account() == (money.CREDIT_SCALE - charged, 0)
    assert paying.platform.runs.get(paying.caller, run.id).status == RunStatus.FINISHED


def test_a_paying_run_failed_by_the_platform_is_charged_nothing_and_its_hold_released(paying: Core) -> None:
    with paying.platform.db.writing() as session:
        credits.post(session, paying.org.id, money.CREDIT_SCALE, kind=LedgerKind.GRANT)
    run, _ = paying.file()
    assert paying.account()[1] > 0
    assert paying.platform.lifecycle.fail(run.id, FailureKind.WORKER_LOST, "the worker was lost")
    assert paying.account() == (money.CREDIT_SCALE, 0)
    assert paying.platform.runs.get(paying.caller, run.id).status == RunStatus.ERRORED
