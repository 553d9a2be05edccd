"""Alembic's environment: run with the connection `Database.upgrade` hands over, or from a URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from yardstick.store.models import Base

config = context.config
connection = config.attributes.get("connection")

if connection is not None:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "sqlite://")
    with engine.connect() as fresh:
        context.configure(connection=fresh, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
