"""Who is calling: a user by API key, the orgs they belong to. Every read of a submission, an artifact or a
tenant board goes through `Caller.may_see` so one org never sees another's data."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.service import keys
from yardstick.store.models import Membership, Org, User, utcnow


@dataclass(frozen=True)
class Caller:
    user_id: int
    login: str
    alias: str | None
    is_admin: bool
    orgs: tuple[Org, ...]

    @property
    def org_ids(self) -> frozenset[int]:
        return frozenset(org.id for org in self.orgs)

    def org_by_slug(self, slug: str) -> Org | None:
        return next((org for org in self.orgs if org.slug == slug), None)

    def may_see(self, org_id: int | None, user_id: int | None = None) -> bool:
        return self.is_admin or (org_id is not None and org_id in self.org_ids) or user_id == self.user_id


# How stale a key's last-use time may get before a request writes it again: a write per request would
# serialize every reader behind SQLite's one writer.
LAST_USED_EVERY = dt.timedelta(minutes=5)


def caller_for_key(session: Session, plaintext: str) -> tuple[Caller, int | None] | None:
    """The caller a key names, and the key's id when its last-use time is due a write."""
    key = keys.lookup(session, plaintext)
    if key is None:
        return None
    user = session.get(User, key.user_id)
    if user is None:
        return None
    due = key.last_used_at is None or utcnow() - key.last_used_at > LAST_USED_EVERY
    return caller_for_user(session, user), key.id if due else None


def caller_for_user(session: Session, user: User) -> Caller:
    orgs = (
        session.execute(
            select(Org)
            .join(Membership, Membership.org_id == Org.id)
            .where(Membership.user_id == user.id)
            .order_by(Org.slug)
        )
        .scalars()
        .all()
    )
    for org in orgs:
        session.expunge(org)
    return Caller(user.id, user.login, user.alias, user.is_admin, tuple(orgs))
