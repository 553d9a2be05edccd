"""Create-once by a caller's transaction key: the first call creates, a replay answers what the first made,
and two calls racing on one key (the unique constraint on the key decides) answer the winner's row."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from yardstick.store.db import Database

T = TypeVar("T")


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
