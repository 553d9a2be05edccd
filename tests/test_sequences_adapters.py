"""Adapters through the Sequences door with the real `seq` CLI: `seq deploy` of an `@seq.adapter` folder
registers a version (the same file, the same version), `seq adapter ls / source / check / rm`, and
`seq eval run --adapter` playing a benchmark with a policy of other inputs and outputs through it, in a box
between the two: its parameters applied, its pairs enforced before anything runs, its failures ending the
episodes they happen in with a reason naming it, and its removal refused while an eval runs it."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import fresh_database, one_database
from deadlines import give_up_at
from hosted_helpers import eval_id_of, seq_cli
from platform_harness import Harness, running_platform

EXAMPLES = Path(__file__).parent / "seq_examples"
WAIT_S = 180.0
ACTIVE = ("queued", "pending", "running")


@pytest.fixture(scope="module", params=one_database("sqlite"))
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    folder = tmp_path_factory.mktemp(request.param)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, per_day=200) as harness:
        harness.wait_for_workers(60)
        yield harness


@pytest.fixture(scope="module")
def folders(platform: Harness, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark, the policy of other I/O, and the adapter between them, deployed."""
    root = tmp_path_factory.mktemp("code")
    for name in ("reach-bench", "delta-policy", "reach-policy", "to-delta"):
        shutil.copytree(EXAMPLES / name, root / name)
    for name in ("reach-bench", "delta-policy", "reach-policy"):
        done = seq(platform, "deploy", str(root / name))
        assert done.returncode == 0, done.stdout + done.stderr
    return root


