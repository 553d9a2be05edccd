"""The install's audit log, as its readers use it: a change made through either door - a Positronic plan
with its client, a secret set and a policy stopped with the real `seq` CLI - is one event naming who (the
login and the key's last four), what, on what and through which door; a refused request, a read and a dry
run are none. `seq audit` reads the caller's org's events newest first and pages back with `--before`;
another org's member sees none of them; `yardstick admin audit` reads the whole install."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx

from hosted_helpers import set_secret
from platform_harness import running_platform, toy_plan

ROOT = Path(__file__).parent.parent
SEQ = ROOT / ".venv-seq" / "bin" / "seq"


def _seq(url: str, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=url, SEQUENCES_API_KEY=key)
    return subprocess.run([str(SEQ), *args], env=env, capture_output=True, text=True, timeout=300)


def test_each_change_is_one_event_naming_who_what_and_the_door(tmp_path: Path, database_url: str) -> None:
    with running_platform(tmp_path, database_url) as harness:
        alice = harness.keys["alice"]
        rival = harness.user("mallory", "globex")
        created = harness.client().create_submission(toy_plan("audited", episodes=1))
        harness.wait(harness.client(), created.submission_id)
        set_secret(harness.url, alice, "audited-secret", "AUDITED", "a value never logged")
        refused = _seq(harness.url, alice, "secret", "rm", "no-such-secret")
        assert refused.returncode == 4, refused.stderr  # refused: not a change
        read = _seq(harness.url, alice, "secret", "ls")
        assert read.returncode == 0, read.stderr  # a read: not a change

        shown = _seq(harness.url, alice, "--json", "audit", "--limit", "10")
        assert shown.returncode == 0, shown.stderr
        events = json.loads(shown.stdout)
        assert [e["action"] for e in events] == ["secret.set", "submissions.create"]
        newest, oldest = events
        assert newest["target"] == "audited-secret" and newest["door"] == "sequences"
        assert oldest["door"] == "positronic" and oldest["detail"]["status"] < 400
        assert {e["actor_email"] for e in events} == {"alice"}
        assert {e["actor_key"] for e in events} == {f"…{alice[-4:]}"}
        assert "a value never logged" not in shown.stdout

        older = _seq(harness.url, alice, "audit", "--limit", "1", "--before", str(newest["id"]))
        assert older.returncode == 0 and "submissions.create" in older.stdout, older.stdout
        assert "secret.set" not in older.stdout

        theirs = httpx.get(f"{harness.url}/v1/audit", headers={"Authorization": f"Bearer {rival}"})
        assert theirs.status_code == 200 and theirs.json()["events"] == []

        install = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "yardstick"), "admin", "audit", "--data-dir",
             str(harness.settings.data_dir), *(["--database", database_url] if database_url else [])],
            capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        assert install.returncode == 0, install.stderr
        listed = install.stdout + install.stderr  # the house's tables go to the console, on stderr
        assert "secret.set" in listed and "audited-secret" in listed and "submissions.create" in listed
