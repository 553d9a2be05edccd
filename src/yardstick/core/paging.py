"""Keyset paging, the one way every list of the platform pages: rows in (time, id) order, a page strictly
after an anchor row, and whether more follow. A row filed while a caller pages lands on a later page, never
before the cursor, and no offset grows with the list."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Select
from sqlalchemy.orm import InstrumentedAttribute, Session


def page_size(limit: int | None, *, default: int, cap: int) -> int:
    """The size of a page asked for with `limit` (None: `default`), clamped to `cap`."""
    return min(default if limit is None else limit, cap)


def keyset_page(
    session: Session,
    query: Select[Any],
    *,
    order: tuple[InstrumentedAttribute[dt.datetime], InstrumentedAttribute[Any]],
    after: tuple[dt.datetime, Any] | None,
    size: int,
) -> tuple[list[Any], bool]:
    """One page of `query`'s rows in `order` (a time column, then a unique tie-breaker), strictly after the
    anchor `after` (its time and id), and whether more rows follow it."""
    when, tie = order
    if after is not None:
        query = query.where((when > after[0]) | ((when == after[0]) & (tie > after[1])))
    rows = list(session.execute(query.order_by(when, tie).limit(size + 1)).scalars())
    return rows[:size], len(rows) > size
