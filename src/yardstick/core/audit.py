"""The install's audit log: who changed what through which door, and when, append-only.

Every change a door accepts (a request that writes, answered below 400, by a caller with a key) is one
`AuditEvent`, written as its answer starts, before the caller hears it: a deploy, a removal, a secret set,
an eval filed or cancelled, a Positronic plan submitted. Nothing updates or deletes a row, and ids count
up, so the log reads newest first and pages by id (`before`). A member reads their orgs' events (`seq
audit`); the operator reads the whole install (`yardstick admin audit`). Values never enter it: a secret's
name does, the path does, never a body.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select

from yardstick.store.db import Database
from yardstick.store.models import AuditEvent

__all__ = ["MAX_PAGE", "Audit", "Change"]

MAX_PAGE = 200


@dataclass(frozen=True)
class Change:
    """One accepted change, as the door saw it."""

    org_id: int | None
    user_id: int | None
    actor: str
    actor_key: str | None
    door: str
    action: str
    target: str | None
    method: str
    path: str
    status: int


class Audit:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, change: Change) -> None:
        with self.db.writing() as session:
            session.add(
                AuditEvent(
                    org_id=change.org_id,
                    user_id=change.user_id,
                    actor=change.actor[:200],
                    actor_key=change.actor_key,
                    door=change.door,
                    action=change.action[:120],
                    target=change.target[:300] if change.target else None,
                    method=change.method,
                    path=change.path[:1000],
                    status=change.status,
                )
            )

    def page(
        self,
        org_ids: frozenset[int] | None,
        *,
        user_id: int | None = None,
        limit: int = 50,
        before: int | None = None,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """The newest `limit` events before id `before` (all of them: None), of `org_ids` and the user's own
        that name no org (None: the whole install's), and the id to page on from, None at the end."""
        query = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(max(1, min(limit, MAX_PAGE)) + 1)
        if org_ids is not None:
            mine = AuditEvent.org_id.is_(None) & (AuditEvent.user_id == user_id)
            query = query.where(or_(AuditEvent.org_id.in_(org_ids), mine))
        if before is not None:
            query = query.where(AuditEvent.id < before)
        with self.db.reading() as session:
            rows = list(session.execute(query).scalars())
        shown = rows[: max(1, min(limit, MAX_PAGE))]
        more = len(rows) > len(shown)
        return [_shown(row) for row in shown], shown[-1].id if more and shown else None


def _shown(row: AuditEvent) -> dict[str, Any]:
    at = row.at if row.at.tzinfo is not None else row.at.replace(tzinfo=dt.UTC)
    return {
        "id": row.id,
        "created_at": at.isoformat(),
        "action": row.action,
        "target": row.target,
        "actor_kind": "user",
        "actor_email": row.actor,
        "actor_key": row.actor_key,
        "org_id": row.org_id,
        "door": row.door,
        "detail": {"method": row.method, "path": row.path, "status": row.status},
    }
