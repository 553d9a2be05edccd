"""Credits end to end: the real `PlatformClient` against a real platform (gateway, workers, database) on
SQLite and PostgreSQL — accounts, purchases an admin settles, quotes, reservations and settlements of
pay-as-you-go runs, refusals — and the quote arithmetic against the contract's own models, which check a
quote's lines against its tariff themselves."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_client.billing import CREDIT_SCALE, CreditBalance, CreditQuote, RequestBilling, Tariff
from platform_client.client import PlatformClient
from platform_client.enums import BillingMode, BillingRole, BillingState, ErrorCode, OnExhausted
from platform_client.errors import PlatformError
from platform_client.eval_plan import EvalPlan
from platform_client.ids import OrgSlug, PackageId, PurchaseId, TransactionKey
from platform_client.requests import BillingPurchaseCreateRequest, CancelRequest
from sqlalchemy import func, select
from typer.testing import CliRunner

from conftest import fresh_database
from deadlines import give_up_at
from platform_harness import TOYS, Harness, running_platform, toy_plan
from yardstick.billing import admin as billing_admin
from yardstick.billing import credits as billing
from yardstick.billing import money
from yardstick.billing.terms import BILLING_FILE_ENV, BillingConfigError, BillingTerms
from yardstick.cli.main import app
from yardstick.core import admin
from yardstick.core.ledger import PricedEpisodes
from yardstick.store.models import CreditAccount, CreditEntry, Org, Reservation, RunEpisode

BILLING_TOML = """
[tariff]
episode_credits = "0.1"
minute_credits = 1
duration_rounding_sec = 1

[[packages]]
id = "small"
credits = 1
amount_minor = 100
currency = "usd"

[[packages]]
id = "large"
credits = 10
amount_minor = 900
currency = "usd"

[[packages]]
id = "yen"
credit_units = 30000000000
amount_minor = 17
currency = "jpy"
"""
TARIFF = Tariff.for_rates(CREDIT_SCALE // 10, CREDIT_SCALE, duration_rounding_sec=1)
CAP_NS = 2_000_000_000  # toys.tally's tasks: a 2 s time limit, so a 2 s cap
ONE_EPISODE_EACH = 2 * TARIFF.charge_units(CAP_NS)  # the quote of toy_plan(episodes=1): two tasks, one each
runner = CliRunner()


# --- the quote arithmetic, against the contract's models ------------------------------------------------


@pytest.mark.parametrize("rounding", [0, 1, 30])
def test_a_quote_passes_the_contracts_own_check_and_caps_the_charge(rounding: int) -> None:
    ours = money.Tariff.for_rates(7, CREDIT_SCALE, duration_rounding_sec=rounding)
    priced = [
        PricedEpisodes(0, "a", 2, 90.0),
        PricedEpisodes(0, "b", 1, 90.0),
        PricedEpisodes(1, "a", 2, 31.0),
    ]
    quote = billing.quote(priced, ours)
    # The contract's CreditQuote re-checks every line against its terms and the total against its lines: the
    # oracle, which our quote must pass as it is shown.
    shown = CreditQuote.model_validate(quote.as_json())
    assert shown.model_dump(mode="json") == quote.as_json()
    tariff = shown.terms
    assert [(line.task_pos, line.endpoint, line.count, line.cap_ns) for line in quote.lines] == [
        (0, "a", 2, 90 * 10**9),
        (0, "b", 1, 90 * 10**9),
        (1, "a", 2, 31 * 10**9),
    ]
    if rounding == 30:  # 31 s rounds up to a minute: 7 units an episode and a credit for the minute
        assert quote.lines[2].max_units == 2 * (7 + 60 * CREDIT_SCALE // 60)
    played = [
        (0, "a", 1_500_000_000),
        (0, "a", 10**12),  # ran past its cap: charged at the cap
        (0, "a", 1),  # a third episode of a line of two: not charged
        (0, "b", 0),
        (1, "a", 31_000_000_001),
        (7, "z", 10**9),  # outside the quote: not charged
    ]
    expected = (
        tariff.charge_units(1_500_000_000)
        + tariff.charge_units(90 * 10**9)
        + tariff.charge_units(0)
        + tariff.charge_units(31 * 10**9)
    )
    assert billing.charge(quote, played) == expected <= quote.total_units
    assert billing.charge(quote, []) == 0
    assert billing.duration_ns(0.3) == 300_000_000 and billing.duration_ns(None) == 0


def _shown(tariff: money.Tariff) -> Tariff:
    """Our tariff as the Positronic door shows it: the contract's model, which checks its version."""
    return Tariff.model_validate(tariff.as_json())


