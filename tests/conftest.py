from __future__ import annotations

import functools
import os
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from deadlines import patience

# Headless rendering for every test that builds a simulator.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
# Exported 3D scenes are kept in a folder of this session's (shared by its processes), not the user's cache:
# a test sees its export's own bytes, never an entry an older exporter left.
_SCENES = tempfile.TemporaryDirectory(prefix="yardstick-scenes-")
os.environ.setdefault("YARDSTICK_SCENE_CACHE", _SCENES.name)

# pytest-xdist gives each worker the controller's terminal width as COLUMNS. The CLI's console reads it
# once, when it is imported, and would keep it for good, where each CLI test sets the width it wants for
# its own call (as a user's shell does for a fresh process).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

TOYS = Path(__file__).parent / "toys.py"

# Property tests draw the same examples on every run (a fixed seed, no example database): a failure is the
# same failure the next time, never a new random find in someone else's CI run; and no per-example deadline,
# which a loaded two-core machine breaks without any fault of the code. Exploring with fresh randomness is
# one flag away: `pytest --hypothesis-profile=explore`.
settings.register_profile("yardstick", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile("yardstick")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's pytest-timeout, the configured one stretched for this machine's load as every wait is
    (tests/deadlines.py); a test that names its own timeout keeps it, stretched too."""
    configured = config.getini("timeout")
    if not configured:
        return
    for item in items:
        marked = item.get_closest_marker("timeout")
        base = float(marked.args[0]) if marked is not None and marked.args else float(configured)
        item.add_marker(pytest.mark.timeout(patience(base)), append=False)


def free_port() -> int:
    """A loopback port free now, for a server a test starts (every test takes its ports from here)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def toy(name: str) -> str:
    """A reference to a class of tests/toys.py that a fresh worker process can load."""
    return f"{TOYS}:{name}"


@pytest.fixture
def toys_ref() -> object:
    return toy


PG_URL = os.environ.get("YARDSTICK_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@functools.cache
def _postgres_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_URL.replace("postgresql://", "postgresql://", 1), connect_timeout=2):
            return True
    except Exception:
        return False


def one_database(kind: str) -> list[str]:
    """The database an end-to-end module's platform runs on: one kind, not both. What the store keeps is
    held on both kinds by the store's and the services' own tests (test_store_*, test_core_runs,
    test_billing, test_platform, test_platform_faults, test_sequences_cli, ...); a module driving a door's
    flows through a running platform takes one, the doors' modules sharing the kinds out between them so
    that each door's flows meet both. PostgreSQL where the machine has one, else SQLite: a module is never
    skipped whole for want of it."""
    return [kind if kind == "sqlite" or _postgres_available() else "sqlite"]


@contextmanager
def fresh_database(kind: str, folder: Path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file in `folder`, or a schema of its own on the machine's
    PostgreSQL (dropped after). Skips the test when there is no PostgreSQL."""
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'yardstick.db'}"
        return
    if not _postgres_available():
        pytest.skip("no PostgreSQL at " + PG_URL)
    import secrets

    import psycopg

    schema = f"ys_{secrets.token_hex(6)}"
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def migrated_db(database_url: str) -> Iterator[Any]:
    """A `Database` on each kind of database, its migrations applied."""
    from yardstick.store.db import Database

    database = Database(database_url)
    database.upgrade()
    yield database
    database.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The fuzz run's counts (tests/test_fuzz.py), after the test run's own summary."""
    from test_fuzz import FUZZ_COUNTS

    for line in FUZZ_COUNTS:
        terminalreporter.write_line(line)
