"""Who is calling: a user by API key, the orgs they belong to. Every read of a run, an artifact or a tenant
board goes through `Caller.may_see`, so one org never sees another's data. `Authenticator` is where every
front door learns who a bearer key names."""

from __future__ import annotations

import datetime as dt
import threading
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from yardstick.core import keys
from yardstick.store.db import Database
from yardstick.store.models import ApiKey, Membership, Org, User, utcnow

# How long a key's caller is remembered in a gateway process: the platform's promise is that a revoked key
# (by the API, `yardstick admin key revoke`, or another gateway) stops working within this time in every
# process — at once in the process that revoked it — and so does any other change to a caller (an org
# joined or left, admin granted). A second keeps a busy key at three small queries a second per process,
# where a query per request would cost more than the rest of a read.
AUTH_CACHE_S, AUTH_CACHE_SIZE = 1.0, 4096
# Past this age a remembered caller is read anew in the background while it is still served (`cached`),
# so a busy key's callers do not all wait on a lookup each time it expires.
AUTH_REFRESH_AFTER_S = AUTH_CACHE_S / 2


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


class Revocations(Protocol):
    """A count of revocations shared by the HTTP processes of one server (`multiprocessing.Value`)."""

    value: int

    def get_lock(self) -> AbstractContextManager[Any]: ...


class _OwnRevocations:
    """The count of revocations of a process that shares it with no other."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def get_lock(self) -> AbstractContextManager[Any]:
        return self._lock


class Authenticator:
    """The caller a bearer key names, remembered for `AUTH_CACHE_S` by the key's digest (never the key):
    three queries a request cost more than the rest of a read. The HTTP processes of one server
    (`--http-workers`) share a count of revocations (`share_revocations`): one made through the API in any
    of them ends what every one remembers, so it holds at once in all of them.

    Each remembered caller carries the count of revocations from before it was read, and is served only
    while that count stands: a lookup that read a key just before its revocation committed, and finished
    after, would otherwise remember a revoked key for a second more."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: dict[str, tuple[Caller, float, int]] = {}
        self._revocations: Revocations = _OwnRevocations()

    def share_revocations(self, count: Revocations) -> None:
        self._revocations = count
        self._cache.clear()  # counted by the count it replaces

    def cached(self, bearer: str) -> tuple[Caller | None, bool]:
        """The caller `bearer` names if this process remembers it (no query, no wait: safe on the event
        loop), else None (ask `caller`); and whether it is old enough to be read anew (`look_up`) while it
        is still served. It is forgotten `AUTH_CACHE_S` after it was read whatever happens, so a revocation
        holds as soon as it would without the early reading."""
        remembered = self._remembered(keys.digest(bearer))
        if remembered is None:
            return None, False
        caller, seconds_left = remembered
        return caller, seconds_left < AUTH_CACHE_S - AUTH_REFRESH_AFTER_S

    def _remembered(self, cache_key: str) -> tuple[Caller, float] | None:
        """The caller remembered under `cache_key` and the seconds until it is forgotten, if it still is."""
        cached = self._cache.get(cache_key)
        if cached is None:
            return None
        caller, expires, read_after = cached
        seconds_left = expires - time.monotonic()
        if seconds_left <= 0 or read_after != self._revocations.value:
            return None  # expired, or a key was revoked since
        return caller, seconds_left

    def caller(self, bearer: str | None) -> Caller | None:
        """The caller `bearer` names: remembered, or read (`look_up`)."""
        if not bearer:
            return None
        remembered = self._remembered(keys.digest(bearer))
        return remembered[0] if remembered is not None else self.look_up(bearer)

    def look_up(self, bearer: str) -> Caller | None:
        """The caller `bearer` names, read from the database now (and remembered), or None for a key that
        names no one (forgotten, if it was remembered). Read once more if a key was revoked meanwhile: the
        requests that wait on this lookup may have come after that revocation, which the second reading
        follows."""
        cache_key = keys.digest(bearer)
        for _ in range(2):  # bounded: a stream of revocations elsewhere must not keep a request waiting
            read_after, now = self._revocations.value, time.monotonic()
            with self.db.reading() as session:
                found = caller_for_key(session, bearer)
            if self._revocations.value == read_after:
                break
        if found is None:
            self._cache.pop(cache_key, None)
            return None
        caller, stale_key = found
        if stale_key is not None:
            with self.db.writing() as session:
                session.execute(update(ApiKey).where(ApiKey.id == stale_key).values(last_used_at=utcnow()))
        if len(self._cache) > AUTH_CACHE_SIZE:
            self._cache.clear()
        self._cache[cache_key] = (caller, now + AUTH_CACHE_S, read_after)
        return caller

    def key_revoked(self) -> None:
        """Say that a key was revoked: what this process remembers ends, and with `share_revocations` what
        the server's other HTTP processes remember, at once (which key is not said: a second of lookups is
        cheaper than telling every process). Called after the revocation commits, so no lookup counted as
        after it can have read the key alive."""
        with self._revocations.get_lock():  # two revocations at once count two: neither is missed
            self._revocations.value += 1
