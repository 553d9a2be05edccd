"""Registering code through the Sequences front door with the real `seq` CLI: `seq deploy <folder>` of a
benchmark and of a policy (imported and tried in a box: building -> ready, or failed and why), evals of a
deployed policy on a registered benchmark, vectorized worlds, a deployment's settings, and bundles refused
with the error body and nothing stored. The same classes played by `yardstick eval run` in process give the
same episodes as through the door."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from platform_client.eval_plan import EvalPlan
from sqlalchemy import func, select

from conftest import fresh_database, one_database
from hosted_helpers import set_secret
from platform_harness import Harness, running_platform
from yardstick.core import admin
from yardstick.store.models import Hosted, HostedVersion

ROOT = Path(__file__).parent.parent
SEQ = ROOT / ".venv-seq" / "bin" / "seq"
EXAMPLES = Path(__file__).parent / "seq_examples"


@pytest.fixture(scope="module", params=one_database("postgresql"))
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    assert SEQ.exists(), f"{SEQ} is missing: `make env` installs the Sequences CLI in a venv apart"
    folder = tmp_path_factory.mktemp(request.param)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, per_day=200) as harness:
        harness.wait_for_workers(60)
        yield harness


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each example in a folder of its own, as a user keeps one to `seq deploy`."""
    root = tmp_path_factory.mktemp("code")
    for example in EXAMPLES.iterdir():
        shutil.copytree(example, root / example.name)
    return root


