"""contract-neutral runs: the door a run came through, its endpoints and audience in columns of its own, its
failure as a kind, and each episode's cap

Before this, the platform read a run's endpoints, caps and audience out of the Positronic documents it
stores (`resolved`, `request_type`) and its failure as a Positronic reason code. The values are carried
over: `request_type` nebius_competition -> audience public, private_eval -> org; each reason code to the
failure kind it was written for; endpoints and caps from the resolved plan.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 10:00:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The kind each reason code was written for, when the worker chose codes by itself.
_KIND_OF_REASON = {
    "policy_setup_crash": "policy_setup_crash",
    "policy_inference_crash": "policy_crash",
    "latency_budget_exceeded": "policy_timeout",
    "internal_error": "benchmark_crash",
    "runner_unresponsive": "platform_lost",
}
_REASON_OF_KIND = {kind: reason for reason, kind in _KIND_OF_REASON.items()}

_runs = sa.table(
    "submissions",
    sa.column("id", sa.BigInteger),
    sa.column("resolved", sa.JSON),
    sa.column("endpoints", sa.JSON),
)
_episodes = sa.table(
    "episodes",
    sa.column("id", sa.BigInteger),
    sa.column("submission_id", sa.BigInteger),
    sa.column("task_pos", sa.Integer),
    sa.column("cap_s", sa.Float),
)


def upgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("contract", sa.String(length=16), nullable=False, server_default="positronic")
        )
        batch_op.add_column(sa.Column("endpoints", sa.JSON(), nullable=False, server_default="{}"))
        batch_op.add_column(sa.Column("audience", sa.String(length=16), nullable=False, server_default="org"))
        batch_op.add_column(sa.Column("failure", sa.String(length=32), nullable=True))
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cap_s", sa.Float(), nullable=True))

    op.execute("UPDATE submissions SET audience = 'public' WHERE request_type = 'nebius_competition'")
    for reason, kind in _KIND_OF_REASON.items():
        op.execute(f"UPDATE submissions SET failure = '{kind}' WHERE reason_code = '{reason}'")
    op.execute(
        "UPDATE submissions SET failure = 'platform_lost' WHERE reason_code IS NOT NULL AND failure IS NULL"
    )
    _carry_endpoints_and_caps()

    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_column("request_type")
        batch_op.drop_column("reason_code")


def _carry_endpoints_and_caps() -> None:
    connection = op.get_bind()
    for run_id, resolved in connection.execute(sa.select(_runs.c.id, _runs.c.resolved)).all():
        tasks: list[dict[str, Any]] = list((resolved or {}).get("tasks") or [])
        endpoints = {
            entry["name"]: {key: entry.get(key) for key in ("kind", "wire", "address", "spec")}
            for task in tasks
            for entry in task.get("endpoints") or []
        }
        connection.execute(sa.update(_runs).where(_runs.c.id == run_id).values(endpoints=endpoints))
        for pos, task in enumerate(tasks):
            cap = task.get("cap_per_episode_sec")
            if cap is not None:
                connection.execute(
                    sa.update(_episodes)
                    .where(_episodes.c.submission_id == run_id, _episodes.c.task_pos == pos)
                    .values(cap_s=float(cap))
                )


def downgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("request_type", sa.String(length=32), nullable=False, server_default="private_eval")
        )
        batch_op.add_column(sa.Column("reason_code", sa.String(length=64), nullable=True))
    op.execute("UPDATE submissions SET request_type = 'nebius_competition' WHERE audience = 'public'")
    for kind, reason in _REASON_OF_KIND.items():
        op.execute(f"UPDATE submissions SET reason_code = '{reason}' WHERE failure = '{kind}'")
    op.execute(
        "UPDATE submissions SET reason_code = 'runner_unresponsive' WHERE failure IS NOT NULL"
        " AND reason_code IS NULL"
    )
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_column("cap_s")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_column("failure")
        batch_op.drop_column("audience")
        batch_op.drop_column("endpoints")
        batch_op.drop_column("contract")
