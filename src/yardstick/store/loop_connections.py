"""Each event loop's own database connection, for short reads answered on the loop itself.

A plain-`def` route costs a trip to a route thread and back, and the threads then take turns at the one GIL:
on a busy gateway that trip costs more than a short read. A read asked on every call of a route can instead be
answered on the event loop, on a connection that loop alone uses:

- SQLite: the statement runs inline. In WAL mode a reader never waits for a writer, so the loop is held only
  for the statement itself (tens of microseconds for an indexed read).
- PostgreSQL: an asynchronous psycopg connection (autocommit), awaited, so the loop serves other requests
  while the server answers. Its statements queue on that one connection, one round trip each.

A connection that broke (the server restarted) fails the read it was in and is replaced on the next.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from sqlalchemy import Engine

# How long a new PostgreSQL connection may take to open before the read fails.
CONNECT_TIMEOUT_S = 10


class LoopConnections:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sqlite = engine.dialect.name == "sqlite"
        # By loop, weakly: a loop that is gone takes its connection with it.
        self._open: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    async def rows(self, sql: str, arguments: Any) -> list[tuple[Any, ...]]:
        """`sql`'s rows with `arguments` bound (in the driver's own form), on this loop's connection."""
        loop = asyncio.get_running_loop()
        if self._sqlite:
            connection = self._open.get(loop)
            if connection is None:
                connection = self._open[loop] = self._sqlite_connection()
            cursor = connection.cursor()
            try:
                cursor.execute(sql, arguments)
                return [tuple(row) for row in cursor.fetchall()]
            finally:
                cursor.close()
        connection = self._open.get(loop)
        if connection is None or connection.closed:
            connection = self._open[loop] = await self._postgresql_connection()
        try:
            async with connection.cursor() as cursor:
                await cursor.execute(sql, arguments)
                return [tuple(row) for row in await cursor.fetchall()]
        except Exception:
            if connection.broken:
                self._open.pop(loop, None)
                connection.pgconn.finish()
            raise

    def close(self) -> None:
        """Close every loop's connection (from any thread: the loops may have stopped)."""
        for connection in list(self._open.values()):
            if self._sqlite:
                connection.close()
            else:
                connection.pgconn.finish()  # the socket, synchronously; the object is then closed
        self._open.clear()

    def _sqlite_connection(self) -> Any:
        # One of the engine's connections (opened with the engine's pragmas), taken out of its pool for good.
        connection = self._engine.raw_connection()
        connection.detach()
        return connection

    async def _postgresql_connection(self) -> Any:
        import psycopg

        url = self._engine.url.set(drivername="postgresql")
        return await psycopg.AsyncConnection.connect(
            url.render_as_string(hide_password=False), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
        )
