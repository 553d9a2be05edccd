"""planners: the keys a planner holds for its members, what its rounds read, and its own record

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 19:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "planner_keys",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("planner_id", sa.BigInteger(), nullable=False),
        sa.Column("member", sa.String(length=64), nullable=False),
        sa.Column("member_kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=True),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("last_four", sa.String(length=4), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["planner_id"], ["hosted.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("prefix"),
    )
    op.create_index("ix_planner_keys_org_id", "planner_keys", ["org_id"])
    op.create_index("ix_planner_keys_planner_id", "planner_keys", ["planner_id"])
    op.create_table(
        "planner_records",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
            autoincrement=True,
        ),
        sa.Column("planner_id", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("by", sa.String(length=64), nullable=True),
        sa.Column("data", sa.JSON(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["planner_id"], ["hosted.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_planner_records_planner_id", "planner_records", ["planner_id"])
    op.create_table(
        "planner_states",
        sa.Column("planner_id", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("seen", sa.BigInteger(), nullable=False),
        sa.Column("planned_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["planner_id"], ["hosted.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("planner_id"),
    )


def downgrade() -> None:
    op.drop_table("planner_states")
    op.drop_index("ix_planner_records_planner_id", table_name="planner_records")
    op.drop_table("planner_records")
    op.drop_index("ix_planner_keys_planner_id", table_name="planner_keys")
    op.drop_index("ix_planner_keys_org_id", table_name="planner_keys")
    op.drop_table("planner_keys")
