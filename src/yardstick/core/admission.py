"""Admission: whether an org may file another run now, under its quotas (runs a day per user, runs at once
per org), and the quota events that count a run or give it back."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ScalarSelect, bindparam, func, or_, select
from sqlalchemy.orm import Session

from yardstick.core.refusals import Refusal, RefusalKind
from yardstick.store.db import Database
from yardstick.store.models import Org, QuotaEvent, Run, utcnow
from yardstick.store.states import ACTIVE_RUNS, OnExhausted, QuotaKind

__all__ = ["CONCURRENT_QUOTA", "DAY_QUOTA", "Quota", "admit", "charge", "current_quotas", "quotas", "refund"]

DAY_QUOTA, CONCURRENT_QUOTA = "submissions.day", "submissions.concurrent"
_WHAT = {DAY_QUOTA: "submissions today", CONCURRENT_QUOTA: "submissions running or queued at once"}


@dataclass(frozen=True)
class Quota:
    """One quota as it stands: its key, the window it counts over and whom (`user` or `tenant`), its limit,
    what is used, when it resets (None: it does not), and what spending it does."""

    key: str
    window: str
    subject: str
    limit: int
    used: int
    resets_at: dt.datetime | None
    on_exhausted: str = OnExhausted.BLOCK

    @property
    def spent(self) -> bool:
        return self.used >= self.limit


def _midnight() -> dt.datetime:
    return utcnow().replace(hour=0, minute=0, second=0, microsecond=0)


def quotas(session: Session, user_id: int, org: Org) -> list[Quota]:
    """The user's quotas in `org` (a row already read, perhaps locked), counted now."""
    midnight = _midnight()
    found = session.execute(
        _LIMITS_AND_COUNTS, {"user_id": user_id, "org_id": org.id, "since": midnight}
    ).one()
    return _standing(tuple(found), midnight)


async def current_quotas(db: Database, user_id: int, org_id: int) -> list[Quota] | None:
    """The user's quotas in the org as its row stands now (None: no such org), in one statement read on the
    event loop (`Database.rows_on_loop`): `users.me` asks it on every call, and a route thread, or an ORM
    session around one row of numbers, costs more than the statement."""
    midnight = _midnight()
    found = await db.rows_on_loop(
        _LIMITS_AND_COUNTS, {"user_id": user_id, "org_id": org_id, "since": midnight}
    )
    if not found:
        return None
    return _standing(found[0], midnight)


def _events_today(kind: QuotaKind) -> ScalarSelect[int]:
    return (
        select(func.count())
        .where(
            QuotaEvent.user_id == bindparam("user_id"),
            QuotaEvent.org_id == Org.id,
            QuotaEvent.at >= bindparam("since"),
            QuotaEvent.kind == kind,
        )
        .scalar_subquery()
    )


# The org's limits as its row is now and what counts against them, in one statement built once (admission and
# every `users.me` ask it): columns only, so it needs no ORM session.
_LIMITS_AND_COUNTS = select(
    Org.submissions_per_day,
    Org.concurrent_submissions,
    Org.on_exhausted,
    _events_today(QuotaKind.CHARGE),
    _events_today(QuotaKind.REFUND),
    select(func.count())
    .select_from(Run)
    .where(Run.org_id == Org.id, or_(*(Run.status == status for status in ACTIVE_RUNS)))
    .scalar_subquery(),
).where(Org.id == bindparam("org_id"))


def _standing(counted: tuple[Any, ...], midnight: dt.datetime) -> list[Quota]:
    """The quotas from a row of `_LIMITS_AND_COUNTS`."""
    per_day, concurrent, on_exhausted, charged, refunded, active = counted
    return [
        Quota(
            DAY_QUOTA,
            "day",
            "user",
            per_day,
            int(charged) - int(refunded),
            midnight + dt.timedelta(days=1),
            on_exhausted,
        ),
        Quota(CONCURRENT_QUOTA, "concurrent", "tenant", concurrent, int(active), None, on_exhausted),
    ]


def admit(session: Session, user_id: int, org: Org, *, lock: bool, counts_day: bool = True) -> Org:
    """The org's row, locked (with `lock`: PostgreSQL; SQLite has one writer anyway) so concurrent admissions
        count one after another, or a `Refusal` when a quota is spent (an org that meters is let through and
        counts past the limit). The lock is FOR NO KEY UPDATE, so rows referring to the org (ledger entries,
        quota events) can still be written meanwhile. A run that does not `counts_day` (a rig plan, which
    queues for an operator) is not held to the day's quota."""
    locked = select(Org).where(Org.id == org.id)
    if lock:
        locked = locked.with_for_update(key_share=True)
    row = session.execute(locked).scalar_one()
    for quota in quotas(session, user_id, row):
        if quota.key == DAY_QUOTA and not counts_day:
            continue
        if quota.spent and row.on_exhausted != OnExhausted.METER:
            raise Refusal(
                RefusalKind.QUOTA_EXCEEDED,
                f"{quota.key}: {quota.used} of {quota.limit} {_WHAT[quota.key]}",
                quota=quota,
            )
    return row


def charge(session: Session, run: Run) -> None:
    """Count an admitted run against its user's day."""
    session.add(
        QuotaEvent(org_id=run.org_id, user_id=run.user_id, submission_id=run.id, kind=QuotaKind.CHARGE)
    )


def refund(session: Session, run: Run) -> None:
    """Give a run's count back: it failed for the platform's fault, or was cancelled before it started. A rig
    plan was never counted (`admit`), so there is nothing to give back."""
    if run.rig_shape is not None:
        return
    session.add(
        QuotaEvent(org_id=run.org_id, user_id=run.user_id, submission_id=run.id, kind=QuotaKind.REFUND)
    )
