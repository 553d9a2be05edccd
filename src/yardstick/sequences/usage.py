"""`GET /v1/account/usage`: what an org's evals were charged, in the buckets `seq usage` reads.

Yardstick charges credits by an episode's robot time (`billing`), settled when a pay-as-you-go run ends; the
contract reports machine time, a card's hours and their dollars. Said honestly: `card_hours` is 0 (no cards
here), `cost_usd` each bucket's settled credits at a credit's dollars (`account.usd_per_credit`), and the
credits themselves ride beside. An org invoiced by its terms (packaged) settles nothing per run: its
buckets are empty. `group`: none (one row a bucket), deployment (a row a policy: the eval's `model`), gpu
(one row, `cpu`), kind (one row, `eval`).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Annotated, Any, Literal

from fastapi import Query
from fastapi.responses import JSONResponse
from sqlalchemy import select

from yardstick.billing.money import CREDIT_SCALE
from yardstick.core.refusals import bad_request
from yardstick.core.runs import org_for
from yardstick.http.auth import Who
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat, Purch
from yardstick.sequences import paths
from yardstick.sequences.account import usd_per_credit
from yardstick.sequences.errors import SEQUENCES
from yardstick.store.models import Reservation, Run

router = door_router(SEQUENCES, tags=["sequences: account"])
Group = Literal["none", "deployment", "gpu", "kind"]
By = Literal["hour", "day"]


@router.get(paths.ACCOUNT_USAGE, responses=refusals(403))
def usage(
    plat: Plat,
    purchases: Purch,
    who: Who,
    start: Annotated[dt.datetime, Query(alias="from")],
    to: Annotated[dt.datetime | None, Query()] = None,
    by: By = "day",
    tz: Annotated[str, Query(pattern="^UTC$")] = "UTC",
    group: Group = "none",
) -> JSONResponse:
    org = org_for(who, None)
    start, end = _utc(start), _utc(to) if to is not None else dt.datetime.now(dt.UTC)
    if end <= start:
        raise bad_request("to: the window ends after it starts (from < to)", field="to")
    asked_end = end
    if end.microsecond == 0:
        end += dt.timedelta(seconds=1)  # a window to a whole second (the CLI's "now") holds that second
    with plat.db.reading() as session:
        rows = session.execute(
            select(Reservation.settled_at, Reservation.charged_units, Run.resolved)
            .join(Run, Run.id == Reservation.submission_id)
            .where(
                Reservation.org_id == org.id,
                Reservation.settled_at >= start,
                Reservation.settled_at < end,
                Reservation.charged_units.is_not(None),
            )
        ).all()
    per_credit = usd_per_credit(purchases) or 0.0
    buckets: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {"card_hours": 0.0, "credits": 0.0, "deployments": set()}
    )
    for settled_at, charged, resolved in rows:
        model = str((resolved or {}).get("model") or "")
        at = _utc(settled_at)
        opened = at.replace(minute=0, second=0, microsecond=0)
        if by == "day":
            opened = opened.replace(hour=0)
        key = {"none": "all", "deployment": model, "gpu": "cpu", "kind": "eval"}[group]
        bucket = buckets[(opened.isoformat(), key)]
        bucket["credits"] += (charged or 0) / CREDIT_SCALE
        if model:
            bucket["deployments"].add(model)
    shown = [
        {
            "start": opened,
            "group": key,
            "deployments": sorted(b["deployments"]),
            "card_hours": 0.0,
            "credits": round(b["credits"], 6),
            "cost_usd": round(b["credits"] * per_credit, 6),
        }
        for (opened, key), b in sorted(buckets.items())
    ]
    return JSONResponse(
        {
            "from": start.isoformat(timespec="seconds"),
            "to": asked_end.isoformat(timespec="seconds"),
            "by": by,
            "tz": tz,
            "group": group,
            "buckets": shown,
            "total_card_hours": 0.0,
            "total_usd": round(sum(b["cost_usd"] for b in shown), 6),
        }
    )


def _utc(at: dt.datetime) -> dt.datetime:
    return at.astimezone(dt.UTC) if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)