def test_billing_terms_come_from_a_file_in_the_data_dir_or_the_env_and_bad_ones_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(BILLING_FILE_ENV, raising=False)
    assert BillingTerms.locate(tmp_path) == BillingTerms()
    assert _shown(BillingTerms().tariff()) == Tariff.for_rates(
        CREDIT_SCALE // 6, CREDIT_SCALE, duration_rounding_sec=30
    )
    (tmp_path / "billing.toml").write_text(BILLING_TOML)
    terms = BillingTerms.locate(tmp_path)
    assert _shown(terms.tariff()) == TARIFF
    assert [(p.id, p.credit_units, p.currency) for p in terms.packages] == [
        ("small", CREDIT_SCALE, "usd"),
        ("large", 10 * CREDIT_SCALE, "usd"),
        ("yen", CREDIT_SCALE // 2, "jpy"),
    ]
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"tariff": {"episode_units": 5, "minute_units": 0, "duration_rounding_sec": 0}}')
    monkeypatch.setenv(BILLING_FILE_ENV, str(elsewhere))
    assert _shown(BillingTerms.locate(tmp_path).tariff()) == Tariff.for_rates(5, 0, duration_rounding_sec=0)

    for text, named in (
        ('[[packages]]\nid = "x"\ncredits = 1\namount_minor = 1\ncurrency = "USD"', "packages[0]: currency"),
        ('[tariff]\nepisode_credits = "0.1"\nepisode_units = 5', "tariff.episode_units"),
        ("[tariff]\nminute_credit = 1", "tariff.minute_credit: not a setting"),
        ('[tariff]\nepisode_credits = "1e-30"', "not a whole number of units"),
        ("[tariff]\nduration_rounding_sec = -1", "tariff: duration_rounding_sec"),
        ('[[packages]]\nid = "x"\namount_minor = 1\ncurrency = "usd"', "packages[0].credits"),
    ):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(BillingConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
            BillingTerms.from_file(bad)


# --- one platform per database for the rest -------------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def shop(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    folder = tmp_path_factory.mktemp("billing")
    (folder / "platform").mkdir()
    (folder / "platform" / "billing.toml").write_text(BILLING_TOML)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, workers=0) as harness:
        with harness.platform.db.writing() as session:
            admin.create_eval(
                session, "toys.fragile", f"{TOYS}:Fragile", choice=admin.EvalTasks(["ok", "bad"], trials=2)
            )
            admin.create_eval(
                session, "toys.endless", f"{TOYS}:Tally", choice=admin.EvalTasks(["never"], trials=2)
            )
        yield harness


@pytest.fixture
def worker(shop: Harness) -> Harness:
    """The platform with a worker playing (started once, kept for the tests after)."""
    if not any(process.is_alive() for process in shop.workers):
        shop.start_worker()
    return shop


def customer(
    shop: Harness,
    slug: str,
    *,
    mode: str = "pay_as_you_go",
    credits: str | None = None,
    members: tuple[str, ...] = ("a",),
    spenders: tuple[str, ...] = ("a",),
    **org: Any,
) -> dict[str, PlatformClient]:
    """An org of its own for a test, its members' clients by suffix (`{slug}-a` …), credits granted."""
    with shop.platform.db.writing() as session:
        admin.create_org(session, slug, billing_mode=mode, **{"per_day": 100, "concurrent": 100, **org})
    for member in members:
        shop.user(f"{slug}-{member}", slug)
    with shop.platform.db.writing() as session:
        for member in spenders:
            billing_admin.set_billing_role(session, slug, f"{slug}-{member}", "spender")
        if credits is not None:
            billing_admin.grant_credits(session, slug, credits, "for the test")
    return {member: shop.client(f"{slug}-{member}") for member in members}


