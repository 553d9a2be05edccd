"""The database handle: SQLite by default (a file under the data directory), PostgreSQL by URL.

Reads begin deferred; writes that must not race (leasing episodes, admitting a submission under its quota)
use `writing()`, which on SQLite takes the single write lock up front (BEGIN IMMEDIATE, so two writers
never deadlock upgrading a read lock) and on PostgreSQL is an ordinary transaction whose row locks
(`SELECT … FOR UPDATE [SKIP LOCKED]`) do the serializing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Executable, Row, create_engine, event
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session, sessionmaker

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
        else:
            options.update(pool_pre_ping=True)
        self.engine: Engine = create_engine(self.url, **options)
        if self.is_sqlite:
            _sqlite_semantics(self.engine)
        self._reader = sessionmaker(self.engine, expire_on_commit=False)
        self._writer = sessionmaker(self.engine.execution_options(immediate=True), expire_on_commit=False)

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

    def rows(self, statement: Executable, params: Mapping[str, Any]) -> Sequence[Row[Any]]:
        """A Core statement's rows, read on a pooled connection of its own (or in the `one_read` session of
        this thread): for a hot read of columns, where an ORM session would cost as much as the query."""
        shared = _one_read.get()
        if shared is not None and shared[0] is self:
            return shared[1].execute(statement, params).all()
        with _text_refused(), self.engine.connect() as connection:
            return connection.execute(statement, params).all()

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
