"""The platform's durable state: SQLAlchemy models, migrations, the database handle and the episode queue."""
