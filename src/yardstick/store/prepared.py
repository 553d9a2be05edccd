"""A hot read of plain columns, compiled once for the driver to run as it is.

SQLAlchemy's work around one execution (its transaction and its events, the compiled-cache lookup, the
parameter and result machinery) costs about 300 us here, against 20 us for the same statement on a bare
`sqlite3` cursor. For a read asked on every call of a route (`users.me` counts its quotas afresh each time)
that is most of the request. A `PreparedRead` does that work once: it compiles the statement for the
database's dialect, processes its constant parameters and keeps each bind's processor (so a text column
still refuses what it cannot store, and a time is stored as the models store it); a call processes the
given parameters into the driver's own form, which a connection runs with the SQL
(`store.loop_connections`, on the event loop's own connection).

It takes only statements whose results need no processing (counts, numbers, plain text): the driver's
values are what the ORM would give. One statement runs alone, outside any transaction of its own, and
still reads one consistent snapshot on either database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Dialect, Select


class NotPreparable(ValueError):
    """A statement a `PreparedRead` cannot run as the ORM would; the message names the column or parameter
    and why."""


class PreparedRead:
    """One statement compiled for `dialect`: its SQL (`sql`) and, for each call, its arguments in
    the driver's own form (`arguments`), for a connection to run (`store.loop_connections`)."""

    def __init__(self, dialect: Dialect, statement: Select[Any]) -> None:
        for column in statement.selected_columns:
            if column.type.result_processor(dialect, None) is not None:
                raise NotPreparable(f"column {column.name!r}: its values need processing ({column.type!r})")
        compiled = statement.compile(dialect=dialect)
        self.sql = str(compiled)
        self._order: Sequence[str] | None = compiled.positiontup if compiled.positional else None
        self._processors: dict[str, Callable[[Any], Any]] = {}
        self._fixed: dict[str, Any] = {}
        self._asked: set[str] = set()
        rendered = set(compiled.bind_names.values())  # `binds` also holds each anonymous bind's own key
        for name, bind in compiled.binds.items():
            if name not in rendered:
                continue
            if bind.expanding:
                raise NotPreparable(f"parameter {name!r}: an expanding IN list is compiled per call")
            processor = bind.type.bind_processor(dialect)
            if bind.value is not None or not bind.required:
                self._fixed[name] = processor(bind.value) if processor else bind.value
            else:
                self._asked.add(name)
                if processor is not None:
                    self._processors[name] = processor

    def arguments(self, params: Mapping[str, Any]) -> Any:
        """`params` (every parameter the statement leaves open) as the driver takes them with `sql`."""
        if params.keys() != self._asked:
            raise TypeError(f"a PreparedRead takes {sorted(self._asked)}, not {sorted(params)}")
        bound = dict(self._fixed)
        for name, value in params.items():
            processor = self._processors.get(name)
            bound[name] = processor(value) if processor is not None else value
        return [bound[name] for name in self._order] if self._order is not None else bound
