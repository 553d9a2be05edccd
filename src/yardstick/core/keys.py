"""API keys: minted once, shown once, stored as a prefix (to find the row) and a SHA-256 (to check it).

A key is 32 random bytes, so a fast hash is as strong as a slow one would be; the prefix is not secret.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.store.models import ApiKey, utcnow

KEY_MARK = "ys_"
PREFIX_LEN = 12  # the mark and 9 characters: enough to find the row, too few to matter
_ALPHANUMERIC = string.ascii_letters + string.digits


def random_body(length: int = 43) -> str:
    """A key's secret part: letters and digits only (43 of them: 256 bits), so any piece of it, its last
    four most of all, is a name the Sequences CLI takes (`seq robot key revoke NAME …abcd` refuses what
    begins with '-' or '_', which token_urlsafe draws one time in sixteen)."""
    return "".join(secrets.choice(_ALPHANUMERIC) for _ in range(length))


@dataclass(frozen=True)
class MintedKey:
    plaintext: str
    prefix: str
    id: int


def digest(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def mint(session: Session, user_id: int, label: str = "") -> MintedKey:
    """A new key for `user_id`; the only time its plaintext exists."""
    plaintext = KEY_MARK + secrets.token_urlsafe(32)
    row = ApiKey(user_id=user_id, prefix=plaintext[:PREFIX_LEN], digest=digest(plaintext), label=label)
    session.add(row)
    session.flush()
    return MintedKey(plaintext, row.prefix, row.id)


def lookup(session: Session, plaintext: str) -> ApiKey | None:
    """The live key `plaintext` is, or None (unknown, wrong or revoked), in constant time per candidate."""
    if not plaintext.startswith(KEY_MARK) or len(plaintext) < PREFIX_LEN + 8:
        return None
    row = session.execute(select(ApiKey).where(ApiKey.prefix == plaintext[:PREFIX_LEN])).scalar_one_or_none()
    if row is None or row.revoked_at is not None:
        return None
    return row if hmac.compare_digest(row.digest, digest(plaintext)) else None


def revoke(session: Session, key_id: int) -> bool:
    row = session.get(ApiKey, key_id)
    if row is None or row.revoked_at is not None:
        return False
    row.revoked_at = utcnow()
    return True
