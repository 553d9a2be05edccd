"""Browsers signed in to the platform's pages, the CSRF tokens of their forms, and the throttle on guesses.

A session is a random cookie (HttpOnly, SameSite=Lax) whose SHA-256 is a `web_sessions` row. A form's
CSRF token is an HMAC (the platform's secret) of the cookie it goes with: the session's once signed in,
else a random pre-session cookie of the sign-in form's own. A page on another site can make the browser
send the cookie but cannot read the page to learn the token.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import delete, select

from yardstick.core.keys import digest
from yardstick.store.db import Database
from yardstick.store.models import User, WebSession, utcnow

SESSION_COOKIE = "ys_session"
FORM_COOKIE = "ys_form"


@dataclass(frozen=True)
class SignedIn:
    user_id: int
    login: str
    cookie: str


class Sessions:
    def __init__(
        self, db: Database, secret: bytes, ttl_s: int, clock: Callable[[], dt.datetime] = utcnow
    ) -> None:
        self.db = db
        self.ttl = dt.timedelta(seconds=ttl_s)
        self._csrf_key = hashlib.sha256(b"csrf" + secret).digest()
        self._clock = clock

    def start(self, user_id: int) -> str:
        """A new session for `user_id`: the cookie's value, shown to the browser only."""
        cookie = secrets.token_urlsafe(32)
        now = self._clock()
        with self.db.writing() as session:
            session.execute(delete(WebSession).where(WebSession.expires_at < now))
            session.add(
                WebSession(digest=digest(cookie), user_id=user_id, created_at=now, expires_at=now + self.ttl)
            )
        return cookie

    def find(self, cookie: str | None) -> SignedIn | None:
        if not cookie:
            return None
        with self.db.reading() as session:
            found = session.execute(
                select(WebSession, User)
                .join(User, User.id == WebSession.user_id)
                .where(WebSession.digest == digest(cookie))
            ).one_or_none()
        if found is None or found[0].expires_at <= self._clock():
            return None
        return SignedIn(found[1].id, found[1].login, cookie)

    def end(self, cookie: str | None) -> None:
        if cookie:
            with self.db.writing() as session:
                session.execute(delete(WebSession).where(WebSession.digest == digest(cookie)))

    def csrf(self, anchor: str) -> str:
        return hmac.new(self._csrf_key, anchor.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, anchor: str | None, token: str | None) -> bool:
        return bool(anchor and token) and hmac.compare_digest(self.csrf(anchor or ""), token or "")


class Throttle:
    """At most `limit` failures per key in `window_s`; past that, the key waits until the oldest ages out.
    Kept in the process: a gateway run as several processes allows each its own count."""

    def __init__(self, limit: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: str) -> deque[float]:
        now = self._clock()
        times = self._failures.setdefault(key, deque())
        while times and times[0] <= now - self.window_s:
            times.popleft()
        return times

    def wait_s(self, key: str) -> float:
        """Seconds until `key` may try again (0: now)."""
        with self._lock:
            times = self._recent(key)
            if len(times) < self.limit:
                return 0.0
            return max(times[0] + self.window_s - self._clock(), 0.0)

    def fail(self, key: str) -> None:
        with self._lock:
            self._recent(key).append(self._clock())
            if len(self._failures) > 10_000:  # keys of the long-gone go before memory does
                for stale in [k for k, v in self._failures.items() if not v]:
                    del self._failures[stale]

    def clear(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)
