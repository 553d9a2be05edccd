"""audit events: every change made through the doors, append-only, numbered in order

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=True),
        sa.Column("user_id", sa.BigInteger(), nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("actor_key", sa.String(length=32), nullable=True),
        sa.Column("door", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=120), nullable=False),
        sa.Column("target", sa.String(length=300), nullable=True),
        sa.Column("method", sa.String(length=8), nullable=False),
        sa.Column("path", sa.String(length=1000), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_events_org_id_id", "audit_events", ["org_id", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_audit_events_org_id_id", table_name="audit_events")
    op.drop_table("audit_events")
