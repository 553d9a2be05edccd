"""The platform as its own device-flow provider (RFC 8628), so a self-hosted install needs nothing outside it.

A CLI asks for a code (`start`), shows the person the short user code, and polls (`poll`); the person signs
in on `/device` and approves or denies the code (`decide`); the next poll gets the access token, once.

Nothing secret is kept in the clear: the device code is kept as its SHA-256; the access token is never
kept at all: it names its grant and carries an HMAC (the platform's secret) over the grant, so only this
platform can mint one, and it is spent by its first use (`redeem` deletes the grant). The user code is
kept as typed-in form: it is short-lived, useless without a signed-in person approving it, and the page
has to find the grant by it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from yardstick.core.keys import digest
from yardstick.core.settings import SignInSettings
from yardstick.signin.providers import SELF_MARK, Account, ProviderRefused
from yardstick.store.db import Database
from yardstick.store.models import DeviceGrant, utcnow

DEVICE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"
# RFC 8628 §6.1: consonants only (no words spelled by accident), none that reads as another (no vowels,
# so no O/0 or I/1); 20**8 ≈ 2.6e10 codes.
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_LETTERS = 8
SLOW_DOWN_STEP_S = 5  # RFC 8628 §3.5: each slow_down raises the interval by 5 s
# Poll arrivals jitter; a poll this much early is still on time.
POLL_TOLERANCE_S = 0.25
MAX_CLIENT_ID = 200


class OAuthError(Exception):
    """An OAuth error answer (RFC 6749 §5.2 / RFC 8628 §3.5): HTTP 400, `{"error", "error_description"}`."""

    def __init__(self, error: str, description: str, *, interval: int | None = None) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.interval = interval

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.error, "error_description": self.description}
        if self.interval is not None:
            body["interval"] = self.interval
        return body


@dataclass(frozen=True)
class Started:
    device_code: str
    user_code: str
    expires_in: int
    interval: int


@dataclass(frozen=True)
class Pending:
    """A grant awaiting a decision, as the approval page shows it."""

    user_code: str
    client_name: str
    created_at: dt.datetime
    expires_at: dt.datetime


def normalize_user_code(text: str) -> str | None:
    """`XXXX-XXXX` from what a person typed (any case, with or without the dash or spaces), or None."""
    letters = "".join(c for c in text.upper() if c not in "- \t")
    if len(letters) != USER_CODE_LETTERS or any(c not in USER_CODE_ALPHABET for c in letters):
        return None
    return f"{letters[:4]}-{letters[4:]}"


def _new_user_code() -> str:
    letters = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(USER_CODE_LETTERS))
    return f"{letters[:4]}-{letters[4:]}"


class DeviceGrants:
    def __init__(
        self, db: Database, secret: bytes, settings: SignInSettings, clock: Callable[[], dt.datetime] = utcnow
    ) -> None:
        self.db = db
        self.settings = settings
        self._key = hashlib.sha256(b"device-token" + secret).digest()
        # Every time a grant is judged by (its expiry, the polling interval, its token's life): a test moves
        # it on where it would otherwise wait out an interval.
        self.clock = clock

    # --- the device's side -----------------------------------------------------------------------

    def start(self, client_id: str) -> Started:
        if not client_id:
            raise OAuthError("invalid_request", "client_id: required (any name of the client asking)")
        if len(client_id) > MAX_CLIENT_ID:
            raise OAuthError("invalid_request", f"client_id: at most {MAX_CLIENT_ID} characters")
        now = self.clock()
        device_code = secrets.token_urlsafe(32)
        ttl, interval = self.settings.device_code_ttl_s, self.settings.device_interval_s
        for _ in range(5):  # a user code drawn twice: draw again
            try:
                with self.db.writing() as session:
                    # Grants past any use (expired codes, tokens past their life) go as new ones come.
                    stale = now - dt.timedelta(seconds=self.settings.token_ttl_s)
                    session.execute(delete(DeviceGrant).where(DeviceGrant.expires_at < stale))
                    user_code = _new_user_code()
                    session.add(
                        DeviceGrant(
                            device_digest=digest(device_code),
                            user_code=user_code,
                            client_name=client_id,
                            interval_s=interval,
                            created_at=now,
                            expires_at=now + dt.timedelta(seconds=ttl),
                        )
                    )
                return Started(device_code, user_code, ttl, interval)
            except IntegrityError:
                continue
        raise RuntimeError("could not draw a free user code in 5 tries")

    def poll(self, device_code: str, client_id: str) -> str:
        """The access token, once the code is approved; else the RFC's error for where the grant stands."""
        now = self.clock()
        refusal: OAuthError | None = None
        token: str | None = None
        with self.db.writing() as session:
            query = select(DeviceGrant).where(DeviceGrant.device_digest == digest(device_code))
            if not self.db.is_sqlite:
                query = query.with_for_update()
            grant = session.execute(query).scalar_one_or_none()
            if grant is None:
                refusal = OAuthError("invalid_grant", "device_code: no such code (or its token was taken)")
            elif grant.client_name != client_id:
                refusal = OAuthError("invalid_grant", "client_id: not the client this code was issued to")
            elif grant.consumed_at is not None:
                refusal = OAuthError("invalid_grant", "device_code: its token was already issued")
            elif now >= grant.expires_at:
                refusal = OAuthError("expired_token", "device_code: expired; start the sign-in again")
            elif grant.approved is False:
                refusal = OAuthError("access_denied", "the sign-in was denied")
            elif grant.last_polled_at is not None and (now - grant.last_polled_at).total_seconds() < (
                grant.interval_s - POLL_TOLERANCE_S
            ):
                grant.interval_s += SLOW_DOWN_STEP_S
                grant.last_polled_at = now
                refusal = OAuthError(
                    "slow_down", f"poll at most every {grant.interval_s} s", interval=grant.interval_s
                )
            else:
                grant.last_polled_at = now
                if grant.approved is None:
                    refusal = OAuthError("authorization_pending", "the code is not approved yet")
                else:
                    grant.consumed_at = now
                    token = self._token(grant.id, grant.device_digest)
        # Raised after the commit: the poll's time and a raised interval must be kept.
        if refusal is not None:
            raise refusal
        assert token is not None
        return token

    # --- the person's side -------------------------------------------------------------------------

    def pending(self, user_code: str) -> Pending | None:
        now = self.clock()
        with self.db.reading() as session:
            grant = session.execute(
                select(DeviceGrant).where(DeviceGrant.user_code == user_code)
            ).scalar_one_or_none()
        if grant is None or grant.approved is not None or now >= grant.expires_at:
            return None
        return Pending(grant.user_code, grant.client_name, grant.created_at, grant.expires_at)

    def decide(self, user_code: str, user_id: int, approve: bool) -> bool:
        """Approve or deny a pending code as `user_id`; False if it is no longer pending."""
        now = self.clock()
        with self.db.writing() as session:
            done = session.execute(
                update(DeviceGrant)
                .where(
                    DeviceGrant.user_code == user_code,
                    DeviceGrant.approved.is_(None),
                    DeviceGrant.expires_at > now,
                )
                .values(approved=approve, user_id=user_id, decided_at=now)
            )
            return bool(getattr(done, "rowcount", 0) == 1)

    # --- the token -----------------------------------------------------------------------------------

    def _sign(self, grant_id: int, device_digest: str) -> str:
        return hmac.new(self._key, f"{grant_id:x}:{device_digest}".encode(), hashlib.sha256).hexdigest()

    def _token(self, grant_id: int, device_digest: str) -> str:
        return f"{SELF_MARK}{grant_id:x}_{self._sign(grant_id, device_digest)}"

    def verify(self, token: str) -> Account:
        """The user an issued, unspent, unexpired token of ours names; `ProviderRefused` otherwise."""
        ident, _, mac = token.removeprefix(SELF_MARK).partition("_")
        try:
            grant_id = int(ident, 16)
        except ValueError:
            raise ProviderRefused("credential: not a token of this platform") from None
        with self.db.reading() as session:
            grant = session.get(DeviceGrant, grant_id) if 0 < grant_id < 2**63 else None
        if grant is None or not hmac.compare_digest(mac, self._sign(grant_id, grant.device_digest)):
            raise ProviderRefused("credential: not a live token of this platform (unknown, or already used)")
        if grant.consumed_at is None or not grant.approved or grant.user_id is None:
            raise ProviderRefused("credential: this sign-in was never approved")
        if self.clock() >= grant.consumed_at + dt.timedelta(seconds=self.settings.token_ttl_s):
            raise ProviderRefused("credential: this sign-in token expired; sign in again")
        return Account(
            provider="yardstick",
            issuer="",
            subject=str(grant.user_id),
            user_id=grant.user_id,
            grant_id=grant.id,
        )


def redeem(session: Session, grant_id: int) -> bool:
    """Spend a token (inside the transaction that uses it): False if another use got there first."""
    done = session.execute(delete(DeviceGrant).where(DeviceGrant.id == grant_id))
    return bool(getattr(done, "rowcount", 0) == 1)
