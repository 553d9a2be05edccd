"""The database handle: SQLite by default (a file under the data directory), PostgreSQL by URL.

Reads begin deferred; writes that must not race (leasing episodes, admitting a submission under its quota)
use `writing()`, which on SQLite takes the single write lock up front (BEGIN IMMEDIATE, so two writers
never deadlock upgrading a read lock) and on PostgreSQL is an ordinary transaction whose row locks
(`SELECT … FOR UPDATE [SKIP LOCKED]`) do the serializing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Select, create_engine, event
from sqlalchemy.exc import DisconnectionError, StatementError
from sqlalchemy.orm import Session, sessionmaker

from yardstick.store.loop_connections import LoopConnections
from yardstick.store.prepared import PreparedRead
from yardstick.store.text import UnstorableText

MIGRATIONS = Path(__file__).parent / "migrations"
# The session `Database.one_read` shares, with the database it is of; a context variable, so each thread (and
# each route FastAPI runs in one) has its own.
_one_read: ContextVar[tuple[Database, Session] | None] = ContextVar("yardstick_one_read", default=None)

# Connections a process keeps open: more than the gateway's route threads (`gateway.app.ROUTE_THREADS`) and
# its few others, so a busy gateway never opens a connection per request (a PostgreSQL connection costs
# milliseconds; a SQLite one its pragmas); past it, overflow connections are opened and closed as needed.
POOL_SIZE, POOL_OVERFLOW = 20, 20


def normalize_url(url: str) -> str:
    """`postgresql://…` means psycopg 3 here; a bare path means a SQLite file."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    return url


class Database:
    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        options: dict[str, Any] = {"future": True, "pool_size": POOL_SIZE, "max_overflow": POOL_OVERFLOW}
        if self.is_sqlite:
            options["connect_args"] = {"check_same_thread": False, "timeout": 30}
        self.engine: Engine = create_engine(self.url, **options)
        if self.is_sqlite:
            _sqlite_semantics(self.engine)
        else:
            _pinged_after_idle(self.engine)
        self._reader = sessionmaker(self.engine, expire_on_commit=False)
        self._writer = sessionmaker(self.engine.execution_options(immediate=True), expire_on_commit=False)
        self._prepared: dict[int, tuple[Select[Any], PreparedRead]] = {}
        self._loop_connections = LoopConnections(self.engine)

    @contextmanager
    def reading(self) -> Iterator[Session]:
        shared = _one_read.get()
        if shared is not None and shared[0] is self:
            yield shared[1]  # inside `one_read`: its session
            return
        with _text_refused(), self._reader() as session:
            yield session

    @contextmanager
    def one_read(self) -> Iterator[None]:
        """Every `reading()` in the block, in this thread, shares one session: a read-only route's queries
        in one transaction, which costs one BEGIN and one close where each read would cost its own (as much
        as a small query). Writes (`writing()`) are their own as ever."""
        with self.reading() as session:
            token = _one_read.set((self, session))
            try:
                yield
            finally:
                _one_read.reset(token)

    async def rows_on_loop(self, statement: Select[Any], params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """A Core statement's rows, run as a `PreparedRead` (compiled once for this database) on the calling
        event loop's own connection (`LoopConnections`): for a short read of plain columns in a route served
        on the loop, where a route thread, or SQLAlchemy's work around each execution, costs more than it."""
        prepared = self._prepared_read(statement)
        return await self._loop_connections.rows(prepared.sql, prepared.arguments(params))

    def _prepared_read(self, statement: Select[Any]) -> PreparedRead:
        found = self._prepared.get(id(statement))
        if found is None:
            # Kept beside the statement it was made from, so an id is never reused while it is remembered.
            found = self._prepared[id(statement)] = (statement, PreparedRead(self.engine.dialect, statement))
        return found[1]

    @contextmanager
    def writing(self) -> Iterator[Session]:
        """A transaction that commits when the block ends, and rolls back if it raises."""
        with _text_refused(), self._writer() as session, session.begin():
            yield session

    def upgrade(self, revision: str = "head") -> None:
        """Apply every migration not yet applied (up to `revision`)."""
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.connect() as connection:
            raw = connection.connection.dbapi_connection
            if self.is_sqlite and raw is not None:
                # SQLite alters a table by building a new one and dropping the old: with foreign keys on, the
                # drop would delete every row that refers to it (a run's episodes, its artifacts). The pragma
                # only takes outside a transaction, so it is set on the connection before one begins.
                raw.execute("PRAGMA foreign_keys=OFF")
            try:
                with connection.begin():
                    config.attributes["connection"] = connection
                    command.upgrade(config, revision)
            finally:
                if self.is_sqlite and raw is not None:
                    raw.execute("PRAGMA foreign_keys=ON")

    def close(self) -> None:
        self._loop_connections.close()
        self.engine.dispose()


@contextmanager
def _text_refused() -> Iterator[None]:
    """A value a text column refused (`store.text`) surfaces as itself, not wrapped in SQLAlchemy's
    StatementError, so a caller can tell the caller's bad text from the database's fault."""
    try:
        yield
    except StatementError as exc:
        if isinstance(exc.orig, UnstorableText):
            raise exc.orig from None
        raise


# A pooled PostgreSQL connection that sat unused this long is pinged before it is handed out again.
PING_AFTER_IDLE_S = 1.0


def _pinged_after_idle(engine: Engine) -> None:
    """Ping a connection before reuse only when it sat in the pool past `PING_AFTER_IDLE_S`: one the server
    dropped (a restart, an idle time-out) is replaced before a caller sees it, as SQLAlchemy's pre-ping
    does, without a round trip on every checkout (on a busy gateway, as many as its queries). A connection
    dropped within the second is found by its next statement, which fails once and discards it, as one
    dropped in use always was."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            # The pool discards the connection and hands out another (a new one if need be).
            raise DisconnectionError(f"a pooled connection no longer answered: {exc}") from exc


def _sqlite_semantics(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        # Let SQLAlchemy's begin event issue BEGIN, not pysqlite's own (which it defers past SELECTs).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "foreign_keys=ON", "busy_timeout=30000", "synchronous=NORMAL"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get("immediate")
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