def seq(platform: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    return seq_cli(platform.url, platform.keys["alice"], *args)


def ok(platform: Harness, *args: str) -> str:
    done = seq_cli(platform.url, platform.keys["alice"], *args)
    assert done.returncode == 0, f"seq {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def ended(platform: Harness, eval_id: str) -> None:
    """Wait until the eval has ended (the CLI stops following at an eval's first failed episode)."""
    deadline = give_up_at(WAIT_S)
    with api(platform) as client:
        while (status := client.get(f"/v1/eval/{eval_id}").json()["status"]) in ACTIVE:
            assert time.monotonic() < deadline, f"{eval_id} did not end: {status}"
            time.sleep(0.2)


def api(platform: Harness) -> httpx.Client:
    return httpx.Client(
        base_url=platform.url, headers={"Authorization": f"Bearer {platform.keys['alice']}"}, timeout=60
    )


def test_an_adapter_registers_as_a_version_of_its_file(
    platform: Harness, folders: Path, tmp_path: Path
) -> None:
    first = ok(platform, "deploy", str(folders / "to-delta"))
    assert re.search(r"adapter (registered|already registered).*: to-delta@v1", first), first
    again = ok(platform, "deploy", str(folders / "to-delta"))
    assert "already registered (the same code: no new version): to-delta@v1" in again, again

    listed = ok(platform, "adapter", "ls")
    assert re.search(r"to-delta\s+v1\s+1", listed), listed
    assert "reach-bench → delta-policy" in listed, listed

    # Its file comes back byte for byte, and `check` imports the registered version with the real SDK.
    out = tmp_path / "pulled.py"
    pulled = ok(platform, "adapter", "source", "to-delta", "-o", str(out))
    assert "to-delta@v1 ->" in pulled, pulled
    assert out.read_bytes() == (folders / "to-delta" / "adapter.py").read_bytes()
    checked = ok(platform, "adapter", "check", "to-delta@v1")
    assert "to_policy" in checked and "to_env" in checked, checked

    # The dry run asks the platform's own check and registers nothing.
    dry = ok(platform, "deploy", str(folders / "to-delta"), "--dry-run")
    assert "this code is to-delta@v1 already" in dry, dry

    # Changed code is the next version; the sum the SDK checks is the contract's.
    changed = tmp_path / "to-delta"
    shutil.copytree(folders / "to-delta", changed)
    source = changed / "adapter.py"
    source.write_text(source.read_text().replace("self.scale = scale", "self.scale = scale  # v2"))
    assert "to-delta@v2" in ok(platform, "deploy", str(changed))
    with api(platform) as client:
        shown = client.get("/v1/adapters/to-delta").json()
        assert [v["version"] for v in shown["versions"]] == [2, 1]
        got = client.get("/v1/adapters/to-delta/source", params={"version": 2}).json()
        assert got["sha256"] == hashlib.sha256(f"ToDelta\n{source.read_text()}".encode()).hexdigest()
    # The latest is v2 now; the evals below name v1, the version they were written against.


def test_an_eval_plays_through_the_adapter_with_its_parameters(platform: Harness, folders: Path) -> None:
    ok(platform, "deploy", str(folders / "to-delta"))
    # Without the adapter the policy cannot read the benchmark: every episode fails, saying why.
    bare = seq(platform, "eval", "run", "delta-policy", "--benchmark", "reach-bench", "--trials", "1")
    report = seq(platform, "--json", "eval", "report", eval_id_of(bare.stdout + bare.stderr))
    assert "KeyError: 'state'" in report.stdout, report.stdout

    adapted = ok(platform, "eval", "run", "delta-policy", "--benchmark", "reach-bench", "--trials", "2",
                 "--adapter", "to-delta@v1")  # fmt: skip
    assert "success: overall 100.0% (n=4)" in adapted, adapted
    eval_id = eval_id_of(adapted)
    shown = ok(platform, "eval", "report", eval_id)
    assert "ran: reach-bench v1 + to-delta v1 + delta-policy v1" in shown, shown
    # Its parameters are the eval's to set: a scale of 0 never moves the point.
    still = ok(platform, "eval", "run", "delta-policy", "--benchmark", "reach-bench", "--trials", "1",
               "--adapter", "to-delta@v1", "--param", "adapter.scale=0")  # fmt: skip
    assert "success: overall 0.0% (n=2)" in still, still

    # What it printed is on the benchmark's side of the logs, beside what the policy printed on its own.
    bench_logs = ok(platform, "eval", "logs", eval_id, "--side", "benchmark")
    assert "to-delta sends state" in bench_logs, bench_logs
    policy_logs = ok(platform, "eval", "logs", eval_id, "--side", "policy")
    assert "delta-policy asked at state" in policy_logs and "to-delta" not in policy_logs, policy_logs

    listed = ok(platform, "adapter", "ls")
    assert re.search(r"to-delta .*v1 on reach-bench with delta-policy", listed), listed
    with api(platform) as client:
        ran = client.get("/v1/adapters/to-delta").json()["evals"]
        assert eval_id in {row["eval_id"] for row in ran}
        details = client.get(f"/v1/eval/{eval_id}/details").json()["manifest"]
        assert details["adapter"]["name"] == "to-delta" and details["adapter"]["version"] == 1


def test_an_adapter_that_raises_fails_the_eval_naming_it(platform: Harness, folders: Path) -> None:
    """As any episode that fails, the eval ends there (the platform's rule for a crash): the episode and the
    eval's errors say which adapter, which method and what it raised; what played before stands."""
    ok(platform, "deploy", str(folders / "to-delta"))
    done = seq(platform, "eval", "run", "delta-policy", "--benchmark", "reach-bench", "--trials", "2",
               "--adapter", "to-delta@v1", "--param", "adapter.refuse_left=true")  # fmt: skip
    assert done.returncode != 0, done.stdout
    eval_id = eval_id_of(done.stdout + done.stderr)
    ended(platform, eval_id)
    with api(platform) as client:
        assert client.get(f"/v1/eval/{eval_id}").json()["status"] == "failed"
        rows = client.get(f"/v1/eval/{eval_id}/episodes", params={"limit": 100}).json()["episodes"]
    said = "the adapter to-delta@v1's to_policy raised ValueError: this adapter does not go left"
    failed = [row for row in rows if row["outcome"] == "error"]
    assert failed and all(row["task"] == "left" and said in str(row["error"]) for row in failed), rows
    assert all(row["success"] for row in rows if row["task"] == "right" and row["outcome"] != "pending"), rows


def test_pairs_are_enforced_before_anything_runs(platform: Harness, folders: Path) -> None:
    ok(platform, "deploy", str(folders / "to-delta"))
    refused = seq(platform, "eval", "run", "reach-policy", "--benchmark", "reach-bench", "--trials", "1",
                  "--adapter", "to-delta")  # fmt: skip
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert "declares the pairs reach-bench → delta-policy, not reach-bench → reach-policy" in refused.stderr
    # A name it never registered, and a version it does not have, are named as such.
    unknown = seq(platform, "eval", "run", "delta-policy", "--benchmark", "reach-bench", "--adapter", "nope")
    assert unknown.returncode == 4 and "no adapter 'nope'" in unknown.stderr, unknown.stderr
    missing = seq(platform, "eval", "run", "delta-policy", "--benchmark", "reach-bench",
                  "--adapter", "to-delta@v99")  # fmt: skip
    assert missing.returncode == 4 and "has no version 99" in missing.stderr, missing.stderr
    # A parameter the adapter does not declare is refused with the ones it does.
    stray = seq(platform, "eval", "run", "delta-policy", "--benchmark", "reach-bench",
                "--adapter", "to-delta@v1", "--param", "adapter.gain=2")  # fmt: skip
    assert stray.returncode == 2 and "adapter declares no parameter 'gain'" in stray.stderr, stray.stderr


def test_registration_rules_name_the_field(platform: Harness) -> None:
    source = (EXAMPLES / "to-delta" / "adapter.py").read_text()
    body = {"name": "rules", "class_name": "ToDelta", "handler_ref": "adapter:ToDelta", "source": source,
            "pairs": [{"benchmark": "reach-bench", "policy": "delta-policy"}]}  # fmt: skip
    with api(platform) as client:
        cases = [
            ({"source": "x" * (300 * 1024)}, "source", 400),
            ({"source": "class Other: pass\n"}, "source: defines no class ToDelta", 400),
            ({"source": "class ToDelta: pass\n"}, "is not decorated @seq.adapter", 400),
            ({"source": "def broken(:\n"}, "source: line 1", 400),
            ({"handler_ref": "adapter:Other"}, "handler_ref", 400),
            ({"pairs": []}, "pairs: pairs is empty", 400),
            ({"pairs": [{"benchmark": "a b", "policy": "*"}]}, "pair 1: benchmark 'a b' is no name", 400),
            ({"name": "-bad"}, "name:", 400),
        ]
        for change, said, status in cases:
            answer = client.post("/v1/adapters", json={**body, **change})
            assert answer.status_code == status and said in answer.json()["detail"], (change, answer.text)
        assert client.get("/v1/adapters/rules").status_code == 404  # nothing was registered
        assert client.post("/v1/adapters", json=body).status_code == 201
        # The name is ToDelta's: another class takes it over only with replace.
        other = source.replace("class ToDelta", "class Elsewhere")
        taken = {**body, "class_name": "Elsewhere", "handler_ref": "adapter:Elsewhere", "source": other}
        held = client.post("/v1/adapters", json=taken)
        assert held.status_code == 409 and "--replace" in held.json()["detail"], held.text
        assert client.post("/v1/adapters/validate", json=taken).status_code == 409
        verdict = client.post("/v1/adapters/validate", json={**taken, "replace": True}).json()
        assert verdict["state"] == "replace" and verdict["held_by"] == "adapter:ToDelta", verdict
        assert client.post("/v1/adapters", json={**taken, "replace": True}).json()["version"] == 2
        assert client.delete("/v1/adapters/rules").json() == {"name": "rules", "deleted_versions": 2}
        assert client.get("/v1/adapters/rules").status_code == 404


def test_a_local_file_is_registered_first_and_removal_waits_for_its_evals(
    platform: Harness, folders: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "local_adapter.py"
    copy.write_text(
        (folders / "to-delta" / "adapter.py").read_text().replace('name="to-delta"', 'name="local-delta"')
    )
    started = ok(platform, "eval", "run", "delta-policy", "--benchmark", "reach-bench", "--trials", "50",
                 "--adapter", f"{copy}:ToDelta", "--no-wait")  # fmt: skip
    assert "adapter registered: local-delta@v1" in started, started
    eval_id = eval_id_of(started)
    refused = seq(platform, "adapter", "rm", "local-delta")
    assert refused.returncode == 5 and eval_id in refused.stderr, refused.stderr
    ok(platform, "eval", "cancel", eval_id)
    ended(platform, eval_id)
    removed = ok(platform, "adapter", "rm", "local-delta")
    assert "removed: local-delta (1 version(s))" in removed, removed
    # The eval keeps what it ran with.
    with api(platform) as client:
        kept = client.get(f"/v1/eval/{eval_id}/details").json()["manifest"]["adapter"]
    assert kept["name"] == "local-delta" and kept["version"] == 1 and len(kept["sha256"]) == 64
    assert json.loads(json.dumps(kept))  # plain JSON