def seq(platform: Harness, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=platform.url, SEQUENCES_API_KEY=platform.keys["alice"])
    return subprocess.run([str(SEQ), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def deployed(platform: Harness, folders: Path, name: str) -> subprocess.CompletedProcess[str]:
    done = seq(platform, "deploy", str(folders / name))
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def csv_rows(platform: Harness, eval_id: str) -> list[dict[str, str]]:
    shown = seq(platform, "eval", "report", eval_id, "--csv")
    assert shown.returncode == 0, shown.stderr
    return list(csv.DictReader(io.StringIO(shown.stdout)))


def eval_id_of(output: str) -> str:
    found = re.search(r"eval (ev-[0-9a-f]+)", output)
    assert found, output
    return found.group(1)


def test_a_benchmark_and_a_policy_deploy_and_an_eval_meets_its_gate(platform: Harness, folders: Path) -> None:
    bench = deployed(platform, folders, "reach-bench")
    assert "reach-bench: ready" in bench.stdout or "ready:" in bench.stdout, bench.stdout
    deployed(platform, folders, "reach-policy")
    assert "ready" in seq(platform, "policy", "status", "reach-policy").stdout
    met = seq(platform, "eval", "run", "reach-policy", "--benchmark", "reach-bench", "--trials", "2",
              "--gate", "success>=0.8")  # fmt: skip
    assert met.returncode == 0, met.stdout + met.stderr
    assert "success: overall 100.0% (n=4)" in met.stdout
    assert "task left: 100.0% (n=2)" in met.stdout and "task right: 100.0% (n=2)" in met.stdout
    missed = seq(platform, "eval", "run", "reach-policy", "--benchmark", "reach-bench", "--trials", "1",
                 "--gate", "success<=0.5")  # fmt: skip
    assert missed.returncode == 8, missed.stdout + missed.stderr
    ran = {eval_id_of(met.stdout)[:8], eval_id_of(missed.stdout)[:8]}
    by_policy = seq(platform, "eval", "ls", "reach-policy")
    assert by_policy.returncode == 0 and ran <= set(re.findall(r"ev-[0-9a-f]{5}", by_policy.stdout)), (
        by_policy
    )
    by_benchmark = seq(platform, "eval", "ls", "--benchmark", "reach-bench")
    assert by_benchmark.returncode == 0, by_benchmark.stdout + by_benchmark.stderr
    assert all(eval_id in by_benchmark.stdout for eval_id in ran), by_benchmark.stdout

    # The ids as the listings show them (their first 8 characters) name their evals.
    short = eval_id_of(met.stdout)[:8]
    reported = seq(platform, "eval", "report", short)
    assert reported.returncode == 0 and "success: overall 100.0% (n=4)" in reported.stdout, reported
    last = re.search(
        r"reach-bench .*?(ev-[0-9a-f]{5})\s+reach-policy", seq(platform, "benchmark", "ls").stdout
    )
    assert last is not None and last.group(1) == eval_id_of(missed.stdout)[:8]  # the newest eval on it


def test_benchmark_ls_and_tasks_show_what_was_registered(platform: Harness, folders: Path) -> None:
    deployed(platform, folders, "reach-bench")
    listed = seq(platform, "benchmark", "ls")
    assert listed.returncode == 0 and "reach-bench" in listed.stdout and "ready" in listed.stdout
    tasks = seq(platform, "benchmark", "tasks", "reach-bench")
    assert tasks.returncode == 0, tasks.stderr
    assert "left" in tasks.stdout and "right" in tasks.stdout and "0-3" in tasks.stdout


def test_the_same_code_is_the_same_version_and_other_code_the_next(
    platform: Harness, folders: Path, tmp_path: Path
) -> None:
    deployed(platform, folders, "reach-bench")
    again = seq(platform, "deploy", str(folders / "reach-bench"), "--dry-run")
    assert again.returncode == 0, again.stdout + again.stderr
    changed = tmp_path / "reach-bench"
    shutil.copytree(folders / "reach-bench", changed)
    source = changed / "benchmark.py"
    source.write_text(source.read_text().replace("self.noise = noise", "self.noise = noise  # v2"))
    deployed(platform, changed.parent, changed.name)
    with platform.platform.db.reading() as session:
        numbers = (
            session.execute(
                select(HostedVersion.number)
                .join(Hosted)
                .where(Hosted.name == "reach-bench")
                .order_by(HostedVersion.number)
            )
            .scalars()
            .all()
        )
    assert numbers == [1, 2]
    listed = seq(platform, "benchmark", "versions", "reach-bench")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert re.search(r"v2\s+in use", listed.stdout) and re.search(r"v1\s+ready", listed.stdout), listed.stdout


def test_a_versions_source_is_the_code_it_deployed(platform: Harness, folders: Path, tmp_path: Path) -> None:
    done = deployed(platform, folders, "reach-policy")
    assert "the platform holds the same files" in done.stdout, done.stdout
    fetched = seq(platform, "policy", "source", "reach-policy", "-o", str(tmp_path / "got"))
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert "the same as the version's" in fetched.stdout, fetched.stdout
    original = folders / "reach-policy" / "policy.py"
    assert (tmp_path / "got" / "policy.py").read_text() == original.read_text()


def test_a_vectorized_benchmark_plays_its_worlds(platform: Harness, folders: Path) -> None:
    deployed(platform, folders, "vec-bench")
    deployed(platform, folders, "vec-policy")
    ran = seq(platform, "eval", "run", "vec-policy", "--benchmark", "vec-bench")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = csv_rows(platform, eval_id_of(ran.stdout))
    assert sorted((r["task"], r["seed"], r["steps"]) for r in rows) == sorted(
        [("a", s, "3") for s in ("3", "5", "7")] + [("b/1", s, "5") for s in ("3", "5", "7")]
    )


def test_a_benchmark_whose_reset_raises_is_failed_with_its_reason(platform: Harness, folders: Path) -> None:
    broken = seq(platform, "deploy", str(folders / "broken-bench"))
    assert broken.returncode != 0
    shown = seq(platform, "benchmark", "status", "broken-bench")
    said = shown.stdout + shown.stderr
    assert "failed" in said and "FileNotFoundError" in said and "benchmark.py:" in said, said
    # The same code again is built again as the same version, and fails the same way.
    again = seq(platform, "deploy", str(folders / "broken-bench"))
    assert again.returncode != 0 and "FileNotFoundError" in again.stdout + again.stderr
    with platform.platform.db.reading() as session:
        numbers = session.execute(
            select(HostedVersion.number).join(Hosted).where(Hosted.name == "broken-bench")
        ).scalars()
        assert list(numbers) == [1]


def test_a_deployments_settings_are_read_and_changed(platform: Harness, folders: Path) -> None:
    deployed(platform, folders, "reach-policy")
    shown = seq(platform, "policy", "settings", "reach-policy")
    assert shown.returncode == 0, shown.stderr
    assert "params.gain" in shown.stdout
    changed = seq(platform, "policy", "set", "reach-policy", "params.gain=0.5")
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert "params.gain" in changed.stdout and "0.5" in changed.stdout
    assert "0.5" in seq(platform, "policy", "settings", "reach-policy").stdout
    refused = seq(platform, "policy", "set", "reach-policy", "budget.monthly_usd=100")
    assert refused.returncode == 2 and "not a setting this platform honours" in refused.stderr, refused.stderr
    kept = seq(platform, "policy", "set", "reach-policy", "min_workers=0", "max_gpus=2")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert re.search(r"max_gpus\s+2\b", seq(platform, "policy", "settings", "reach-policy").stdout)


def test_the_same_classes_give_the_same_episodes_in_process(
    platform: Harness, folders: Path, tmp_path: Path
) -> None:
    """The deployment's settings reach its infer calls: the door's episodes at gain 0.5 are the local ones
    at gain 0.5, and not those at the code's default."""
    deployed(platform, folders, "reach-bench")
    deployed(platform, folders, "reach-policy")
    assert seq(platform, "policy", "set", "reach-policy", "params.gain=0.5").returncode == 0
    ran = seq(platform, "eval", "run", "reach-policy", "--benchmark", "reach-bench", "--trials", "3")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    door = sorted(
        (r["task"], r["seed"], r["success"], r["steps"]) for r in csv_rows(platform, eval_id_of(ran.stdout))
    )

    def local(gain: float) -> list[tuple[str, str, str, str]]:
        out = tmp_path / f"local-{gain}"
        done = subprocess.run(
            [sys.executable, "-m", "yardstick.cli", "eval", "run",
             "-b", f"{folders / 'reach-bench' / 'benchmark.py'}:ReachBench",
             "-p", f"{folders / 'reach-policy' / 'policy.py'}:ReachPolicy",
             "--trials", "3", "--in-process", "--param", f"policy.gain={gain}", "--out", str(out)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        with (out / "episodes.csv").open() as table:
            return sorted(
                (e["task"], e["seed"], "true" if e["success"] == "True" else "false", e["steps"])
                for e in csv.DictReader(table)
            )

    assert door == local(0.5)
    assert door != local(1.0)


# --- bundles refused ---------------------------------------------------------------------------------------


def _bundle(members: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if symlink is not None:
            link = tarfile.TarInfo(symlink)
            link.type = tarfile.SYMTYPE
            link.linkname = "/etc/passwd"
            tar.addfile(link)
    return raw.getvalue()


def _registration(data: bytes, *, sha256: str | None = None) -> dict[str, object]:
    return {
        "name": "refused-bench",
        "image": {"base": "debian:12-slim", "steps": []},
        "tasks": {"only": "nothing"},
        "seeds": [0],
        "max_seconds": 1.0,
        "handler_ref": "benchmark:Bench",
        "code": {
            "format": "tar.gz",
            "data": base64.b64encode(data).decode(),
            "sha256": sha256 or hashlib.sha256(data).hexdigest(),
        },
    }


GOOD = (EXAMPLES / "reach-bench" / "benchmark.py").read_bytes()


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (_registration(_bundle({"benchmark.py": GOOD}), sha256="0" * 64), "sha256"),
        (_registration(_bundle({"../escape.py": GOOD})), ".."),
        (_registration(_bundle({"/etc/cron.d/x": GOOD})), "absolute"),
        (_registration(_bundle({"benchmark.py": GOOD}, symlink="link.py")), "link"),
        (_registration(b"plain text, not gzip"), "gzip"),
        (_registration(os.urandom(9 * 1024 * 1024)), "8"),
    ],
    ids=["wrong-sha256", "dotdot", "absolute", "symlink", "not-gzip", "over-8-mib"],
)
def test_a_bad_bundle_is_refused_by_rule_and_nothing_is_stored(
    platform: Harness, body: dict[str, object], words: str
) -> None:
    answer = httpx.post(
        f"{platform.url}/v1/benchmarks",
        json=body,
        headers={"Authorization": f"Bearer {platform.keys['alice']}"},
        timeout=60,
    )
    assert 400 <= answer.status_code < 500, answer.text
    refused = answer.json()
    assert refused["code"] in ("invalid_request", "payload_too_large") and refused["retryable"] is False
    assert words in refused["detail"], refused["detail"]
    with platform.platform.db.reading() as session:
        assert (
            session.execute(
                select(func.count()).select_from(Hosted).where(Hosted.name == "refused-bench")
            ).scalar_one()
            == 0
        )
    hosted = platform.settings.hosted_root
    assert not any("refused-bench" in str(p) for p in hosted.rglob("*")) if hosted.exists() else True


def test_a_registered_benchmark_made_a_catalogue_eval_serves_both_doors(
    platform: Harness, folders: Path
) -> None:
    """`yardstick admin eval from-benchmark`: a Positronic plan names the eval with the deployment as a
    `served` endpoint, a Sequences eval names the same eval, and both play the hosted code."""
    deployed(platform, folders, "reach-bench")
    deployed(platform, folders, "reach-policy")
    slug = f"acme.reach-{platform.settings.database.split(':')[0]}"
    with platform.platform.db.writing() as session:
        admin.eval_of_hosted(session, slug, "acme", "reach-bench", trials=2)
    client = platform.client()
    plan = EvalPlan.model_validate(
        {
            "request_type": {"type": "private_eval", "org": "acme"},
            "eval": slug,
            "endpoints": [{"name": "reacher", "kind": "served", "wire": "websocket", "spec": "reach-policy"}],
            "episodes_per_endpoint": 2,
            "transaction_key": f"{slug}-1",
        }
    )
    created = client.create_submission(plan)
    view = platform.wait(client, created.submission_id)
    assert view.status.name == "finished", view
    assert view.episodes.done == 4
    through_seq = seq(platform, "eval", "run", "reach-policy", "--benchmark", slug, "--trials", "2")
    assert through_seq.returncode == 0, through_seq.stdout + through_seq.stderr
    assert "success: overall 100.0% (n=4)" in through_seq.stdout


def test_an_evals_dashboard_url_is_its_page_naming_what_ran(platform: Harness, folders: Path) -> None:
    deployed(platform, folders, "reach-bench")
    deployed(platform, folders, "reach-policy")
    ran = seq(platform, "eval", "run", "reach-policy", "--benchmark", "reach-bench", "--trials", "1")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    headers = {"Authorization": f"Bearer {platform.keys['alice']}"}
    report = httpx.get(f"{platform.url}/v1/eval/{eval_id_of(ran.stdout)}", headers=headers).json()
    page = httpx.get(report["dashboard_url"])
    assert page.status_code == 200
    assert re.search(r"<h1>reach-policy v\d+ on reach-bench v\d+", page.text), page.text[:2000]
    assert "2 / 2" in page.text


WAITING_BENCH = """\
import time

import seq


@seq.benchmark(name="waiting-bench", tasks={"wait": "a point never reached"}, seeds=[0], max_seconds=600.0)
class WaitingBench:
    @seq.reset
    def reset(self, task, seed):
        return {"x": 0.0, "target": 1.0}

    @seq.step
    def step(self, action):
        time.sleep(0.2)  # an eval on it is still running when the test deletes it
        return {"x": 0.0, "target": 1.0}, False, False
"""


def test_benchmark_rm_dry_run_deletes_nothing_and_rm_needs_force_while_an_eval_runs_on_it(
    platform: Harness, folders: Path, tmp_path: Path
) -> None:
    deployed(platform, folders, "reach-policy")
    bench = tmp_path / "waiting-bench"
    bench.mkdir()
    (bench / "benchmark.py").write_text(WAITING_BENCH)
    deployed(platform, tmp_path, "waiting-bench")
    started = seq(platform, "eval", "run", "reach-policy", "--benchmark", "waiting-bench", "--no-wait")
    assert started.returncode == 0, started.stdout + started.stderr
    eval_id = eval_id_of(started.stdout + started.stderr)

    said = seq(platform, "benchmark", "rm", "waiting-bench", "--dry-run")
    assert said.returncode == 0, said.stdout + said.stderr
    assert "deleting benchmark waiting-bench (v1, ready) would:" in said.stdout
    assert f"refuse while eval {eval_id} runs or waits on it" in said.stdout
    assert "waiting-bench" in seq(platform, "benchmark", "ls").stdout  # nothing deleted

    refused = seq(platform, "benchmark", "rm", "waiting-bench")
    assert refused.returncode == 5, refused.stdout + refused.stderr  # a conflict
    assert eval_id in refused.stderr and "--force" in refused.stderr
    assert "waiting-bench" in seq(platform, "benchmark", "ls").stdout

    forced = seq(platform, "benchmark", "rm", "waiting-bench", "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "deleted benchmark waiting-bench: its name is free" in forced.stdout
    assert f"canceled eval {eval_id}" in forced.stdout
    assert "waiting-bench" not in seq(platform, "benchmark", "ls").stdout
    report = seq(platform, "eval", "report", eval_id)
    assert "canceled" in report.stdout + report.stderr or "cancelled" in report.stdout + report.stderr
    again = seq(platform, "benchmark", "rm", "waiting-bench")
    assert again.returncode == 4, again.stdout + again.stderr  # gone: not found


def test_a_policy_is_stopped_started_and_removed_with_the_clis_own_answers(
    platform: Harness, folders: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "stoppable-policy"
    shutil.copytree(folders / "reach-policy", copy)
    source = copy / "policy.py"
    source.write_text(source.read_text().replace('name="reach-policy"', 'name="stoppable-policy"'))
    deployed(platform, tmp_path, "stoppable-policy")
    deployed(platform, folders, "reach-bench")

    stopped = seq(platform, "policy", "stop", "stoppable-policy")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "stopped stoppable-policy" in stopped.stdout and "seq policy start" in stopped.stdout
    status = seq(platform, "policy", "status", "stoppable-policy")
    assert status.returncode == 0 and "ready" in status.stdout, status.stdout + status.stderr
    assert re.search(r"stoppable-policy\s.*stopped", seq(platform, "policy", "ls").stdout)
    refused = seq(platform, "eval", "run", "stoppable-policy", "--benchmark", "reach-bench", "--trials", "1")
    assert refused.returncode == 5 and "is stopped" in refused.stderr, refused.stdout + refused.stderr

    started = seq(platform, "policy", "start", "stoppable-policy")
    assert started.returncode == 0, started.stdout + started.stderr
    assert "started stoppable-policy" in started.stdout and "v1" in started.stdout
    ran = seq(platform, "eval", "run", "stoppable-policy", "--benchmark", "reach-bench", "--trials", "1")
    assert ran.returncode == 0, ran.stdout + ran.stderr

    listed = seq(platform, "policy", "rm", "stoppable-policy", "--dry-run")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "deleting policy stoppable-policy would:" in listed.stdout
    assert "delete its version v1" in listed.stdout and "keep the reports of the 1 eval" in listed.stdout
    assert seq(platform, "policy", "status", "stoppable-policy").returncode == 0  # nothing deleted
    removed = seq(platform, "policy", "rm", "stoppable-policy")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "deleted stoppable-policy" in removed.stdout
    assert seq(platform, "policy", "status", "stoppable-policy").returncode == 4


SECRET_BENCH = """\
import os

import seq


@seq.benchmark(
    name="secret-bench", tasks={"peek": "reads its token"}, seeds=[0], max_seconds=1.0,
    secrets=[seq.Secret.from_name("bench-token")],
)
class SecretBench:
    def __init__(self, leak: bool = False):
        self.leak = leak

    @seq.reset
    def reset(self, task, seed):
        return {"x": 0.0, "target": 0.0}

    @seq.step
    def step(self, action):
        token = os.environ["BENCH_TOKEN"]
        if self.leak:
            raise RuntimeError(f"the token is {token}, said out loud")
        return {"x": 0.0, "target": 0.0}, True, True, {"generation": float(token.rsplit("-", 1)[1])}
"""


def _set_secret(platform: Harness, value: str) -> None:
    set_secret(platform.url, platform.keys["alice"], "bench-token", "BENCH_TOKEN", value)


def test_a_rotated_secret_reaches_a_warm_box_and_a_secret_in_an_error_is_masked_everywhere(
    platform: Harness, folders: Path, tmp_path: Path
) -> None:
    first, second = f"tok-{os.getpid()}-1", f"tok-{os.getpid()}-2"
    _set_secret(platform, first)
    bench = tmp_path / "secret-bench"
    bench.mkdir()
    (bench / "benchmark.py").write_text(SECRET_BENCH)
    deployed(platform, tmp_path, "secret-bench")
    deployed(platform, folders, "reach-policy")

    def generation() -> float:
        ran = seq(platform, "eval", "run", "reach-policy", "--benchmark", "secret-bench", "--trials", "1")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        [row] = csv_rows(platform, eval_id_of(ran.stdout))
        return float(row["metrics.generation"])

    assert generation() == 1.0
    _set_secret(platform, second)  # the box that played the first eval is warm: it was handed the first
    assert generation() == 2.0

    leaked = seq(
        platform, "eval", "run", "reach-policy", "--benchmark", "secret-bench", "--trials", "1",
        "--param", "benchmark.leak=true",
    )  # fmt: skip
    eval_id = eval_id_of(leaked.stdout + leaked.stderr)
    shown = [
        leaked.stdout + leaked.stderr,
        seq(platform, "eval", "report", eval_id).stdout,
        seq(platform, "eval", "report", eval_id, "--csv").stdout,
        seq(platform, "eval", "episodes", eval_id).stdout,
        seq(platform, "eval", "logs", eval_id).stdout,
        httpx.get(
            f"{platform.url}/v1/eval/{eval_id}/details",
            headers={"Authorization": f"Bearer {platform.keys['alice']}"},
            timeout=30,
        ).text,
    ]
    report = httpx.get(
        f"{platform.url}/v1/eval/{eval_id}",
        headers={"Authorization": f"Bearer {platform.keys['alice']}"},
        timeout=30,
    ).json()
    shown.append(httpx.get(report["dashboard_url"], timeout=30).text)  # the run's page, as a browser reads it
    assert any("the token is ***, said out loud" in text for text in shown), shown
    assert not [text for text in shown if second in text or first in text]


# Policies of the shapes the SDK deploys with `episodes` declared ("own": state kept per episode; an infer
# taking `episode=`; a batched infer): each plays reach-bench as the plain one does, action for action. (The
# plain one is deployed here under its own name: this module's reach-policy has its settings changed by
# another test.)
PLAIN_POLICY = """\
import seq


@seq.policy(name="plain-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Plain(seq.Policy):
    @seq.infer
    def infer(self, obs):
        return [[max(-0.1, min(0.1, obs["target"] - obs["x"]))]]
"""
SHAPES = {
    "stateful-policy": """\
import seq


@seq.policy(name="stateful-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Stateful(seq.Policy):
    @seq.reset
    def reset(self):
        self.asked = 0

    @seq.infer
    def infer(self, obs):
        self.asked += 1
        return [[max(-0.1, min(0.1, obs["target"] - obs["x"]))]]
""",
    "episodic-policy": """\
import seq


@seq.policy(name="episodic-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Episodic(seq.Policy):
    @seq.infer
    def infer(self, obs, *, episode=None):
        return [[max(-0.1, min(0.1, obs["target"] - obs["x"]))]]
""",
    "observing-policy": """\
import seq


@seq.policy(name="observing-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Observing(seq.Policy):
    @seq.reset
    def reset(self):
        self.steps = []

    @seq.observe
    def observe(self, obs, *, step):
        self.steps.append(step)
        self.obs = obs

    @seq.infer
    def infer(self, *, episode=None):
        # Asked every step (replan at 1): each observation handed once, at the step it was made.
        if self.steps != list(range(len(self.steps))) or episode is None:
            raise RuntimeError(f"observed at steps {self.steps}")
        return [[max(-0.1, min(0.1, self.obs["target"] - self.obs["x"]))]]
""",
    "batched-policy": """\
import seq


@seq.policy(name="batched-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Batched(seq.Policy):
    @seq.sample
    def sample(self):
        return [("observe", {"x": 0.0, "target": 0.5}), ("act",)]

    @seq.concurrent(sizes=[1, 2, 4])
    @seq.infer
    def infer(self, obs):
        return [[[max(-0.1, min(0.1, o["target"] - o["x"]))]] for o in obs]
""",
}


def test_policies_with_episode_state_an_episode_argument_or_batches_deploy_and_play_as_the_plain_one(
    platform: Harness, folders: Path, tmp_path: Path
) -> None:
    deployed(platform, folders, "reach-bench")

    def played(name: str, source: str) -> list[tuple[str, str, str, str]]:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "policy.py").write_text(source)
        deployed(platform, tmp_path, name)
        ran = seq(platform, "eval", "run", name, "--benchmark", "reach-bench", "--trials", "4")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        rows = csv_rows(platform, eval_id_of(ran.stdout))
        return sorted((r["task"], r["seed"], r["steps"], r["success"]) for r in rows)

    plain = played("plain-policy", PLAIN_POLICY)
    assert len(plain) == 8 and {success for *_, success in plain} == {"true"}
    for name, source in SHAPES.items():
        assert played(name, source) == plain, name


VERSIONED = """\
import seq


@seq.policy(name="versioned-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Versioned(seq.Policy):
    @seq.infer
    def infer(self, obs):
        return [[GAIN * max(-0.1, min(0.1, obs["target"] - obs["x"]))]]


GAIN = {gain}
"""


def test_a_rollback_serves_an_earlier_version_until_the_next_deploy_and_a_name_moves_or_forks(
    platform: Harness, folders: Path, tmp_path: Path
) -> None:
    deployed(platform, folders, "reach-bench")
    folder = tmp_path / "versioned-policy"
    folder.mkdir()

    def deploy(gain: float) -> None:
        (folder / "policy.py").write_text(VERSIONED.format(gain=gain))
        deployed(platform, tmp_path, "versioned-policy")

    def ran(name: str) -> str:
        done = seq(platform, "eval", "run", name, "--benchmark", "reach-bench", "--trials", "1")
        assert done.returncode == 0, done.stdout + done.stderr
        found = re.search(rf"{name} v(\d+)", done.stdout)
        assert found, done.stdout
        return f"v{found.group(1)}"

    deploy(1.0)
    deploy(0.5)
    assert ran("versioned-policy") == "v2"
    rolled = seq(platform, "policy", "rollback", "versioned-policy")
    assert rolled.returncode == 0 and "now serves v1 (kept: v2)" in rolled.stdout, rolled.stdout
    assert ran("versioned-policy") == "v1"  # nothing rebuilt: the kept version serves
    versions = seq(platform, "policy", "versions", "versioned-policy").stdout
    assert re.search(r"v2\s+kept", versions) and re.search(r"v1\s+serving", versions), versions
    deploy(0.25)  # a deploy means "serve this": the pin goes
    assert ran("versioned-policy") == "v3"

    renamed = seq(platform, "policy", "rename", "versioned-policy", "moved-policy")
    assert renamed.returncode == 0, renamed.stdout + renamed.stderr
    assert ran("moved-policy") == "v3"
    gone = seq(platform, "policy", "status", "versioned-policy")
    assert gone.returncode == 4, gone.stdout + gone.stderr

    forked = seq(platform, "policy", "fork", "moved-policy", "forked-policy")
    assert forked.returncode == 0, forked.stdout + forked.stderr
    ready = seq(platform, "policy", "status", "forked-policy", "--wait", "--timeout", "120")
    assert ready.returncode == 0 and "ready" in ready.stdout, ready.stdout + ready.stderr
    assert ran("forked-policy") == "v1"  # a name of its own, its first version the source's code
    copied = seq(platform, "policy", "source", "forked-policy", "-o", str(tmp_path / "forked-src"))
    assert copied.returncode == 0, copied.stderr
    assert "GAIN = 0.25" in (tmp_path / "forked-src" / "policy.py").read_text()
    taken = seq(platform, "policy", "rename", "forked-policy", "moved-policy")
    assert taken.returncode == 5 and "is taken" in taken.stderr, taken.stdout + taken.stderr


def test_policy_ls_pages_by_its_limit_and_cursor(platform: Harness, folders: Path, tmp_path: Path) -> None:
    for name in ("paged-a", "paged-b"):
        copy = tmp_path / name
        shutil.copytree(folders / "reach-policy", copy)
        source = copy / "policy.py"
        source.write_text(source.read_text().replace('name="reach-policy"', f'name="{name}"'))
        deployed(platform, tmp_path, name)
    first = seq(platform, "policy", "ls", "--limit", "1")
    assert first.returncode == 0, first.stdout + first.stderr
    footer = re.search(r"^1–1 of (\d+) — next page: --cursor 1$", first.stdout, re.M)
    assert footer is not None and int(footer.group(1)) >= 2, first.stdout
    total = int(footer.group(1))
    rows = lambda out: re.findall(r"^(\S+)\s+(?:ready|building|failed|stopped)", out, re.M)  # noqa: E731
    second = seq(platform, "policy", "ls", "--limit", "1", "--cursor", "1")
    assert second.returncode == 0 and len(rows(first.stdout)) == len(rows(second.stdout)) == 1, second.stdout
    assert rows(first.stdout) != rows(second.stdout)
    assert f"2–2 of {total}" in second.stdout