def refusal(call: Callable[[], Any]) -> PlatformError:
    with pytest.raises(PlatformError) as refused:
        call()
    return refused.value


def ledger(shop: Harness, slug: str) -> tuple[int, int, int, int]:
    """(posted, reserved, the ledger's sum, the held reservations' sum) of an org, from the database."""
    with shop.platform.db.reading() as session:
        org_id = session.execute(select(Org.id).where(Org.slug == slug)).scalar_one()
        account = session.get(CreditAccount, org_id)
        entries = session.execute(
            select(func.coalesce(func.sum(CreditEntry.units), 0)).where(CreditEntry.org_id == org_id)
        ).scalar_one()
        held = session.execute(
            select(func.coalesce(func.sum(Reservation.reserved_units), 0)).where(
                Reservation.org_id == org_id, Reservation.state == "held"
            )
        ).scalar_one()
    assert account is not None
    return account.posted_units, account.reserved_units, int(entries), int(held)


def admin_cli(shop: Harness, *args: str) -> Any:
    return runner.invoke(
        app,
        [
            "admin",
            *args,
            "--data-dir",
            str(shop.settings.data_dir),
            "--database",
            shop.settings.database,
        ],
    )


def buy(org: str, package: str, key: str) -> BillingPurchaseCreateRequest:
    return BillingPurchaseCreateRequest(
        org=OrgSlug(org), package_id=PackageId(package), transaction_key=TransactionKey(key)
    )


