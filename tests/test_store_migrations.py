"""The migrations build exactly the tables the models describe, on SQLite and PostgreSQL, and 0005 carries
an install's runs over: who a run was for, why it failed, its endpoints and its episodes' caps."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from yardstick.store.db import Database
from yardstick.store.models import Base, Run, RunEpisode


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.close()


def test_the_migrations_build_what_the_models_describe(db: Database) -> None:
    db.upgrade()
    with db.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


def test_migration_0005_carries_runs_over(db: Database) -> None:
    db.upgrade("0004")
    with db.engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO orgs (id, slug, name, plan, submissions_per_day, "
                "concurrent_submissions, may_compose, on_exhausted, billing_mode, created_at) "
                "VALUES (1, 'lab', 'lab', 'standard', 5, 5, true, 'block', 'packaged', "
                "CURRENT_TIMESTAMP)"
            )
        )
        connection.execute(
            sa.text(
                "INSERT INTO users (id, login, is_admin, created_at) "
                "VALUES (1, 'ada', false, CURRENT_TIMESTAMP)"
            )
        )
        resolved = {
            "tasks": [
                {
                    "cap_per_episode_sec": 3,
                    "endpoints": [
                        {"name": "a", "kind": "served", "wire": "websocket", "spec": "rows", "episodes": 1},
                        {"name": "b", "kind": "remote", "wire": "grpc", "address": {"host": "h", "port": 9}},
                    ],
                }
            ]
        }
        for run_id, request_type, reason in (
            (11, "nebius_competition", None),
            (12, "private_eval", "latency_budget_exceeded"),
        ):
            connection.execute(
                sa.text(
                    "INSERT INTO submissions (id, org_id, user_id, plan_digest, plan, resolved, sampled, "
                    "request_type, status, reason_code, episodes_total, episodes_done, received_at) VALUES "
                    "(:id, 1, 1, 'd', '{}', :resolved, false, :request_type, 'errored', :reason, 1, 0, "
                    "CURRENT_TIMESTAMP)"
                ),
                {
                    "id": run_id,
                    "resolved": json.dumps(resolved),
                    "request_type": request_type,
                    "reason": reason,
                },
            )
            connection.execute(
                sa.text(
                    'INSERT INTO episodes (id, submission_id, "index", task_pos, task_id, benchmark_task, '
                    "endpoint, trial, seed, state, attempt) VALUES (:id, :run, 0, 0, 't', 't', 'a', 0, 0, "
                    "'queued', 0)"
                ),
                {"id": run_id * 10, "run": run_id},
            )
    db.upgrade()
    with db.reading() as session:
        public, private = (session.get(Run, run_id) for run_id in (11, 12))
        assert public is not None and private is not None
        assert (public.audience, public.failure, public.contract) == ("public", None, "positronic")
        assert (private.audience, private.failure) == ("org", "policy_timeout")
        assert private.endpoints == {
            "a": {"kind": "served", "wire": "websocket", "address": None, "spec": "rows"},
            "b": {"kind": "remote", "wire": "grpc", "address": {"host": "h", "port": 9}, "spec": None},
        }
        episode = session.get(RunEpisode, 120)
        assert episode is not None and episode.cap_s == 3.0
