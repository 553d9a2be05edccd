"""recording and replay tokens

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 20:37:32.041285
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("evals", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("record_video", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("record_fps", sa.Float(), nullable=True))

    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("replay_token", sa.String(length=64), nullable=True))
        batch_op.create_unique_constraint("uq_submissions_replay_token", ["replay_token"])


def downgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_constraint("uq_submissions_replay_token", type_="unique")
        batch_op.drop_column("replay_token")

    with op.batch_alter_table("evals", schema=None) as batch_op:
        batch_op.drop_column("record_fps")
        batch_op.drop_column("record_video")
