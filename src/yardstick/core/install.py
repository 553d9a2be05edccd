"""Opening an install: its data folder made, its database migrated, the shipped catalogue added, its one
secret read (or made). An explicit step, done once by whoever starts a platform (the server, a worker, an
admin command, a test), never a side effect of building a service object."""

from __future__ import annotations

from dataclasses import dataclass

from yardstick.core import seed
from yardstick.core.artifacts import ArtifactStore, LocalArtifactStore
from yardstick.core.settings import Settings
from yardstick.core.signing import load_secret
from yardstick.store.db import Database


@dataclass(frozen=True)
class Install:
    """What an open install holds: its settings, its database, its artifact store and its secret (links,
    board tags and sign-in keys are each derived from it)."""

    settings: Settings
    db: Database
    artifacts: ArtifactStore
    secret: bytes

    def close(self) -> None:
        self.db.close()


def open_install(settings: Settings, *, prepare: bool = True) -> Install:
    """Open the install `settings` names. With `prepare` (the default), make its folder, apply every
    migration not yet applied and add what the shipped catalogue lacks; without it, only connect (a worker
    of a platform already started)."""
    if prepare:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(settings.database)
    if prepare:
        db.upgrade()
        with db.writing() as session:
            seed.install(session)
    return Install(settings, db, open_artifact_store(settings), load_secret(settings.secret_file))


def open_artifact_store(settings: Settings) -> ArtifactStore:
    """The install's artifact store: the data folder's, or the bucket `artifacts_url` names."""
    if settings.artifacts_url is None:
        return LocalArtifactStore(settings.artifact_root)
    from yardstick.core.s3_artifacts import S3ArtifactStore  # boto3 only for an install that uses it

    return S3ArtifactStore(settings.artifacts_url, link_ttl_s=settings.artifact_ttl_s)
