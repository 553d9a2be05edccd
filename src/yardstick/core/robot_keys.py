"""Robot keys: a robot's own key to one deployment, minted once, shown once, stored as every key is.

A robot key (`seq_robot_…`) may reach one deployment's act plane (connect, ready, keepalive, release, the
worker's acts) and label that deployment's episodes: nothing else of the API, and no other deployment.
Revoked, it is refused at its next call on either plane — the seats it holds go with it, so the worker that
served them answers the robot's next act 401 and the SDK's reconnect meets the gateway's refusal.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Final

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from yardstick.core.keys import random_body
from yardstick.store.models import ActSeat, Hosted, RobotKey, utcnow

__all__ = [
    "ROBOT_KEY_MARK",
    "MintedRobotKey",
    "RobotCaller",
    "authenticate",
    "find",
    "is_robot_key",
    "listed",
    "mint",
    "revoke",
]

ROBOT_KEY_MARK: Final = "seq_robot_"
PREFIX_LEN: Final = 19  # the mark and 9 characters: enough to find the row, too few to matter


@dataclass(frozen=True)
class MintedRobotKey:
    plaintext: str
    id: int
    deployment: str


@dataclass(frozen=True)
class RobotCaller:
    """A robot that presented a live key: the deployment it may reach and the org that owns it."""

    key_id: int
    org_id: int
    hosted_id: int


def _digest(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def is_robot_key(bearer: str) -> bool:
    return bearer.startswith(ROBOT_KEY_MARK)


def mint(session: Session, hosted: Hosted) -> MintedRobotKey:
    """A new key to `hosted`; the only time its plaintext exists."""
    plaintext = ROBOT_KEY_MARK + random_body()
    row = RobotKey(
        org_id=hosted.org_id,
        hosted_id=hosted.id,
        prefix=plaintext[:PREFIX_LEN],
        digest=_digest(plaintext),
        last_four=plaintext[-4:],
    )
    session.add(row)
    session.flush()
    return MintedRobotKey(plaintext, row.id, hosted.name)


def authenticate(session: Session, plaintext: str) -> RobotCaller | None:
    """The robot whose live key `plaintext` is; None for any other string (compared in constant time)."""
    if not is_robot_key(plaintext) or len(plaintext) < PREFIX_LEN + 8:
        return None
    row = session.execute(
        select(RobotKey).where(RobotKey.prefix == plaintext[:PREFIX_LEN])
    ).scalar_one_or_none()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.digest, _digest(plaintext)):
        return None
    return RobotCaller(row.id, row.org_id, row.hosted_id)


def listed(session: Session, org_ids: frozenset[int]) -> list[tuple[RobotKey, Hosted, list[ActSeat]]]:
    """The live robot keys of `org_ids`, oldest first, each with its deployment and the live seats it holds
    (its robots connected now)."""
    rows = session.execute(
        select(RobotKey, Hosted)
        .join(Hosted, Hosted.id == RobotKey.hosted_id)
        .where(RobotKey.org_id.in_(org_ids), RobotKey.revoked_at.is_(None))
        .order_by(RobotKey.created_at, RobotKey.id)
    ).all()
    seats: dict[int, list[ActSeat]] = {}
    ids = [key.id for key, _ in rows]
    if ids:
        live = select(ActSeat).where(ActSeat.robot_key_id.in_(ids), ActSeat.kept_until > utcnow())
        for seat in session.execute(live).scalars():
            seats.setdefault(int(seat.robot_key_id or 0), []).append(seat)
    return [(key, hosted, seats.get(key.id, [])) for key, hosted in rows]


def find(session: Session, org_ids: frozenset[int], ref: str) -> list[RobotKey]:
    """The live keys of `org_ids` that `ref` names: by id, or by last four."""
    query = select(RobotKey).where(RobotKey.org_id.in_(org_ids), RobotKey.revoked_at.is_(None))
    if ref.isdigit() and len(ref) > 4:
        return list(session.execute(query.where(RobotKey.id == int(ref))).scalars())
    return list(session.execute(query.where(RobotKey.last_four == ref)).scalars())


def revoke(session: Session, key: RobotKey) -> None:
    """Revoke `key` now, and give back every seat it holds: its robot is refused at its next call."""
    key.revoked_at = utcnow()
    session.execute(delete(ActSeat).where(ActSeat.robot_key_id == key.id))
