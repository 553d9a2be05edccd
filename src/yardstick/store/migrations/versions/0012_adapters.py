"""adapters: an org's registered @seq.adapter classes and their versions (one file each)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 11:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "adapters",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column("org_id", sa.BigInteger(), sa.ForeignKey("orgs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("last_eval", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("org_id", "name"),
    )
    op.create_index("ix_adapters_org_id", "adapters", ["org_id"])
    op.create_table(
        "adapter_versions",
        sa.Column("id", sa.BigInteger(), primary_key=True),
        sa.Column(
            "adapter_id", sa.BigInteger(), sa.ForeignKey("adapters.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("class_name", sa.String(200), nullable=False),
        sa.Column("handler_ref", sa.String(300), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("pairs", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("adapter_id", "number"),
    )
    op.create_index("ix_adapter_versions_adapter_id", "adapter_versions", ["adapter_id"])


def downgrade() -> None:
    op.drop_table("adapter_versions")
    op.drop_table("adapters")
