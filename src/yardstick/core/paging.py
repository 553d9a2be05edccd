"""How the platform's lists page, both ways in one place.

- By keyset (`keyset_page`), every list that grows while it is read (runs, purchases, artifacts): rows in
  (time, id) order, a page strictly after an anchor row, and whether more follow. A row filed while a caller
  pages lands on a later page, never before the cursor, and no offset grows with the list. The Positronic
  contract's `after`/`next` are this anchor.
- By key (`key_page`), a run's artifacts: key order, `prefix`, `after` exclusive, and `next` the last key
  of the page (the Positronic contract's `submissions.artifacts`).
- By position (`Window`), where a contract pages so: the Sequences contract's answers carry `offset` and
  `total`, and the cursor it hands back is the next page's offset (its own examples: `"next_cursor": "50"`).
  Its lists are bounded and read whole or counted first (an eval's episodes, an org's benchmarks and
  volumes), so a window of them is the same rows however often it is asked.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import InstrumentedAttribute, Session

T = TypeVar("T")

__all__ = ["Window", "key_page", "keyset_page", "page_size"]


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


@dataclass(frozen=True)
class Window:
    """Rows `offset` to `offset + size` of a list of `total`."""

    offset: int
    size: int
    total: int

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts, or None on the last."""
        end = self.offset + self.size
        return end if end < self.total else None

    def of(self, rows: Sequence[T]) -> list[T]:
        """The window's rows of the whole list."""
        return list(rows[self.offset : self.offset + self.size])


def key_page(
    entries: Sequence[tuple[str, int]],
    *,
    prefix: str | None,
    after: str | None,
    limit: int | None,
    cap: int = 1000,
    default: int = 100,
) -> tuple[list[tuple[str, int]], str | None]:
    """One page of `(key, size)` entries, and the `next` to pass as `after` for the page after it.

    Entries are taken in key order (Python's string order is UTF-8 byte order, as S3 lists), kept to
    those starting with `prefix`, strictly after `after` (which need not be a key that exists), at most
    `limit` of them (`default` when None, clamped to `cap`). `next` is the LAST key of this page when
    more remain, else None: `after` is exclusive, so passing it back resumes at the first unseen key.
    """
    if cap < 1:
        raise ValueError(f"cap must be at least 1, not {cap}")
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit must be a whole number above 0, not {limit!r}")
    size = min(default if limit is None else limit, cap)
    if size < 1:
        raise ValueError(f"default must be at least 1, not {default}")
    rows = sorted(e for e in entries if prefix is None or e[0].startswith(prefix))
    keys = [key for key, _ in rows]
    for earlier, later in pairwise(keys):
        if earlier == later:
            raise ValueError(f"entries list the key {earlier!r} twice")
    start = 0 if after is None else bisect_right(keys, after)
    chunk = rows[start : start + size]
    more = start + size < len(rows)
    return chunk, (chunk[-1][0] if more and chunk else None)
