"""credits: billing mode and quota behaviour of orgs, billing roles, balances, the ledger, reservations,
purchases

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 21:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("orgs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("on_exhausted", sa.String(length=16), nullable=False, server_default="block")
        )
        batch_op.add_column(
            sa.Column("billing_mode", sa.String(length=32), nullable=False, server_default="packaged")
        )
    with op.batch_alter_table("memberships", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("billing_role", sa.String(length=16), nullable=False, server_default="none")
        )

    op.create_table(
        "credit_accounts",
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("posted_units", sa.BigInteger(), nullable=False),
        sa.Column("reserved_units", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("org_id"),
    )
    op.create_table(
        "credit_entries",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("units", sa.BigInteger(), nullable=False),
        sa.Column("submission_id", sa.BigInteger(), nullable=True),
        sa.Column("purchase_id", sa.String(length=64), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_credit_entries_org_at", "credit_entries", ["org_id", "created_at"], unique=False)
    op.create_table(
        "reservations",
        sa.Column("submission_id", sa.BigInteger(), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("quote", sa.JSON(), nullable=False),
        sa.Column("reserved_units", sa.BigInteger(), nullable=False),
        sa.Column("charged_units", sa.BigInteger(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("submission_id"),
    )
    op.create_index(op.f("ix_reservations_org_id"), "reservations", ["org_id"], unique=False)
    op.create_table(
        "purchases",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("initiated_by", sa.BigInteger(), nullable=False),
        sa.Column("transaction_key", sa.String(length=200), nullable=False),
        sa.Column("package", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("checkout_url", sa.Text(), nullable=True),
        sa.Column("review_reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["initiated_by"], ["users.id"]),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("org_id", "transaction_key"),
    )
    op.create_index(op.f("ix_purchases_org_id"), "purchases", ["org_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_purchases_org_id"), table_name="purchases")
    op.drop_table("purchases")
    op.drop_index(op.f("ix_reservations_org_id"), table_name="reservations")
    op.drop_table("reservations")
    op.drop_index("ix_credit_entries_org_at", table_name="credit_entries")
    op.drop_table("credit_entries")
    op.drop_table("credit_accounts")
    with op.batch_alter_table("memberships", schema=None) as batch_op:
        batch_op.drop_column("billing_role")
    with op.batch_alter_table("orgs", schema=None) as batch_op:
        batch_op.drop_column("billing_mode")
        batch_op.drop_column("on_exhausted")
