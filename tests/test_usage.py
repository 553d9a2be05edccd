"""Usage statements end to end: real runs played by a real worker on a real platform (SQLite and
PostgreSQL), the statement read back from the database and checked against the episodes' own results and
the contract's `Tariff.charge_units`; and `yardstick admin credits usage` through the CLI."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from platform_client.billing import CREDIT_SCALE, Tariff
from platform_client.client import PlatformClient
from platform_client.eval_plan import EvalPlan
from sqlalchemy import select
from typer.testing import CliRunner

from conftest import fresh_database
from platform_harness import TOYS, Harness, running_platform, toy_plan
from yardstick.billing import admin as billing_admin
from yardstick.billing import credits as billing
from yardstick.billing import money
from yardstick.billing.usage import Usage, UsageWindowError, month_window, usage, usage_window
from yardstick.cli.main import app
from yardstick.core import admin
from yardstick.store.models import Org, Reservation, RunEpisode, utcnow

BILLING_TOML = """
[tariff]
episode_credits = "0.1"
minute_credits = 1
duration_rounding_sec = 1
"""
TARIFF = money.Tariff.for_rates(CREDIT_SCALE // 10, CREDIT_SCALE, duration_rounding_sec=1)
# The contract's own tariff of the same rates: the oracle a statement's sums are checked against.
CONTRACT_TARIFF = Tariff.model_validate(TARIFF.as_json())
CAP_NS = 2_000_000_000  # toys.tally's and toys.fragile's tasks: a 2 s time limit, so a 2 s cap
runner = CliRunner()


# --- the window an operator names ---------------------------------------------------------------------


def test_a_window_is_a_utc_month_or_a_since_until_range_and_a_bad_one_names_its_option() -> None:
    utc = dt.UTC
    now = dt.datetime(2026, 12, 9, 15, 30, tzinfo=utc)
    assert month_window("2026-11") == (
        dt.datetime(2026, 11, 1, tzinfo=utc),
        dt.datetime(2026, 12, 1, tzinfo=utc),
    )
    assert month_window("2026-12") == (
        dt.datetime(2026, 12, 1, tzinfo=utc),
        dt.datetime(2027, 1, 1, tzinfo=utc),
    )
    assert usage_window(None, None, None, now) == month_window("2026-12")  # the current month
    assert usage_window(None, "2026-11-03", "2026-11-04T12:00", now) == (
        dt.datetime(2026, 11, 3, tzinfo=utc),
        dt.datetime(2026, 11, 4, 12, tzinfo=utc),
    )
    assert usage_window(None, "2026-12-01T01:00+01:00", None, now) == (
        dt.datetime(2026, 12, 1, tzinfo=utc),
        now,
    )
    for args, option in (
        (("2026-13", None, None), "--month"),
        (("nov", None, None), "--month"),
        (("2026-11", "2026-11-01", None), "--month"),
        ((None, "yesterday", None), "--since"),
        ((None, "2026-11-01", "2026-11-31"), "--until"),
        ((None, None, "2026-11-30"), "--since"),
        ((None, "2026-11-02", "2026-11-01"), "--until"),
        ((None, "2026-11-02", "2026-11-02"), "--until"),
    ):
        with pytest.raises(UsageWindowError) as refused:
            usage_window(*args, now)
        assert refused.value.option == option and str(refused.value).startswith(option), args


# --- one platform per database, its runs played once ----------------------------------------------------


@dataclass
class Books:
    """The platform and what was played on it: runs of the packaged org `invoiced` (two before `between`
    and after it a second, a platform fault and a policy crash), one of `acme` (another org), and one of
    the pay-as-you-go org `prepaid`."""

    shop: Harness
    start: dt.datetime
    between: dt.datetime
    end: dt.datetime
    first: int
    second: int
    fault: int
    crash: int
    other: int
    prepaid: int

    def org_id(self, slug: str) -> int:
        with self.shop.platform.db.reading() as session:
            return int(session.execute(select(Org.id).where(Org.slug == slug)).scalar_one())

    def statement(self, slug: str, since: dt.datetime, until: dt.datetime) -> Usage:
        with self.shop.platform.db.reading() as session:
            return usage(session, self.org_id(slug), since, until, TARIFF)


def _member(shop: Harness, slug: str, mode: str, credits: str | None = None) -> PlatformClient:
    with shop.platform.db.writing() as session:
        admin.create_org(session, slug, billing_mode=mode, per_day=100, concurrent=100)
    shop.user(f"{slug}-a", slug)
    if credits is not None:
        with shop.platform.db.writing() as session:
            billing_admin.grant_credits(session, slug, credits, "for the test")
    return shop.client(f"{slug}-a")


def _played(shop: Harness, client: PlatformClient, plan: EvalPlan, status: str) -> int:
    created = client.create_submission(plan)
    view = shop.wait(client, created.submission_id)
    assert view.status.name == status, (plan.transaction_key, view.status, view.reason)
    return int(created.submission_id)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def books(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Books]:
    folder = tmp_path_factory.mktemp("usage")
    (folder / "platform").mkdir()
    (folder / "platform" / "billing.toml").write_text(BILLING_TOML)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, workers=1) as shop:
        with shop.platform.db.writing() as session:
            admin.create_eval(
                session, "toys.fragile", f"{TOYS}:Fragile", choice=admin.EvalTasks(["ok", "bad"], trials=2)
            )
        client = _member(shop, "invoiced", "packaged")
        start = utcnow()
        first = _played(shop, client, toy_plan("first", org="invoiced", episodes=1), "finished")
        time.sleep(0.01)
        between = utcnow()
        time.sleep(0.01)
        second = _played(shop, client, toy_plan("second", org="invoiced", episodes=2), "finished")
        fragile = EvalPlan.model_validate(
            {
                "request_type": {"type": "private_eval", "org": "invoiced"},
                "eval": "toys.fragile",
                "endpoints": [{"name": "policy", "kind": "served", "wire": "websocket", "spec": "rows"}],
                "episodes_per_endpoint": 2,
                "transaction_key": "fragile",
            }
        )
        fault = _played(shop, client, fragile, "errored")
        crash = _played(shop, client, toy_plan("crash", org="invoiced", spec="crash", episodes=1), "errored")
        other = _played(shop, shop.client("alice"), toy_plan("acme's", org="acme", episodes=1), "finished")
        prepaid_client = _member(shop, "prepaid", "pay_as_you_go", credits="5")
        prepaid = _played(shop, prepaid_client, toy_plan("prepaid", org="prepaid", episodes=1), "finished")
        end = utcnow()
        yield Books(shop, start, between, end, first, second, fault, crash, other, prepaid)


def _from_results(books: Books, submission_id: int) -> tuple[int, int, int]:
    """(episodes, robot ns, units) of a run's landed episodes straight from their stored results, priced
    by the contract's own `Tariff.charge_units`, each episode capped at its task's 2 s."""
    with books.shop.platform.db.reading() as session:
        results = list(
            session.execute(
                select(RunEpisode.result).where(
                    RunEpisode.submission_id == submission_id, RunEpisode.state.in_(("done", "failed"))
                )
            ).scalars()
        )
    durations = [round(r["robot_seconds"] * 1e9) if r else 0 for r in results]
    return (
        len(durations),
        sum(durations),
        sum(CONTRACT_TARIFF.charge_units(min(ns, CAP_NS)) for ns in durations),
    )


def test_a_packaged_orgs_statement_prices_what_its_runs_played(books: Books) -> None:
    statement = books.statement("invoiced", books.start, books.end)
    assert (statement.org, statement.billing_mode, statement.tariff) == ("invoiced", "packaged", TARIFF)
    assert [line.submission for line in statement.lines] == [
        f"{books.first:x}",
        f"{books.second:x}",
        f"{books.fault:x}",
        f"{books.crash:x}",
    ]  # the order they ended; acme's run and prepaid's are another org's
    first, second, fault, crash = statement.lines
    assert [line.eval for line in statement.lines] == [
        "toys.tally",
        "toys.tally",
        "toys.fragile",
        "toys.tally",
    ]
    assert [(line.status, line.failure) for line in statement.lines] == [
        ("finished", None),
        ("finished", None),
        ("errored", "benchmark_crash"),
        ("errored", "policy_crash"),
    ]
    assert all(books.start <= line.ended_at < books.end for line in statement.lines)
    for line, submission_id, played in (
        (first, books.first, 2),
        (second, books.second, 4),
        (crash, books.crash, 2),
    ):
        assert (line.episodes, line.robot_ns, line.units) == _from_results(books, submission_id)
        assert line.episodes == played and line.units > 0 and not line.platform_fault
        assert line.charged_units is None  # a packaged run held nothing
    # toys.tally's "three" and "ten" at 10 Hz: 0.3 s and 1 s, each rounded up to the second.
    assert first.robot_ns == 1_300_000_000 and first.robot_seconds == 1.3
    assert first.units == 2 * CONTRACT_TARIFF.episode_units + 2 * CREDIT_SCALE // 60
    # The crash played half a second of "ten" before the policy raised: a caller's fault, billed.
    assert crash.robot_ns == 300_000_000 + 500_000_000
    # A platform fault counts nothing, whatever landed before the benchmark diverged.
    assert fault.platform_fault and (fault.episodes, fault.robot_ns, fault.units) == (0, 0, 0)
    assert _from_results(books, books.fault)[0] == 3  # "ok" twice, then "bad" failed: all landed
    assert statement.episodes == 2 + 4 + 2
    assert statement.robot_ns == first.robot_ns + second.robot_ns + crash.robot_ns
    assert statement.units == first.units + second.units + crash.units
    assert statement.charged_units is None


def test_only_runs_that_ended_in_the_window_are_counted(books: Books) -> None:
    before = books.statement("invoiced", books.start, books.between)
    after = books.statement("invoiced", books.between, books.end)
    assert [line.submission for line in before.lines] == [f"{books.first:x}"]
    assert [line.submission for line in after.lines] == [
        f"{books.second:x}",
        f"{books.fault:x}",
        f"{books.crash:x}",
    ]
    whole = books.statement("invoiced", books.start, books.end)
    assert before.units + after.units == whole.units and before.episodes + after.episodes == whole.episodes
    # [since, until): a run ending exactly at `until` belongs to the next window.
    ended = before.lines[0].ended_at
    assert books.statement("invoiced", books.start, ended).lines == ()
    assert [line.submission for line in books.statement("invoiced", ended, books.between).lines] == [
        f"{books.first:x}"
    ]
    earlier = books.statement("invoiced", books.start - dt.timedelta(days=40), books.start)
    assert (earlier.lines, earlier.units, earlier.episodes) == ((), 0, 0)
    with pytest.raises(ValueError, match="until"):
        books.statement("invoiced", books.end, books.start)
    with pytest.raises(ValueError, match="aware"):
        books.statement("invoiced", books.start.replace(tzinfo=None), books.end)


def test_a_pay_as_you_go_run_shows_what_its_settlement_charged(books: Books) -> None:
    statement = books.statement("prepaid", books.start, books.end)
    assert statement.billing_mode == "pay_as_you_go"
    (line,) = statement.lines
    with books.shop.platform.db.reading() as session:
        reservation = session.get(Reservation, books.prepaid)
    assert reservation is not None and reservation.state == "settled"
    # Settled under the same tariff: the price and the charge agree, and both are the results' own price.
    assert line.charged_units == reservation.charged_units == line.units > 0
    assert (line.episodes, line.robot_ns, line.units) == _from_results(books, books.prepaid)
    assert statement.charged_units == line.charged_units


def _cli(books: Books, *args: str, columns: int = 200) -> Any:
    settings = books.shop.settings
    return runner.invoke(
        app,
        [
            "admin",
            "credits",
            "usage",
            *args,
            "--data-dir",
            str(settings.data_dir),
            "--database",
            settings.database,
        ],
        env={"COLUMNS": str(columns)},
    )


def test_the_cli_prints_the_statement_and_its_totals(books: Books) -> None:
    since, until = books.start.isoformat(), books.end.isoformat()
    expected = books.statement("invoiced", books.start, books.end)

    as_json = _cli(books, "invoiced", "--since", since, "--until", until, "--json")
    assert as_json.exit_code == 0, as_json.stderr
    answer = json.loads(as_json.stdout)
    assert answer == json.loads(json.dumps(expected.as_json()))
    assert [run["submission_id"] for run in answer["runs"]] == [line.submission for line in expected.lines]
    assert answer["total"]["runs"] == 4 and answer["total"]["episodes"] == 8
    assert answer["total"]["price"] == {"units": expected.units, "credits": billing.credits(expected.units)}
    assert answer["total"]["charged"] is None

    shown = _cli(books, "invoiced", "--since", since, "--until", until)
    assert shown.exit_code == 0, shown.stderr
    assert all(line.submission in shown.stderr for line in expected.lines)
    assert "platform fault, not billed" in shown.stderr
    assert (
        f"total: 4 runs, 8 episodes, {expected.robot_seconds:,.1f} s of robot time,"
        f" {billing.credits(expected.units)} credits ({expected.units} units)"
    ) in shown.stderr

    # The default window is the current UTC month (which holds this module's runs unless it just turned).
    this_month = month_window(f"{utcnow():%Y-%m}")
    month = _cli(books, "invoiced", "--json")
    assert month.exit_code == 0, month.stderr
    by_month = json.loads(month.stdout)
    assert (by_month["since"], by_month["until"]) == tuple(end.isoformat() for end in this_month)
    assert by_month["total"]["price"]["units"] == books.statement("invoiced", *this_month).units
    if this_month[0] <= books.start:
        assert by_month["total"]["runs"] == 4

    prepaid = _cli(books, "prepaid", "--since", since, "--until", until)
    assert prepaid.exit_code == 0, prepaid.stderr
    charged = books.statement("prepaid", books.start, books.end).charged_units
    assert charged is not None and "total: 1 run, 2 episodes," in prepaid.stderr
    assert f"; charged {billing.credits(charged)} credits" in prepaid.stderr
    long_ago = _cli(books, "invoiced", "--month", "2001-02")
    assert long_ago.exit_code == 0 and "total: 0 runs, 0 episodes" in long_ago.stderr


def test_a_narrow_terminal_shows_each_run_whole(books: Books) -> None:
    since, until = books.start.isoformat(), books.end.isoformat()
    expected = books.statement("invoiced", books.start, books.end)
    for columns in (200, 80, 60):
        shown = _cli(books, "invoiced", "--since", since, "--until", until, columns=columns)
        assert shown.exit_code == 0, shown.stderr
        for line in expected.lines:
            assert line.submission in shown.stderr, (columns, shown.stderr)
            assert f"episodes {line.episodes}" in shown.stderr or columns == 200
        assert "…" not in shown.stderr, (columns, shown.stderr)
        assert "platform fault, not billed" in shown.stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--month", "2026-13"), "--month"),
        (("--month", "November"), "--month"),
        (("--month", "2026-11", "--since", "2026-11-01"), "--month"),
        (("--since", "last tuesday"), "--since"),
        (("--until", "2026-11-30"), "--since"),
        (("--since", "2026-11-02", "--until", "2026-11-01"), "--until"),
    ],
)
def test_the_cli_refuses_a_bad_window_naming_the_option(
    books: Books, args: tuple[str, ...], option: str
) -> None:
    refused = _cli(books, "invoiced", *args)
    assert refused.exit_code == 2, refused.stderr
    assert option in refused.stderr


def test_the_cli_refuses_an_unknown_org(books: Books) -> None:
    refused = _cli(books, "nobody", "--month", "2026-11")
    assert refused.exit_code == 1 and "no org 'nobody'" in refused.stderr
