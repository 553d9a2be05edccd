"""The Sequences contract's paging: `limit` rows from the `cursor` the previous page handed out, each page
saying where it starts (`offset`) and how many rows match (`total`). The cursor is the next page's offset, as
the contract's own examples show; the window is the core's (`core.paging.Window`)."""

from __future__ import annotations

from typing import Any

from yardstick.core.paging import Window
from yardstick.core.refusals import bad_request

__all__ = ["shown", "start", "window"]


def start(cursor: str | None) -> int:
    """Where a page starts: the `cursor` the previous page handed out, refused naming it otherwise."""
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 12:
        raise bad_request(f"cursor: {cursor!r} is not a cursor this list handed out")
    return int(cursor)


def window(cursor: str | None, limit: int, total: int, *, cap: int) -> Window:
    """The page `cursor` and `limit` ask for (`limit` clamped to `cap`) of a list of `total` rows."""
    return Window(start(cursor), min(limit, cap), total)


def shown(page: Window) -> dict[str, Any]:
    """The paging fields of an answer: `total`, `offset` and `next_cursor` (None on the last page)."""
    following = page.next_offset
    return {
        "total": page.total,
        "offset": page.offset,
        "next_cursor": None if following is None else str(following),
    }
