"""An org's account through the Sequences door, as its readers use it - its usage: what its evals were
charged, at a credit's dollars, and its balance after (`seq usage`, `seq account`) - and the install's
audit log: a change made through either door - a Positronic plan
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
from platform_client.client import PlatformClient

from hosted_helpers import seq_cli, set_secret
from platform_harness import running_platform, toy_plan
from yardstick.billing import admin as billing_admin
from yardstick.core import admin

ROOT = Path(__file__).parent.parent


def _seq(url: str, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    return seq_cli(url, key, *args)


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


def test_usage_is_what_the_orgs_runs_were_charged_at_a_credits_dollars(
    tmp_path: Path, database_url: str
) -> None:
    with running_platform(tmp_path, database_url) as harness:
        with harness.platform.db.writing() as session:
            admin.create_org(session, "payg", billing_mode="pay_as_you_go", per_day=100, concurrent=100)
        key = harness.user("payer", "payg")
        with harness.platform.db.writing() as session:
            billing_admin.grant_credits(session, "payg", "10", "for the test")
        client = PlatformClient(harness.url, api_key=key)  # type: ignore[arg-type]
        created = client.create_submission(toy_plan("charged", org="payg", episodes=2))
        harness.wait(client, created.submission_id)

        used = _seq(harness.url, key, "--json", "usage", "--group", "kind")
        assert used.returncode == 0, used.stderr
        buckets = json.loads(used.stdout)["buckets"]
        assert [b["group"] for b in buckets] == ["eval"] and buckets[0]["card_hours"] == 0.0
        charged = buckets[0]["credits"]
        assert charged > 0
        # The cheapest package on sale by default is 100 credits for $10: a credit is $0.10.
        assert abs(buckets[0]["cost_usd"] - charged * 0.10) < 1e-6

        account = _seq(harness.url, key, "--json", "account")
        assert account.returncode == 0, account.stderr
        balance = json.loads(account.stdout)["balance"]
        assert abs(balance["credits"] - (10 - charged)) < 1e-6 and balance["held_credits"] == 0
        assert abs(balance["balance"] - round((10 - charged) * 0.10, 2)) < 0.01

        nothing = _seq(harness.url, harness.keys["alice"], "--json", "usage")  # a packaged org: no charges
        assert nothing.returncode == 0 and json.loads(nothing.stdout)["buckets"] == [], nothing.stdout
