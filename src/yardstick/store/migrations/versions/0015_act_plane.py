"""act plane: robot keys to one deployment, the workers serving deployments to robots, and robots' seats

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 06:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "robot_keys",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("hosted_id", sa.BigInteger(), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("last_four", sa.String(length=4), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["hosted_id"], ["hosted.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("prefix"),
    )
    op.create_index("ix_robot_keys_org_id", "robot_keys", ["org_id"])
    op.create_index("ix_robot_keys_hosted_id", "robot_keys", ["hosted_id"])
    op.create_table(
        "act_workers",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("hosted_id", sa.BigInteger(), nullable=False),
        sa.Column("version_id", sa.BigInteger(), nullable=False),
        sa.Column("claimed_by", sa.String(length=200), nullable=True),
        sa.Column("url", sa.String(length=200), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("why_ended", sa.String(length=500), nullable=True),
        sa.ForeignKeyConstraint(["hosted_id"], ["hosted.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["version_id"], ["hosted_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_act_workers_hosted_id", "act_workers", ["hosted_id"])
    op.create_table(
        "act_seats",
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("hosted_id", sa.BigInteger(), nullable=False),
        sa.Column("worker_id", sa.BigInteger(), nullable=True),
        sa.Column("robot_key_id", sa.BigInteger(), nullable=True),
        sa.Column("api_key_digest", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kept_until", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["hosted_id"], ["hosted.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["worker_id"], ["act_workers.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["robot_key_id"], ["robot_keys.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session"),
    )
    op.create_index("ix_act_seats_hosted_id", "act_seats", ["hosted_id"])
    op.create_index("ix_act_seats_robot_key_id", "act_seats", ["robot_key_id"])


def downgrade() -> None:
    op.drop_index("ix_act_seats_robot_key_id", table_name="act_seats")
    op.drop_index("ix_act_seats_hosted_id", table_name="act_seats")
    op.drop_table("act_seats")
    op.drop_index("ix_act_workers_hosted_id", table_name="act_workers")
    op.drop_table("act_workers")
    op.drop_index("ix_robot_keys_hosted_id", table_name="robot_keys")
    op.drop_index("ix_robot_keys_org_id", table_name="robot_keys")
    op.drop_table("robot_keys")
