"""hosted code: benchmarks and policies an org registers with their code, their versions, and sealed secrets

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hosted",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("stopped", sa.Boolean(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("settings_rev", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("org_id", "kind", "name"),
    )
    op.create_index(op.f("ix_hosted_org_id"), "hosted", ["org_id"], unique=False)
    op.create_table(
        "hosted_versions",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("hosted_id", sa.BigInteger(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("code_sha256", sa.String(length=64), nullable=False),
        sa.Column("tree_sha256", sa.String(length=64), nullable=False),
        sa.Column("handler_ref", sa.String(length=300), nullable=False),
        sa.Column("folder", sa.String(length=500), nullable=False),
        sa.Column("declared", sa.JSON(), nullable=False),
        sa.Column("checked", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("built_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["hosted_id"], ["hosted.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("hosted_id", "number"),
    )
    op.create_index(op.f("ix_hosted_versions_hosted_id"), "hosted_versions", ["hosted_id"], unique=False)
    op.create_table(
        "secrets",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("env_keys", sa.JSON(), nullable=False),
        sa.Column("sealed", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("org_id", "name"),
    )
    op.create_index(op.f("ix_secrets_org_id"), "secrets", ["org_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_secrets_org_id"), table_name="secrets")
    op.drop_table("secrets")
    op.drop_index(op.f("ix_hosted_versions_hosted_id"), table_name="hosted_versions")
    op.drop_table("hosted_versions")
    op.drop_index(op.f("ix_hosted_org_id"), table_name="hosted")
    op.drop_table("hosted")
