"""volumes: an org's named, versioned files, their versions and files, and the uploads that make them

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "volumes",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("org_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["orgs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("org_id", "name"),
    )
    op.create_index(op.f("ix_volumes_org_id"), "volumes", ["org_id"], unique=False)
    op.create_table(
        "volume_versions",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("volume_id", sa.BigInteger(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("file_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["volume_id"], ["volumes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("volume_id", "number"),
    )
    op.create_index(op.f("ix_volume_versions_volume_id"), "volume_versions", ["volume_id"], unique=False)
    op.create_table(
        "volume_files",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("version_id", sa.BigInteger(), nullable=False),
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("md5", sa.String(length=24), nullable=False),
        sa.ForeignKeyConstraint(["version_id"], ["volume_versions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_volume_files_version_id"), "volume_files", ["version_id"], unique=False)
    op.create_table(
        "volume_uploads",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("volume_id", sa.BigInteger(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["volume_id"], ["volumes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_volume_uploads_volume_id"), "volume_uploads", ["volume_id"], unique=False)
    op.create_table(
        "volume_upload_files",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("upload_id", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("path", sa.String(length=1024), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("md5", sa.String(length=24), nullable=False),
        sa.Column("held", sa.Boolean(), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=True),
        sa.Column("arrived_md5", sa.String(length=24), nullable=True),
        sa.ForeignKeyConstraint(["upload_id"], ["volume_uploads.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("upload_id", "position"),
    )
    op.create_index(
        op.f("ix_volume_upload_files_upload_id"), "volume_upload_files", ["upload_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_volume_upload_files_upload_id"), table_name="volume_upload_files")
    op.drop_table("volume_upload_files")
    op.drop_index(op.f("ix_volume_uploads_volume_id"), table_name="volume_uploads")
    op.drop_table("volume_uploads")
    op.drop_index(op.f("ix_volume_files_version_id"), table_name="volume_files")
    op.drop_table("volume_files")
    op.drop_index(op.f("ix_volume_versions_volume_id"), table_name="volume_versions")
    op.drop_table("volume_versions")
    op.drop_index(op.f("ix_volumes_org_id"), table_name="volumes")
    op.drop_table("volumes")
