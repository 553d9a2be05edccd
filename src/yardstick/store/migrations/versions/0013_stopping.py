"""stopping: a run that grows in rounds until its rule is met keeps the rule and its rounds

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 18:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as table:
        table.add_column(sa.Column("stopping", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as table:
        table.drop_column("stopping")
