"""`GET /v1/pricing`, `GET /v1/account` and `GET /v1/audit`: the install's tariff and an org's credits, said
in the dollars and the fields a Sequences user reads (`seq gpus`, `seq account`, the price `seq deploy
--dry-run` prints), and its audit trail (`seq audit`).

Yardstick charges credits by an episode's robot time (`billing.money.Tariff`), played on CPU workers; the
Sequences contract prices machine time, a card's hour plus a core's and a GiB's. Said honestly: no cards
(`gpus` empty), a core-hour the price of an hour of robot time (a worker plays one episode on one core at a
time), memory and storage free (the tariff charges neither), and a credit's dollars the list price of the
cheapest package on sale (the smallest buys the fewest credits per dollar: the price nobody pays more than).
The tariff itself rides along under `yardstick` for a reader who wants the exact terms.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from fastapi.responses import JSONResponse

from yardstick.billing.money import CREDIT_SCALE, Tariff
from yardstick.billing.purchases import Purchases
from yardstick.core.audit import MAX_PAGE
from yardstick.core.runs import org_for
from yardstick.http.auth import Who
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import HostingService, Plat, Purch
from yardstick.sequences import paths
from yardstick.sequences.errors import SEQUENCES
from yardstick.store.states import HostedKind

router = door_router(SEQUENCES, tags=["sequences: account"])
MINUTES_AN_HOUR = 60


def usd_per_credit(purchases: Purchases) -> float | None:
    """A credit's price in dollars: the dearest per credit of the packages sold in dollars (None: none is)."""
    rates = [
        package.amount_minor / 100 / (package.credit_units / CREDIT_SCALE)
        for package in purchases.packages
        if package.currency == "usd" and package.credit_units
    ]
    return max(rates) if rates else None


def core_hour_usd(tariff: Tariff, per_credit: float | None) -> float | None:
    """An hour of robot time at the tariff's minute rate (an episode's fixed part left out), in dollars."""
    if per_credit is None:
        return None
    return round(tariff.minute_units * MINUTES_AN_HOUR / CREDIT_SCALE * per_credit, 6)


@router.get(paths.PRICING)
def pricing(purchases: Purch) -> JSONResponse:
    """The install's price list (public, as the contract's is): CPU workers only."""
    tariff, per_credit = purchases.tariff, usd_per_credit(purchases)
    return JSONResponse(
        {
            "gpus": [],
            "cpu": {"usd_per_core_hour": core_hour_usd(tariff, per_credit)},
            "memory": {"usd_per_gib_hour": 0.0},
            "storage": {"usd_per_gb_month": 0.0, "shared_weights_templates": []},
            # No minimum: an episode's time is rounded up to the tariff's step, which `yardstick` states.
            "min_billable_s": 0,
            "yardstick": {
                "tariff": tariff.as_json(),
                "credit_scale": CREDIT_SCALE,
                "usd_per_credit": per_credit,
                "note": "credits are charged per episode and minute of robot time on CPU workers",
            },
        }
    )


@router.get(paths.AUDIT)
def audit(
    plat: Plat,
    who: Who,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    before: Annotated[int | None, Query(ge=1)] = None,
) -> JSONResponse:
    """The caller's orgs' audit trail, newest first (`seq audit`): `before` the id to page on from."""
    events, next_before = plat.audit.page(who.org_ids, user_id=who.user_id, limit=limit, before=before)
    return JSONResponse({"events": events, "next_before": next_before})


@router.get(paths.ACCOUNT, responses=refusals(403))
def account(purchases: Purch, hosting: HostingService, who: Who) -> JSONResponse:
    """The caller's org: its credits as dollars, its deployments and benchmarks, and no GPUs."""
    org = org_for(who, None)
    held = purchases.account(who, org.slug)
    per_credit = usd_per_credit(purchases) or 0.0
    available = (held.posted_units - held.reserved_units) / CREDIT_SCALE
    body: dict[str, Any] = {
        "scope": "account",
        "organization": org.slug,
        "balance": {
            "balance": round(available * per_credit, 2),
            "held_usd": round(held.reserved_units / CREDIT_SCALE * per_credit, 2),
            "credits": round(available, 6),
            "held_credits": round(held.reserved_units / CREDIT_SCALE, 6),
        },
        "gpus": {
            "limit": 0,
            "in_use": {"total": 0, "serving": 0, "eval": 0, "build": 0},
            "available": 0,
            "waiting_evals": [],
        },
        "usage": {
            "policies": len(hosting.listed(org.id, HostedKind.POLICY)),
            "benchmarks": len(hosting.listed(org.id, HostedKind.BENCHMARK)),
        },
        "limits": {
            "max_concurrent_evals": org.concurrent_submissions,
            "max_evals_per_day": org.submissions_per_day,
        },
    }
    return JSONResponse(body)
