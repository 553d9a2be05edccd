"""runs name their benchmark: the reference the engine builds, its constructor parameters and what is recorded
of each episode, in the run's own columns (carried over from the catalogue eval each run was filed on), so a
run needs no catalogue eval to be played

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_runs = sa.table(
    "submissions",
    sa.column("id", sa.BigInteger),
    sa.column("eval_id", sa.BigInteger),
    sa.column("benchmark", sa.String),
    sa.column("benchmark_params", sa.JSON),
    sa.column("recording", sa.JSON),
)
_evals = sa.table(
    "evals",
    sa.column("id", sa.BigInteger),
    sa.column("benchmark", sa.String),
    sa.column("benchmark_params", sa.JSON),
    sa.column("record_video", sa.Boolean),
    sa.column("record_fps", sa.Float),
)


def upgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("benchmark", sa.String(length=500), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("benchmark_params", sa.JSON(), nullable=False, server_default="{}"))
        batch_op.add_column(sa.Column("recording", sa.JSON(), nullable=True))
    connection = op.get_bind()
    evals = {row.id: row for row in connection.execute(sa.select(_evals)).all()}
    for run_id, eval_id in connection.execute(sa.select(_runs.c.id, _runs.c.eval_id)).all():
        found = evals.get(eval_id)
        if found is None:
            continue
        recording = (
            {"video": True, "trajectory": True, "fps": found.record_fps} if found.record_video else None
        )
        connection.execute(
            sa.update(_runs)
            .where(_runs.c.id == run_id)
            .values(
                benchmark=found.benchmark, benchmark_params=found.benchmark_params or {}, recording=recording
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_column("recording")
        batch_op.drop_column("benchmark_params")
        batch_op.drop_column("benchmark")
