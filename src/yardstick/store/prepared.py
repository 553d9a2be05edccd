"""A hot read of plain columns, compiled once and run on a pooled DBAPI connection.

SQLAlchemy's work around one execution (its transaction and its events, the compiled-cache lookup, the
parameter and result machinery) costs about 300 us here, against 20 us for the same statement on a bare
`sqlite3` cursor. For a read asked on every call of a route (`users.me` counts its quotas afresh each time)
that is most of the request. A `PreparedRead` does that work once: it compiles the statement for the
database's dialect, processes its constant parameters and keeps each bind's processor (so a text column
still refuses what it cannot store, and a time is stored as the models store it); a call processes the
given parameters, runs the SQL and returns the driver's rows.

It takes only statements whose results need no processing (counts, numbers, plain text): the driver's
values are what the ORM would give. One statement runs alone, outside any transaction of its own (on
PostgreSQL in autocommit for the call), and still reads one consistent snapshot on either database.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Engine, Select


class NotPreparable(ValueError):
    """A statement a `PreparedRead` cannot run as the ORM would; the message names the column or parameter
    and why."""


class PreparedRead:
    """One statement, compiled for `engine`'s database, read on its pool (`rows`) or anywhere the driver's
    own form of its arguments (`sql`, `arguments`) can be run."""

    def __init__(self, engine: Engine, statement: Select[Any]) -> None:
        dialect = engine.dialect
        for column in statement.selected_columns:
            if column.type.result_processor(dialect, None) is not None:
                raise NotPreparable(f"column {column.name!r}: its values need processing ({column.type!r})")
        compiled = statement.compile(dialect=dialect)
        self._engine = engine
        self._postgresql = dialect.name == "postgresql"
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

    def rows(self, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """The statement's rows with `params` bound, on a pooled connection."""
        arguments = self.arguments(params)
        connection = self._engine.raw_connection()
        driver: Any = connection.driver_connection
        # PostgreSQL's driver would open a transaction around the statement (BEGIN, the statement, and the
        # pool's ROLLBACK when it takes the connection back: three round trips where one does).
        autocommit_for_now = self._postgresql and not driver.autocommit
        try:
            if autocommit_for_now:
                driver.autocommit = True
            cursor = connection.cursor()
            try:
                cursor.execute(self.sql, arguments)
                return [tuple(row) for row in cursor.fetchall()]
            finally:
                cursor.close()
        finally:
            if autocommit_for_now and not driver.closed:
                driver.autocommit = False
            connection.close()  # back to the pool
