"""Checking a sign-in credential with the provider it belongs to: GitHub's API, an OpenID Connect issuer's
userinfo, or the platform itself (its own device-flow tokens, checked by `device.py`).

`users.register` checks the credential inside the call, so every request here is bounded by the Positronic
client's own phase timeouts (the values of `platform_client.identity_providers`, kept here so sign-in
depends on no contract's package; `tests/test_signin.py` holds them equal) and the whole check by
`CHECK_DEADLINE_S`, the deadline that client allows the gateway for a GitHub check. A provider that says no
is `ProviderRefused` (the caller's fault); one that is down, slow or unreadable is `Unavailable` (the
platform's).

A credential goes only to the provider it belongs to where that can be told (a GitHub token by its
prefix, a JWT by its issuer, the platform's own by its mark): sending it elsewhere would show it to a
party it was not minted for. An opaque token goes to the configured providers in turn.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

# Each phase of one provider request, and the longest it can stall in all (the phases added up).
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, WRITE_TIMEOUT_S, POOL_TIMEOUT_S = 5.0, 10.0, 5.0, 5.0
MAX_REQUEST_STALL_S = CONNECT_TIMEOUT_S + READ_TIMEOUT_S + WRITE_TIMEOUT_S + POOL_TIMEOUT_S

# The client bounds `users.register` by two provider requests plus the gateway's own work
# (`GITHUB_REGISTER_TIMEOUT`); the check keeps within those two.
CHECK_DEADLINE_S = 2 * MAX_REQUEST_STALL_S
GITHUB_PREFIXES = ("gho_", "ghu_", "ghp_", "ghs_", "ghr_", "github_pat_")
SELF_MARK = "yst_"  # the platform's own access tokens (`device.py`)
DISCOVERY_TTL_S = 3600.0
USER_AGENT = "yardstick-platform"


@dataclass(frozen=True)
class Account:
    """An account a provider vouched for. `grant_id`: the device grant a platform token came from, spent
    when the token is (`device.redeem`)."""

    provider: str  # github | oidc | yardstick
    issuer: str
    subject: str
    login: str | None = None
    email: str | None = None
    name: str | None = None
    user_id: int | None = None
    grant_id: int | None = None


class ProviderRefused(Exception):
    """The provider answered, and this credential is none of its accounts."""


class Unavailable(Exception):
    """The provider could not be asked: unreachable, too slow, failing, or answering what we cannot read."""


class Deadline:
    """The time left for one check; each request's phases are cut to it."""

    def __init__(
        self, seconds: float = CHECK_DEADLINE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._until = clock() + seconds

    def timeout(self, name: str) -> httpx.Timeout:
        left = self._until - self._clock()
        if left <= 0:
            raise Unavailable(f"{name} did not answer within the check's {CHECK_DEADLINE_S:g} s")
        return httpx.Timeout(
            connect=min(CONNECT_TIMEOUT_S, left),
            read=min(READ_TIMEOUT_S, left),
            write=min(WRITE_TIMEOUT_S, left),
            pool=min(POOL_TIMEOUT_S, left),
        )


class Provider(Protocol):
    name: str

    def owns(self, credential: str) -> bool | None:
        """True: surely this provider's; False: surely not; None: cannot tell."""

    def check(self, credential: str, http: httpx.Client, deadline: Deadline) -> Account: ...


def _jwt_issuer(credential: str) -> str | None:
    """The `iss` a JWT-shaped token claims (unverified: it only picks where the token is checked)."""
    parts = credential.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    issuer = claims.get("iss") if isinstance(claims, dict) else None
    return issuer.rstrip("/") if isinstance(issuer, str) else None


def get_json(http: httpx.Client, url: str, bearer: str, deadline: Deadline, name: str) -> Any:
    """GET `url` with the bearer. The messages name the provider and the status, never the credential."""
    headers = {"Authorization": f"Bearer {bearer}", "Accept": "application/json", "User-Agent": USER_AGENT}
    try:
        response = http.get(url, headers=headers, timeout=deadline.timeout(name))
    except httpx.TimeoutException:
        raise Unavailable(f"{name} did not answer in time") from None
    except httpx.HTTPError as exc:
        raise Unavailable(f"{name} is unreachable ({type(exc).__name__})") from None
    status = response.status_code
    rate_limited = status == 403 and response.headers.get("x-ratelimit-remaining") == "0"
    if status == 429 or status >= 500 or rate_limited:
        raise Unavailable(f"{name} is unavailable: HTTP {status}")
    if status in (401, 403):
        raise ProviderRefused(f"{name} refused the credential (HTTP {status})")
    if status != 200:
        raise Unavailable(f"{name} answered HTTP {status}")
    try:
        return response.json()
    except ValueError:
        raise Unavailable(f"{name} answered with no JSON") from None


def _text(payload: Mapping[str, Any], field: str) -> str | None:
    value = payload.get(field)
    return value if isinstance(value, str) and value else None


class GitHub:
    """GitHub (or a GitHub Enterprise at its own API base): `GET /user`, and `GET /user/emails` for an
    account whose address is private."""

    name = "GitHub"

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url.rstrip("/")

    def owns(self, credential: str) -> bool | None:
        if credential.startswith(GITHUB_PREFIXES):
            return True
        if credential.startswith(SELF_MARK) or _jwt_issuer(credential) is not None:
            return False
        return None

    def check(self, credential: str, http: httpx.Client, deadline: Deadline) -> Account:
        user = get_json(http, f"{self.api_url}/user", credential, deadline, self.name)
        ident = user.get("id") if isinstance(user, dict) else None
        if isinstance(ident, bool) or not isinstance(ident, int):
            raise Unavailable(f"{self.name} answered /user without an account id")
        email = _text(user, "email") or self._primary_email(http, credential, deadline)
        return Account(
            provider="github",
            issuer=self.api_url,
            subject=str(ident),
            login=_text(user, "login"),
            email=email,
            name=_text(user, "name"),
        )

    def _primary_email(self, http: httpx.Client, credential: str, deadline: Deadline) -> str | None:
        try:
            emails = get_json(http, f"{self.api_url}/user/emails", credential, deadline, self.name)
        except ProviderRefused:  # a token without `user:email`: the account signs in without an address
            return None
        for entry in emails if isinstance(emails, list) else []:
            if isinstance(entry, dict) and entry.get("primary") is True and entry.get("verified") is True:
                return _text(entry, "email")
        return None


class OpenIdIssuer:
    """Any OpenID Connect issuer: its discovery document names the userinfo endpoint, which reads the
    account an access token belongs to."""

    name = "OpenID Connect"

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer.rstrip("/")
        self.name = f"the issuer {self.issuer}"
        self._userinfo: tuple[str, float] | None = None
        self._lock = threading.Lock()

    def owns(self, credential: str) -> bool | None:
        if credential.startswith((*GITHUB_PREFIXES, SELF_MARK)):
            return False
        issuer = _jwt_issuer(credential)
        return None if issuer is None else issuer == self.issuer

    def userinfo_endpoint(self, http: httpx.Client, deadline: Deadline) -> str:
        with self._lock:
            if self._userinfo is not None and self._userinfo[1] > time.monotonic():
                return self._userinfo[0]
        try:
            response = http.get(
                f"{self.issuer}/.well-known/openid-configuration",
                headers={"Accept": "application/json", "User-Agent": USER_AGENT},
                timeout=deadline.timeout(self.name),
            )
        except httpx.TimeoutException:
            raise Unavailable(f"{self.name} did not answer its discovery in time") from None
        except httpx.HTTPError as exc:
            raise Unavailable(f"{self.name} is unreachable ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise Unavailable(f"{self.name} answered its discovery with HTTP {response.status_code}")
        try:
            document = response.json()
        except ValueError:
            raise Unavailable(f"{self.name} answered its discovery with no JSON") from None
        if not isinstance(document, dict) or str(document.get("issuer", "")).rstrip("/") != self.issuer:
            raise Unavailable(f"{self.name}: its discovery document names another issuer")
        endpoint = _text(document, "userinfo_endpoint")
        if endpoint is None or not endpoint.startswith(("https://", "http://")):
            raise Unavailable(f"{self.name}: its discovery document names no userinfo_endpoint")
        with self._lock:
            self._userinfo = (endpoint, time.monotonic() + DISCOVERY_TTL_S)
        return endpoint

    def check(self, credential: str, http: httpx.Client, deadline: Deadline) -> Account:
        claims = get_json(http, self.userinfo_endpoint(http, deadline), credential, deadline, self.name)
        subject = _text(claims, "sub") if isinstance(claims, dict) else None
        if subject is None:
            raise Unavailable(f"{self.name} answered userinfo without `sub`")
        # An address the issuer has not verified names nobody in particular.
        email = _text(claims, "email") if claims.get("email_verified") is not False else None
        return Account(
            provider="oidc",
            issuer=self.issuer,
            subject=subject,
            login=_text(claims, "preferred_username"),
            email=email,
            name=_text(claims, "name") or _text(claims, "preferred_username"),
        )


class PlatformTokens:
    """The platform itself: its own device-flow access tokens, checked against its database."""

    name = "this platform"

    def __init__(self, verify: Callable[[str], Account]) -> None:
        self._verify = verify

    def owns(self, credential: str) -> bool | None:
        return credential.startswith(SELF_MARK)

    def check(self, credential: str, http: httpx.Client, deadline: Deadline) -> Account:
        return self._verify(credential)


def check_credential(
    providers: Sequence[Provider], credential: str, http: httpx.Client, deadline: Deadline | None = None
) -> Account:
    """The account behind `credential`, asked of the provider it belongs to (or each that may own it).
    `Unavailable` if no provider accepted it and one could not be asked: it might have."""
    deadline = deadline or Deadline()
    verdicts = [(provider, provider.owns(credential)) for provider in providers]
    sure = [provider for provider, owns in verdicts if owns is True]
    asked = sure[:1] or [provider for provider, owns in verdicts if owns is None]
    if not asked:
        raise ProviderRefused(
            "credential: no identity provider of this platform takes a credential of this kind"
        )
    failures: list[str] = []
    refusals: list[str] = []
    for provider in asked:
        try:
            return provider.check(credential, http, deadline)
        except ProviderRefused as exc:
            refusals.append(str(exc))
        except Unavailable as exc:
            failures.append(str(exc))
    if failures:
        raise Unavailable("; ".join(failures))
    if len(refusals) == 1:
        raise ProviderRefused(
            refusals[0] if refusals[0].startswith("credential:") else f"credential: {refusals[0]}"
        )
    raise ProviderRefused(f"credential: refused by {', '.join(p.name for p in asked)}")
