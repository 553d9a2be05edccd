"""rigs: an org's robots with their rig keys, and the runs that wait for a rig of a shape or are played by one

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04 01:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rigs",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("shape", sa.String(length=16), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("org_id", "name"),
        sa.UniqueConstraint("prefix"),
    )
    op.create_index("ix_rigs_org_id", "rigs", ["org_id"])
    with op.batch_alter_table("submissions") as table:
        table.add_column(sa.Column("rig_shape", sa.String(length=16), nullable=True))
        table.add_column(sa.Column("rig_id", sa.BigInteger(), nullable=True))
        table.create_foreign_key("fk_submissions_rig_id_rigs", "rigs", ["rig_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("submissions") as table:
        table.drop_constraint("fk_submissions_rig_id_rigs", type_="foreignkey")
        table.drop_column("rig_id")
        table.drop_column("rig_shape")
    op.drop_index("ix_rigs_org_id", table_name="rigs")
    op.drop_table("rigs")
