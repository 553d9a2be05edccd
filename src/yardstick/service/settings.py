"""Where a platform keeps its state: one data directory (the SQLite database, the artifacts, the signing
secret), or a database URL and an artifact folder given apart for a platform spread over machines."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DATA_DIR_ENV = "YARDSTICK_DATA_DIR"
DATABASE_ENV = "YARDSTICK_DATABASE_URL"


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    database_url: str | None = None
    artifact_ttl_s: int = 3600
    lease_s: float = 60.0
    max_attempts: int = 3

    @classmethod
    def from_env(cls, data_dir: str | Path | None = None, database_url: str | None = None) -> Settings:
        folder = Path(data_dir or os.environ.get(DATA_DIR_ENV) or "~/.local/share/yardstick").expanduser()
        return cls(data_dir=folder, database_url=database_url or os.environ.get(DATABASE_ENV) or None)

    @property
    def database(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'yardstick.db').resolve()}"

    @property
    def artifact_root(self) -> Path:
        return self.data_dir / "artifacts"

    @property
    def secret_file(self) -> Path:
        return self.data_dir / "secret.key"
