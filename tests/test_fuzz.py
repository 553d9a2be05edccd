"""Schemathesis over the gateway's own `/openapi.json` — every route it lists (the contract's, sign-in,
billing, keys, artifacts, and whatever door is added later), on SQLite and on PostgreSQL: no server error,
no response outside its documented schema, no status the OpenAPI does not list for its route, and a 405
with `Allow` for a method a path does not take. Bounded (a few examples an operation, a fixed seed), so it
takes about a minute a database; its counts are printed at the end of the test run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import fresh_database
from platform_harness import Harness, running_platform

FUZZ_COUNTS: list[str] = []  # printed by conftest's terminal summary
CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "response_schema_conformance",
        "content_type_conformance",
        "unsupported_method",
    )
)
EXAMPLES = 5
# Routes that end the key they are called with: fuzzed with a key of their own, after the rest.
ENDS_ITS_KEY = ("/v1/keys.rotate", "/v1/keys.revoke")


@pytest.fixture(params=["sqlite", "postgresql"])
def platform(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    with (
        fresh_database(request.param, tmp_path) as url,
        running_platform(tmp_path, url, workers=0) as harness,
    ):
        harness.user("mallory", "acme")
        yield harness


def _schemathesis(platform: Harness, key: str, report: Path, paths: tuple[str, ...], include: bool) -> Any:
    which = [f"--{'include' if include else 'exclude'}-path={path}" for path in paths]
    command = [
        str(Path(sys.executable).parent / "st"),
        "run",
        f"{platform.url}/openapi.json",
        f"--checks={CHECKS}",
        f"--max-examples={EXAMPLES}",
        "--seed=20261201",
        "--generation-allow-x00=true",
        "--continue-on-failure",
        "--max-failures=50",
        "--workers=1",
        f"--header=Authorization: Bearer {key}",
        "--report=json",
        f"--report-dir={report}",
        *which,
    ]
    # From the report's folder: schemathesis keeps a cache where it runs, which is no place in the repository.
    report.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, cwd=report)
    [found] = report.glob("*.json")
    return json.loads(found.read_text()), done.stdout


def test_schemathesis_finds_no_server_error_no_schema_violation_and_no_undocumented_status(
    platform: Harness, tmp_path: Path
) -> None:
    database = "sqlite" if platform.platform.db.is_sqlite else "postgresql"
    runs = [
        _schemathesis(platform, platform.keys["alice"], tmp_path / "main", ENDS_ITS_KEY, include=False),
        _schemathesis(platform, platform.keys["mallory"], tmp_path / "keys", ENDS_ITS_KEY, include=True),
    ]
    operations = sum(r["operations"]["tested"] for r, _ in runs)
    cases = sum(r["test_cases"]["generated"] for r, _ in runs)
    failures = [f for r, _ in runs for f in r["failures"]]
    errors = [e for r, _ in runs for e in r["errors"]]
    FUZZ_COUNTS.append(
        f"schemathesis on {database}: {operations} operations, {cases} test cases, {len(failures)} failures, "
        f"{len(errors)} errors ({', '.join(CHECKS.split(','))})"
    )
    assert operations >= 25
    assert not failures and not errors, "\n".join(stdout[-6000:] for _, stdout in runs)
