"""runs by org and status: an org's active runs counted without reading its finished ones

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 19:20:00
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The pair serves every lookup by org alone as well, so the index on org alone goes.
    op.create_index("ix_submissions_org_status", "submissions", ["org_id", "status"], unique=False)
    op.drop_index("ix_submissions_org_id", table_name="submissions")


def downgrade() -> None:
    op.create_index("ix_submissions_org_id", "submissions", ["org_id"], unique=False)
    op.drop_index("ix_submissions_org_status", table_name="submissions")
