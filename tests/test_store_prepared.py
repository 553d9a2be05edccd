"""A prepared read (`Database.rows_on_loop`, on an event loop's own connection) answers as the ORM would on
SQLite and PostgreSQL: the same rows, text refused by the same rule, times bound as the models store them, and
statements it cannot run as the ORM would refused when it is made."""

from __future__ import annotations

import asyncio
import datetime as dt

import psycopg
import pytest
from sqlalchemy import bindparam, func, select

from conftest import PG_URL
from yardstick.store.db import Database
from yardstick.store.models import Org, QuotaEvent, Run, User
from yardstick.store.prepared import NotPreparable, PreparedRead
from yardstick.store.states import QuotaKind
from yardstick.store.text import UnstorableText


@pytest.fixture
def db(migrated_db: Database) -> Database:
    return migrated_db


def _org_with_events(db: Database, ats: list[dt.datetime]) -> tuple[int, int]:
    with db.writing() as session:
        org, user = Org(slug="acme"), User(login="alice")
        session.add_all([org, user])
        session.flush()
        run = Run(org_id=org.id, user_id=user.id, plan_digest="x", plan={}, resolved={}, episodes_total=1)
        session.add(run)
        session.flush()
        session.add_all(
            QuotaEvent(user_id=user.id, org_id=org.id, submission_id=run.id, kind=QuotaKind.CHARGE, at=at)
            for at in ats
        )
        return org.id, user.id


EVENTS_SINCE = (
    select(Org.slug, func.count(QuotaEvent.id))
    .join(QuotaEvent, QuotaEvent.org_id == Org.id)
    .where(
        QuotaEvent.user_id == bindparam("user_id"),
        QuotaEvent.at >= bindparam("since"),
        QuotaEvent.kind == QuotaKind.CHARGE,  # a constant, bound once when the read is prepared
    )
    .group_by(Org.slug)
)


def test_a_prepared_read_counts_what_the_orm_counts(db: Database) -> None:
    noon = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
    _, user_id = _org_with_events(db, [noon - dt.timedelta(hours=h) for h in (0, 1, 30)])
    for since, expected in ((noon - dt.timedelta(hours=2), 2), (noon - dt.timedelta(days=2), 3)):
        params = {"user_id": user_id, "since": since}
        with db.reading() as session:
            assert [tuple(r) for r in session.execute(EVENTS_SINCE, params)] == [("acme", expected)]
        assert asyncio.run(db.rows_on_loop(EVENTS_SINCE, params)) == [("acme", expected)]
    assert asyncio.run(db.rows_on_loop(EVENTS_SINCE, {"user_id": user_id + 1, "since": noon})) == []


def test_reads_on_a_loop_share_its_connection_and_a_broken_one_is_replaced(db: Database) -> None:
    _org_with_events(db, [])
    by_slug = select(Org.slug).where(Org.slug == bindparam("slug"))

    async def reads() -> None:
        together = await asyncio.gather(*(db.rows_on_loop(by_slug, {"slug": "acme"}) for _ in range(20)))
        assert together == [[("acme",)]] * 20
        if db.is_sqlite:
            return
        # The server drops the loop's connection: the read in flight fails, the next one reconnects.
        own_pid = (await db.rows_on_loop(select(func.pg_backend_pid()), {}))[0][0]
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (own_pid,))
        with pytest.raises(psycopg.OperationalError):
            await db.rows_on_loop(by_slug, {"slug": "acme"})
        assert await db.rows_on_loop(by_slug, {"slug": "acme"}) == [("acme",)]

    asyncio.run(reads())


def test_a_prepared_read_refuses_text_as_a_column_does_and_wants_every_parameter(db: Database) -> None:
    by_slug = select(Org.id).where(Org.slug == bindparam("slug"))
    with pytest.raises(UnstorableText) as refused:
        asyncio.run(db.rows_on_loop(by_slug, {"slug": "a\x00b"}))
    assert refused.value.field == "slug" and "NUL" in refused.value.rule
    with pytest.raises(TypeError, match="slug"):
        asyncio.run(db.rows_on_loop(by_slug, {"name": "acme"}))


def test_a_column_whose_values_need_processing_is_refused_when_prepared(db: Database) -> None:
    with pytest.raises(NotPreparable, match="'at'"):
        PreparedRead(db.engine.dialect, select(QuotaEvent.at))
