"""Create-once by a caller's transaction key: the first call creates, a replay answers what the first made,
and two calls racing on one key (the unique constraint on the key decides) answer the winner's row. A replay
is told from another request under the same key by `request_digest`, the one digest every door files."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from yardstick.store.db import Database

__all__ = ["create_once", "request_digest"]

T = TypeVar("T")


def request_digest(document: Mapping[str, Any]) -> str:
    """The sha256 of a request as its door read it (a JSON document, its keys sorted): the same request sent
    again digests the same, whatever order its fields came in."""
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def create_once(
    db: Database, *, earlier: Callable[[Session], T | None], create: Callable[[Session], T]
) -> tuple[T, bool]:
    """`(row, True)` from `create` in a new transaction, or `(row, False)` where `earlier` finds what the same
    key made before. `earlier` refuses (raises) a key that made something else; `create` runs in the same
    transaction as the `earlier` that found nothing."""
    try:
        with db.writing() as session:
            found = earlier(session)
            if found is not None:
                return found, False
            return create(session), True
    except IntegrityError:
        # Another call with the same key committed between our look and our insert: answer as a replay.
        with db.reading() as session:
            found = earlier(session)
        if found is None:
            raise
        return found, False
