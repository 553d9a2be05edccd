"""hosted serving: the version a rollback pinned, served instead of the newest ready one

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 08:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hosted") as table:
        table.add_column(sa.Column("serving", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hosted") as table:
        table.drop_column("serving")
