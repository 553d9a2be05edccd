"""Passwords for the platform's own sign-in pages: salted scrypt (hashlib), never the password itself.

A password has little entropy, unlike an API key, so it gets a slow, memory-hard hash: n=2**14, r=8, p=1
(16 MiB and some tens of milliseconds a check), a 16-byte salt of its own. The stored form names its
parameters, so they can be raised later without breaking the digests already kept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from sqlalchemy.orm import Session

from yardstick.core.admin import AdminError, user

SCHEME = "scrypt"
N, R, P = 2**14, 8, 1
DIGEST_BYTES = 32
MIN_LENGTH = 8
MAX_LENGTH = 1024  # scrypt takes any length; a bound keeps a sign-in form from being a hashing service


class PasswordRefused(ValueError):
    """A password that may not be set; the message says which rule it breaks."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode(), salt=salt, n=n, r=r, p=p, dklen=DIGEST_BYTES, maxmem=256 * n * r + 1024 * 1024
    )


def check_rules(password: str) -> None:
    if len(password) < MIN_LENGTH:
        raise PasswordRefused(f"a password has at least {MIN_LENGTH} characters")
    if len(password) > MAX_LENGTH:
        raise PasswordRefused(f"a password has at most {MAX_LENGTH} characters")


def hash_password(password: str) -> str:
    """`scrypt$n$r$p$salt$digest` (base64), for `users.password_digest`."""
    check_rules(password)
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, N, R, P)
    return f"{SCHEME}${N}${R}${P}${_b64(salt)}${_b64(digest)}"


# Checked when the login names no user or a user without a password, so the answer takes as long either way
# and does not tell which logins exist. Its salt and digest never matter (no password passes it), only its
# parameters: so it is written out, not hashed when the module loads.
_DECOY = f"{SCHEME}${N}${R}${P}${_b64(bytes(16))}${_b64(bytes(DIGEST_BYTES))}"


def verify_password(password: str, stored: str | None) -> bool:
    if len(password) > MAX_LENGTH:
        return False
    try:
        scheme, n, r, p, salt, digest = (stored or _DECOY).split("$")
        if scheme != SCHEME:
            return False
        found = _scrypt(password, base64.b64decode(salt), int(n), int(r), int(p))
    except ValueError:
        return False
    return hmac.compare_digest(found, base64.b64decode(digest)) and stored is not None


def set_password(session: Session, login: str, password: str) -> None:
    """A user's password for the platform's sign-in page (an administrator's action): its salted scrypt
    digest is kept, never itself."""
    try:
        user(session, login).password_digest = hash_password(password)
    except PasswordRefused as exc:
        raise AdminError(f"password: {exc}") from None
