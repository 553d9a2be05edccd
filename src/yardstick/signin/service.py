"""Sign-in: `users.register` (an identity provider's credential becomes a user and a key), the platform's own
device flow and browser sessions, passwords, and a signed-in user's keys.

- `register`: the credential is checked inside the call with its provider (`providers.py`); the account's
  first registration creates the user (and an `identities` row keyed (provider, issuer, subject)) and mints
  a key (`created`); later ones answer `existing` with no key, or with `rotate` revoke the keys earlier
  registrations minted and mint one more (`rotated`).
- `create_key`: what `yardstick login` calls with the platform's own token: a key for one machine, minted
  on every sign-in and never revoking another machine's.
- Keys minted here carry a label saying how (`register`, `login: <machine>`), so `rotate` touches only its
  own and `yardstick keys list` can tell them apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlparse

import httpx
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from yardstick.core import keys
from yardstick.core.accounts import Caller
from yardstick.core.platform import Platform
from yardstick.core.refusals import Refusal, RefusalKind, bad_request, not_found, unauthenticated
from yardstick.signin import passwords
from yardstick.signin.device import DeviceGrants, redeem
from yardstick.signin.providers import (
    Account,
    GitHub,
    OpenIdIssuer,
    PlatformTokens,
    Provider,
    ProviderRefused,
    Unavailable,
    check_credential,
)
from yardstick.signin.sessions import Sessions, Throttle
from yardstick.store.models import ApiKey, Identity, Membership, Org, User

REGISTER_LABEL = "register"
LOGIN_LABEL = "login: "
MAX_CREDENTIAL = 8192
MAX_LABEL = 100
_LOGIN_CHARS = re.compile(r"[^A-Za-z0-9._@-]+")
T = TypeVar("T")


@dataclass(frozen=True)
class Registered:
    user_id: int
    key_status: str  # created | existing | rotated
    api_key: str | None


class SignIn:
    """The sign-in side of one platform: its providers, device grants, sessions and throttles."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.settings = platform.settings.sign_in
        self.grants = DeviceGrants(platform.db, platform.secret, self.settings)
        self.sessions = Sessions(platform.db, platform.secret, self.settings.session_ttl_s)
        self.providers: list[Provider] = [PlatformTokens(self.grants.verify)]
        if self.settings.github_api_url:
            self.providers.append(GitHub(self.settings.github_api_url))
        self.providers += [OpenIdIssuer(issuer) for issuer in self.settings.oidc_issuers]
        # Proxies from the environment only for https: a plain-http provider is a lab's own, nearby.
        self.http = httpx.Client(follow_redirects=False)
        self.code_throttle = Throttle(limit=5, window_s=900)  # wrong user codes per signed-in user
        self.password_throttle = Throttle(limit=10, window_s=900)  # wrong passwords per login and per address

    def close(self) -> None:
        self.http.close()

    @property
    def github(self) -> bool:
        return self.settings.github_api_url is not None

    # --- credentials --------------------------------------------------------------------------------

    def check(self, credential: str) -> Account:
        """The account a credential belongs to, or the contract's refusal: `unauthorized` when the providers
        refuse it, `upstream_unavailable` (a platform fault) when one could not be asked."""
        if not credential.strip():
            raise bad_request("credential: empty; pass the access token of a sign-in")
        if len(credential) > MAX_CREDENTIAL:
            raise bad_request(f"credential: longer than {MAX_CREDENTIAL} characters")
        try:
            return check_credential(self.providers, credential, self.http)
        except ProviderRefused as exc:
            raise unauthenticated(str(exc)) from None
        except Unavailable as exc:
            raise Refusal(
                RefusalKind.UPSTREAM_UNAVAILABLE,
                f"the identity provider could not check the credential: {exc}; nothing was created",
            ) from None

    def register(self, credential: str, alias: str | None, rotate: bool) -> Registered:
        account = self.check(credential)
        done = self._in_transaction(lambda session: self._register(session, account, alias, rotate))
        if done.key_status == "rotated":
            # After the commit: said sooner, a concurrent lookup could remember a key not yet revoked.
            self.platform.accounts.key_revoked()
        return done

    def create_key(self, credential: str, label: str) -> tuple[int, str, keys.MintedKey, str]:
        """A new key for the account behind `credential` (enrolled if new), labelled for its machine."""
        label = LOGIN_LABEL + (label.strip()[:MAX_LABEL] or "unnamed machine")
        account = self.check(credential)

        def mint(session: Session) -> tuple[int, str, keys.MintedKey, str]:
            user, _ = self._enroll(session, account, None)
            return user.id, user.login, keys.mint(session, user.id, label), label

        return self._in_transaction(mint)

    def _in_transaction(self, work: Callable[[Session], T]) -> T:
        # Two first registrations of one account race on the identity's unique key: the loser runs again
        # and finds the winner's user.
        for attempt in range(2):
            try:
                with self.platform.db.writing() as session:
                    return work(session)
            except IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _register(self, session: Session, account: Account, alias: str | None, rotate: bool) -> Registered:
        user, created = self._enroll(session, account, alias)
        if created:
            return Registered(user.id, "created", keys.mint(session, user.id, REGISTER_LABEL).plaintext)
        if not rotate:
            return Registered(user.id, "existing", None)
        earlier = session.execute(
            select(ApiKey).where(
                ApiKey.user_id == user.id, ApiKey.label == REGISTER_LABEL, ApiKey.revoked_at.is_(None)
            )
        ).scalars()
        for row in earlier:
            keys.revoke(session, row.id)
        return Registered(user.id, "rotated", keys.mint(session, user.id, REGISTER_LABEL).plaintext)

    def _enroll(self, session: Session, account: Account, alias: str | None) -> tuple[User, bool]:
        """The user `account` signs in as, and whether it was made now. A user who exists (signed in before,
        or the platform's own account an administrator made) is found and left as it is: `alias` names a
        new user only, and a register of one who exists changes nothing of theirs."""
        if account.grant_id is not None and not redeem(session, account.grant_id):
            raise unauthenticated("credential: this sign-in token was already used")
        identity = session.execute(
            select(Identity).where(
                Identity.provider == account.provider,
                Identity.issuer == account.issuer,
                Identity.subject == account.subject,
            )
        ).scalar_one_or_none()
        if identity is not None:
            user = session.get(User, identity.user_id)
            assert user is not None  # identities cascade with their user
            return user, False
        created = account.user_id is None
        if not created:  # the platform's own account: the user exists already
            found = session.get(User, account.user_id)
            if found is None:
                raise unauthenticated("credential: its user no longer exists")
            user = found
        else:
            user = self._new_user(session, account, alias)
        session.add(
            Identity(
                user_id=user.id,
                provider=account.provider,
                issuer=account.issuer,
                subject=account.subject,
                email=account.email,
            )
        )
        session.flush()
        return user, created

    def _new_user(self, session: Session, account: Account, alias: str | None) -> User:
        org: Org | None = None
        slug = self.settings.registration_org
        if slug:
            org = session.execute(select(Org).where(Org.slug == slug)).scalar_one_or_none()
            if org is None:
                raise Refusal(
                    RefusalKind.INTERNAL,
                    f"this platform puts new users in org {slug!r}, which does not exist: an administrator "
                    "creates it (yardstick admin org create); nothing was created",
                )
        user = User(
            login=_free_login(session, account),
            alias=alias or account.login or account.name,
            email=account.email,
        )
        session.add(user)
        session.flush()
        if org is not None:
            session.add(Membership(user_id=user.id, org_id=org.id))
        return user

    # --- passwords and the pages -----------------------------------------------------------------------

    def check_password(self, login: str, password: str) -> User | None:
        with self.platform.db.reading() as session:
            user = session.execute(select(User).where(User.login == login)).scalar_one_or_none()
        stored = user.password_digest if user is not None else None
        return user if passwords.verify_password(password, stored) and user is not None else None

    # --- a signed-in user's keys -----------------------------------------------------------------------

    def list_keys(self, caller: Caller) -> list[ApiKey]:
        with self.platform.db.reading() as session:
            return list(
                session.execute(
                    select(ApiKey)
                    .where(ApiKey.user_id == caller.user_id, ApiKey.revoked_at.is_(None))
                    .order_by(ApiKey.created_at)
                ).scalars()
            )

    def revoke_key(self, caller: Caller, prefix: str) -> None:
        with self.platform.db.writing() as session:
            row = session.execute(
                select(ApiKey).where(
                    ApiKey.prefix == prefix, ApiKey.user_id == caller.user_id, ApiKey.revoked_at.is_(None)
                )
            ).scalar_one_or_none()
            if row is None:
                raise not_found(f"prefix: no live key of yours starts {prefix!r} (see keys.list)")
            keys.revoke(session, row.id)
        self.platform.accounts.key_revoked()

    def rotate_key(self, bearer: str) -> tuple[keys.MintedKey, str]:
        """Revoke the key this call came with and mint its successor, with the same label."""
        with self.platform.db.writing() as session:
            row = keys.lookup(session, bearer)
            if row is None:
                raise unauthenticated()
            keys.revoke(session, row.id)
            minted, label = keys.mint(session, row.user_id, row.label), row.label
        self.platform.accounts.key_revoked()
        return minted, label


def _free_login(session: Session, account: Account) -> str:
    """`name@provider` for a new user (`ada@github`, `ada@id.example.org`), numbered if taken: a login that
    says where the account came from never takes a name an administrator meant for someone else."""
    name = account.login or (account.email or "").split("@")[0] or account.subject
    host = "github" if account.provider == "github" and account.issuer.endswith("api.github.com") else None
    where = host or urlparse(account.issuer).hostname or account.provider
    base = _LOGIN_CHARS.sub("-", f"{name}@{where}").strip("-")[:150] or account.provider
    candidate, number = base, 1
    while session.execute(select(User.id).where(User.login == candidate)).first() is not None:
        number += 1
        candidate = f"{base}-{number}"
    return candidate