def test_the_client_reads_the_account_buys_pages_and_an_admin_settles(shop: Harness) -> None:
    clients = customer(shop, "shop", members=("a", "b"), spenders=("a",))
    spender, member = clients["a"], clients["b"]
    account = spender.billing_account(OrgSlug("shop"))
    assert (account.org, account.mode, account.billing_role) == (
        "shop",
        BillingMode.pay_as_you_go,
        BillingRole.spender,
    )
    assert account.balance == CreditBalance(posted_units=0, reserved_units=0)
    assert account.tariff == TARIFF
    assert [(p.id, p.credit_units, p.amount_minor, p.currency) for p in account.packages] == [
        ("small", CREDIT_SCALE, 100, "usd"),
        ("large", 10 * CREDIT_SCALE, 900, "usd"),
        ("yen", CREDIT_SCALE // 2, 17, "jpy"),
    ]
    assert member.billing_account(OrgSlug("shop")).billing_role is BillingRole.none

    first = spender.create_purchase(buy("shop", "small", "key-1"))
    assert first.package.id == "small" and first.granted_at is None and first.review_reason is None
    assert first.checkout_url is not None and first.checkout_url.startswith(f"{shop.url}/billing/checkout/")
    page = httpx.get(first.checkout_url)
    assert page.status_code == 200 and f"yardstick admin credits settle {first.id}" in page.text
    assert httpx.get(f"{shop.url}/billing/checkout/pur_nothing").status_code == 404
    assert spender.create_purchase(buy("shop", "small", "key-1")) == first  # a lost response, retried
    conflict = refusal(lambda: spender.create_purchase(buy("shop", "large", "key-1")))
    assert conflict.code is ErrorCode.transaction_conflict and conflict.http_status == 409
    assert "transaction_key" in conflict.message
    refused = refusal(lambda: member.create_purchase(buy("shop", "small", "key-b")))
    assert refused.code is ErrorCode.forbidden and "spender" in refused.message

    bought = [first] + [spender.create_purchase(buy("shop", "yen", f"key-{k}")) for k in range(2, 7)]
    for reader in (spender, member):  # any member reads the history
        seen: list[PurchaseId] = []
        after = None
        while True:
            page_of = reader.list_purchases(OrgSlug("shop"), after=after, limit=2)
            assert len(page_of.purchases) <= 2
            seen += [p.id for p in page_of.purchases]
            if page_of.next is None:
                break
            assert page_of.next == page_of.purchases[-1].id
            after = page_of.next
        assert seen == [p.id for p in bought]
    assert [p.id for p in spender.list_purchases(OrgSlug("shop"), limit=1000).purchases] == seen

    outsider = shop.client("gina")
    assert refusal(lambda: outsider.billing_account(OrgSlug("shop"))).code is ErrorCode.forbidden
    assert refusal(lambda: outsider.list_purchases(OrgSlug("shop"))).code is ErrorCode.forbidden
    assert refusal(lambda: outsider.get_purchase(first.id)).code is ErrorCode.not_found

    settled = admin_cli(shop, "credits", "settle", first.id, "--note", "paid by wire")
    assert settled.exit_code == 0, settled.stderr
    granted = member.get_purchase(first.id)
    assert granted.granted_at is not None and granted.checkout_url is None
    assert spender.billing_account(OrgSlug("shop")).balance.posted_units == CREDIT_SCALE
    again = admin_cli(shop, "credits", "settle", first.id)
    assert again.exit_code == 1 and "only an open purchase" in again.stderr
    assert admin_cli(shop, "credits", "grant", "shop", "2.5", "--note", "welcome").exit_code == 0
    assert admin_cli(shop, "credits", "grant", "shop", "0").exit_code == 1
    posted, reserved, entries, held = ledger(shop, "shop")
    assert posted == entries == 7 * CREDIT_SCALE // 2 and reserved == held == 0
    shown = admin_cli(shop, "credits", "show", "shop")
    assert shown.exit_code == 0 and "posted 3.5" in shown.stderr and "open purchase" in shown.stderr

    # A spender who loses the role can no longer pay: the open purchases lose their payable link.
    with shop.platform.db.writing() as session:
        billing_admin.set_billing_role(session, "shop", "shop-a", "none")
    assert spender.get_purchase(bought[1].id).checkout_url is None


def test_bad_input_is_refused_naming_the_field(shop: Harness) -> None:
    client = customer(shop, "picky")["a"]
    headers = {"Authorization": f"Bearer {shop.keys['picky-a']}"}
    unknown = refusal(lambda: client.create_purchase(buy("picky", "no-such-package", "k")))
    assert unknown.code is ErrorCode.bad_request and unknown.http_status == 400
    assert "package_id" in unknown.message and unknown.details["packages"] == ["small", "large", "yen"]
    malformed = refusal(lambda: client.billing_account(OrgSlug("not an org!")))
    assert malformed.code is ErrorCode.bad_request and malformed.message.startswith("org:")
    foreign = refusal(lambda: client.create_purchase(buy("acme", "small", "k")))
    assert foreign.code is ErrorCode.forbidden and foreign.message.startswith("org:")
    cursor = refusal(lambda: client.list_purchases(OrgSlug("picky"), after=PurchaseId("pur_nothing")))
    assert cursor.code is ErrorCode.bad_request and cursor.message.startswith("after:")
    assert refusal(lambda: client.get_purchase(PurchaseId("pur_nothing"))).code is ErrorCode.not_found

    for path, params, field in (
        ("billing.account", {"org": ""}, "org"),
        ("billing.purchases.list", {"org": "picky"}, "limit"),  # required, as the contract says
        ("billing.purchases.list", {"org": "picky", "limit": "0"}, "limit"),
        ("billing.purchases.get", {}, "id"),
    ):
        raw = httpx.get(f"{shop.url}/v1/{path}", params=params, headers=headers)
        assert raw.status_code == 422, (path, params)
        assert raw.json()["error"]["code"] == "bad_request" and field in raw.json()["error"]["message"]
    extra = httpx.post(
        f"{shop.url}/v1/billing.purchases.create",
        json={"org": "picky", "package_id": "small", "transaction_key": "k", "coupon": "free"},
        headers=headers,
    )
    assert extra.status_code == 422 and "coupon" in extra.json()["error"]["message"]


def test_insufficient_credits_are_refused_and_nothing_changes(shop: Harness) -> None:
    client = customer(shop, "broke", credits="0.1")["a"]
    before = ledger(shop, "broke")
    plan = toy_plan("too-dear", org="broke", episodes=1)
    assert client.resolve_plan(plan).credit_quote.total_units == ONE_EPISODE_EACH  # type: ignore[union-attr]
    refused = refusal(lambda: client.create_submission(plan))
    assert refused.code is ErrorCode.insufficient_credits and refused.http_status == 402
    assert refused.message.startswith("credits:")
    assert refused.details == {"required_units": ONE_EPISODE_EACH, "available_units": CREDIT_SCALE // 10}
    assert ledger(shop, "broke") == before
    assert client.list_submissions().submissions == []
    assert client.me().quota_for("submissions.day").used == 0  # type: ignore[union-attr]


def test_concurrent_creates_never_overdraw_nor_reserve_twice_for_one_key(shop: Harness) -> None:
    shop.stop_workers()  # nothing may settle (and free credits) while the creates race
    customer(shop, "race", credits=f"{4 * ONE_EPISODE_EACH - 1}u")
    outcomes: dict[str, list[Any]] = {f"race-{k}": [] for k in range(5)}

    def create(key: str) -> None:
        with shop.client("race-a") as client:
            try:
                outcomes[key].append(client.create_submission(toy_plan(key, org="race", episodes=1)))
            except PlatformError as exc:
                outcomes[key].append(exc)

    threads = [threading.Thread(target=create, args=(key,)) for key in list(outcomes) * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    admitted = set()
    for key, answers in outcomes.items():
        assert len(answers) == 2
        if all(isinstance(a, PlatformError) for a in answers):
            assert {a.code for a in answers} == {ErrorCode.insufficient_credits}, key
        else:  # the second create of a key is the first's replay, never a second hold
            assert answers[0].submission_id == answers[1].submission_id, key
            admitted.add(answers[0].submission_id)
    assert len(admitted) == 3  # three fit; the fourth would overdraw by one unit
    posted, reserved, _, held = ledger(shop, "race")
    assert (posted, reserved, held) == (4 * ONE_EPISODE_EACH - 1, 3 * ONE_EPISODE_EACH, 3 * ONE_EPISODE_EACH)
    with shop.platform.db.reading() as session:
        assert (
            session.execute(
                select(func.count()).select_from(Reservation).where(Reservation.submission_id.in_(admitted))
            ).scalar_one()
            == 3
        )

    # Cancelled before a worker played anything: every hold released, nothing charged.
    client = shop.client("race-a")
    for submission_id in admitted:
        assert client.cancel_submission(CancelRequest(id=submission_id)).status.name == "cancelled"
    assert ledger(shop, "race") == (4 * ONE_EPISODE_EACH - 1, 0, 4 * ONE_EPISODE_EACH - 1, 0)


def test_a_metering_org_admits_past_its_quota_and_counts_it(shop: Harness) -> None:
    metered = customer(shop, "meters", mode="packaged", per_day=1, on_exhausted="meter")["a"]
    blocked = customer(shop, "blocks", mode="packaged", per_day=1)["a"]
    runs = [metered.create_submission(toy_plan(f"m{k}", org="meters", episodes=1)) for k in range(2)]
    day = metered.me().quota_for("submissions.day")
    assert day is not None and (day.limit, day.used, day.on_exhausted) == (1, 2, OnExhausted.meter)
    first = blocked.create_submission(toy_plan("b0", org="blocks", episodes=1))
    over = refusal(lambda: blocked.create_submission(toy_plan("b1", org="blocks", episodes=1)))
    assert over.code is ErrorCode.quota_exceeded and over.quota is not None
    assert over.quota.on_exhausted is OnExhausted.block
    for client, created in ((metered, runs[0]), (metered, runs[1]), (blocked, first)):
        assert created.billing == RequestBilling(mode=BillingMode.packaged, state=BillingState.settled)
        client.cancel_submission(CancelRequest(id=created.submission_id))


def _charged_for(shop: Harness, submission_id: int) -> int:
    """What the tariff says the run's landed episodes cost, from their results (the oracle is the client's
    `Tariff.charge_units`)."""
    with shop.platform.db.reading() as session:
        results = session.execute(
            select(RunEpisode.result).where(
                RunEpisode.submission_id == int(submission_id), RunEpisode.state.in_(("done", "failed"))
            )
        ).scalars()
        return sum(TARIFF.charge_units(round(r["robot_seconds"] * 1e9)) for r in results if r)


def _reservation(shop: Harness, submission_id: int) -> Reservation:
    with shop.platform.db.reading() as session:
        found = session.get(Reservation, int(submission_id))
    assert found is not None
    return found


def test_a_pay_as_you_go_run_is_quoted_reserved_and_settled(worker: Harness) -> None:
    shop = worker
    client = customer(shop, "metered", credits="2")["a"]
    plan = toy_plan("run-1", org="metered", episodes=1)
    dry = client.resolve_plan(plan)
    quote = dry.credit_quote
    assert quote is not None and quote.terms == TARIFF
    assert [(line.task_pos, line.endpoint, line.count, line.cap_ns) for line in quote.lines] == [
        (0, "policy", 1, CAP_NS),
        (1, "policy", 1, CAP_NS),
    ]
    assert quote.total_units == ONE_EPISODE_EACH

    created = client.create_submission(plan)
    assert created.billing == RequestBilling(
        mode=BillingMode.pay_as_you_go, quote=quote, state=BillingState.held
    )
    assert created.resolved == dry
    held = client.billing_account(OrgSlug("metered")).balance
    assert (held.posted_units, held.reserved_units) == (2 * CREDIT_SCALE, ONE_EPISODE_EACH)
    replay = client.create_submission(plan)
    assert replay.submission_id == created.submission_id and replay.billing == created.billing
    assert client.billing_account(OrgSlug("metered")).balance == held  # not reserved twice

    view = shop.wait(client, created.submission_id)
    assert view.status.name == "finished" and view.resolved == dry
    charged = _charged_for(shop, created.submission_id)
    assert 0 < charged < ONE_EPISODE_EACH  # 0.3 s and 1 s, rounded to the second, under a 2 s cap
    reservation = _reservation(shop, created.submission_id)
    assert (reservation.state, reservation.charged_units) == ("settled", charged)
    after = client.billing_account(OrgSlug("metered")).balance
    assert (after.posted_units, after.reserved_units) == (2 * CREDIT_SCALE - charged, 0)
    posted, reserved, entries, holds = ledger(shop, "metered")
    assert posted == entries == 2 * CREDIT_SCALE - charged and reserved == holds == 0

    # A packaged org is quoted nothing and holds nothing.
    alice = shop.client("alice")
    packaged_plan = toy_plan("packaged-run", org="acme", episodes=1)
    assert alice.resolve_plan(packaged_plan).credit_quote is None
    packaged = alice.create_submission(packaged_plan)
    assert packaged.billing == RequestBilling(mode=BillingMode.packaged, state=BillingState.settled)
    assert packaged.resolved is not None and packaged.resolved.credit_quote is None
    shop.wait(alice, packaged.submission_id)


def test_a_platform_fault_releases_the_whole_hold_and_a_policy_fault_charges_what_played(
    worker: Harness,
) -> None:
    shop = worker
    client = customer(shop, "faults", credits="5")
    fragile = EvalPlan.model_validate(
        {
            "request_type": {"type": "private_eval", "org": "faults"},
            "eval": "toys.fragile",
            "endpoints": [{"name": "policy", "kind": "served", "wire": "websocket", "spec": "rows"}],
            "episodes_per_endpoint": 2,
            "transaction_key": "fragile",
        }
    )
    lost = client["a"].create_submission(fragile)
    assert lost.billing is not None and lost.billing.quote is not None
    view = shop.wait(client["a"], lost.submission_id)
    assert view.status.name == "errored" and view.reason_code.is_platform_fault  # the benchmark diverged
    reservation = _reservation(shop, lost.submission_id)
    assert (reservation.state, reservation.charged_units) == ("settled", 0)
    assert ledger(shop, "faults") == (5 * CREDIT_SCALE, 0, 5 * CREDIT_SCALE, 0)

    crash = client["a"].create_submission(toy_plan("crash", org="faults", spec="crash", episodes=1))
    view = shop.wait(client["a"], crash.submission_id)
    assert view.status.name == "errored" and view.reason_code.name == "policy_inference_crash"
    charged = _charged_for(shop, crash.submission_id)
    assert charged > 0  # the episode that crashed played half a second of robot time first
    assert _reservation(shop, crash.submission_id).charged_units == charged
    assert ledger(shop, "faults") == (5 * CREDIT_SCALE - charged, 0, 5 * CREDIT_SCALE - charged, 0)


def test_a_plans_cap_ends_its_episodes_there_and_bounds_the_charge(worker: Harness) -> None:
    shop = worker
    client = customer(shop, "capped", credits="5")["a"]
    plan = EvalPlan.model_validate(
        {
            "request_type": {"type": "private_eval", "org": "capped"},
            "eval": "toys.endless",  # its task never ends by itself: 2 s of robot time, its own limit
            "endpoints": [{"name": "policy", "kind": "served", "wire": "websocket", "spec": "rows"}],
            "cap_per_episode_sec": 1,
            "transaction_key": "capped",
        }
    )
    created = client.create_submission(plan)
    assert created.billing is not None and created.billing.quote is not None
    assert [line.cap_ns for line in created.billing.quote.lines] == [10**9]
    view = shop.wait(client, created.submission_id)
    assert view.status.name == "finished"
    entries = client.list_artifacts(created.submission_id, prefix="attempts/1/episodes/").artifacts
    records = [httpx.get(e.url).json() for e in entries if e.key.endswith("record.json")]
    assert [(r["steps"], r["robot_seconds"], r["truncated_by"]) for r in records] == [(10, 1.0, "cap")] * 2
    charged = _reservation(shop, created.submission_id).charged_units
    assert charged == _charged_for(shop, created.submission_id) == 2 * TARIFF.charge_units(10**9)


def credits_cli(shop: Harness, login: str, *args: str) -> Any:
    env = {
        "YARDSTICK_PLATFORM_URL": shop.url,
        "YARDSTICK_API_KEY": shop.keys[login],
        "POSITRONIC_PLATFORM_URL": None,
        "POSITRONIC_PLATFORM_API_KEY": None,
        "YARDSTICK_CONFIG_DIR": "/nonexistent",
        "COLUMNS": "200",
    }
    return runner.invoke(app, ["credits", *args], env=env)


def test_the_credits_commands_read_buy_and_page_for_the_sole_org(shop: Harness) -> None:
    customer(shop, "cli-co", credits="2.5")
    account = credits_cli(shop, "cli-co-a", "account")
    assert account.exit_code == 0, account.output
    assert "org: cli-co (sole organization)" in account.stderr
    assert "2.5 credits available" in account.stderr and "small" in account.stderr
    as_json = credits_cli(shop, "cli-co-a", "account", "--json")
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)["balance"]["posted_units"] == 150_000_000_000  # exact units

    for n in range(3):
        bought = credits_cli(shop, "cli-co-a", "buy", "--package-id", "small", "--transaction-key", f"t{n}")
        assert bought.exit_code == 0, bought.output
        assert "pay here: http" in bought.stderr
    again = credits_cli(shop, "cli-co-a", "buy", "--package-id", "small", "--transaction-key", "t0", "--json")
    first = json.loads(again.stdout)["id"]
    page = json.loads(credits_cli(shop, "cli-co-a", "purchases", "--limit", "2", "--json").stdout)
    assert len(page["purchases"]) == 2 and page["purchases"][0]["id"] == first
    assert page["next"] is not None
    every = json.loads(credits_cli(shop, "cli-co-a", "purchases", "--limit", "2", "--all", "--json").stdout)
    assert len(every["purchases"]) == 3 and every["next"] is None
    shown = credits_cli(shop, "cli-co-a", "purchase", first)
    assert shown.exit_code == 0 and "open" in shown.stderr

    # An unknown package is the caller's mistake, named, with what is on offer; nothing is bought.
    wrong = credits_cli(shop, "cli-co-a", "buy", "--package-id", "huge", "--transaction-key", "t9")
    assert wrong.exit_code == 1 and "package_id" in wrong.stderr and "small" in wrong.stderr
    assert (
        len(json.loads(credits_cli(shop, "cli-co-a", "purchases", "--all", "--json").stdout)["purchases"])
        == 3
    )
    # Someone in two orgs names one.
    shop.user("cli-two", "cli-co")
    with shop.platform.db.writing() as session:
        admin.add_member(session, "cli-two", "acme")
    both = credits_cli(shop, "cli-two", "account")
    assert both.exit_code == 2 and "--org: required (you belong to" in both.stderr
    assert credits_cli(shop, "cli-two", "account", "--org", "cli-co").exit_code == 0


def test_a_sequences_eval_with_a_spend_cap_plays_what_the_cap_covers_and_stops_there(worker: Harness) -> None:
    """`spend_cap_usd` (credits are the install's dollars): an eval is cut, before it is filed, to the most
    episodes whose held cost stays within the cap — the lowest trials of every task — and says so."""
    shop = worker
    customer(shop, "spendcap", credits="5")
    headers = {"Authorization": f"Bearer {shop.keys['spendcap-a']}"}

    def post(**body: Any) -> httpx.Response:
        asked = {"model": "rows", "benchmark": "toys.tally", "trials": 4, **body}
        return httpx.post(f"{shop.url}/v1/eval", json=asked, headers=headers, timeout=30)

    whole = post(dry_run=True).json()["estimate"]["cost_usd"]
    assert whole > 0
    cap = whole / 2
    started = post(spend_cap_usd=cap)
    assert started.status_code == 200, started.text
    assert 0 < started.json()["estimate"]["cost_usd"] <= cap
    eval_id = started.json()["eval_id"]
    deadline = give_up_at(120)
    while (report := httpx.get(f"{shop.url}/v1/eval/{eval_id}", headers=headers).json())["status"] not in (
        "completed", "failed",
    ):  # fmt: skip
        assert time.monotonic() < deadline, report
        time.sleep(0.3)
    assert report["status"] == "completed" and report["incomplete"] is True
    assert report["stop_reason"] == "spend_cap" and report["cost_usd"] <= cap
    table = httpx.get(f"{shop.url}/v1/eval/{eval_id}/episodes.csv", headers=headers).text.splitlines()
    head = table[0].split(",")
    kept = [dict(zip(head, line.split(","), strict=True)) for line in table[1:]]
    # Half the held cost: the lowest two trials of each task (their caps are equal), the arm's order kept.
    assert sorted((row["task"], row["seed"]) for row in kept) == [
        ("ten", "0"), ("ten", "1"), ("three", "0"), ("three", "1"),
    ]  # fmt: skip
    # The listings say what it cost, settled, as its report does.
    listed = httpx.get(f"{shop.url}/v1/benchmarks/toys.tally/evals", headers=headers, timeout=30).json()
    (row,) = [row for row in listed["evals"] if row["eval_id"] == eval_id]
    assert row["cost_usd"] == report["cost_usd"] > 0 and row["cost_settled"] is True, row

    with shop.platform.db.reading() as session:
        before = session.execute(select(func.count()).select_from(Reservation)).scalar_one()
    refused = post(spend_cap_usd=0.000001)
    assert refused.status_code == 400 and "spend_cap_usd" in refused.json()["detail"], refused.text
    with shop.platform.db.reading() as session:
        assert session.execute(select(func.count()).select_from(Reservation)).scalar_one() == before
