"""The real Sequences CLI (`seq`, sequence-ai 0.51.5, installed by `make` in a venv apart: `.venv-seq`) drives
a real Yardstick platform, unchanged, as a Sequences user would: `SEQUENCES_BASE_URL` and
`SEQUENCES_API_KEY` (a Yardstick key), then `seq eval run`, `report`, `episodes`, `cancel` on the
platform's catalogue and the policies it serves. Its exit statuses are the contract's: 0 ok, 2 a bad
request, 3 no key, 4 not found, 8 a gate not met."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from conftest import fresh_database
from deadlines import give_up_at
from hosted_helpers import set_secret
from platform_harness import Harness, running_platform
from yardstick.core import admin
from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.store.models import ServedPolicy

SEQ = Path(__file__).parent.parent / ".venv-seq" / "bin" / "seq"
TOYS = Path(__file__).parent / "toys.py"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    assert SEQ.exists(), f"{SEQ} is missing: `make env` installs the Sequences CLI in a venv apart"
    folder = tmp_path_factory.mktemp(request.param)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, per_day=200) as harness:
        with harness.platform.db.writing() as session:
            session.add(ServedPolicy(name="slower", reference=f"{TOYS}:SlowRows", params={}))
            admin.create_eval(
                session, "toys.endless", f"{TOYS}:Tally", choice=admin.EvalTasks(["never"], trials=4)
            )
        harness.wait_for_workers(60)
        yield harness


def seq(platform: Harness, *args: str, key: str | None = "alice") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env["SEQUENCES_BASE_URL"] = platform.url
    if key is not None:
        env["SEQUENCES_API_KEY"] = platform.keys[key]
    return subprocess.run([str(SEQ), *args], env=env, capture_output=True, text=True, timeout=180)


def eval_id_of(output: str) -> str:
    found = re.search(r"eval (ev-[0-9a-f]+)", output)
    assert found, output
    return found.group(1)


def test_an_eval_runs_to_a_report_and_its_gate(platform: Harness) -> None:
    met = seq(
        platform,
        "eval",
        "run",
        "rows",
        "--benchmark",
        "toys.tally",
        "--trials",
        "2",
        "--gate",
        "success>=0.5",
    )
    assert met.returncode == 0, met.stdout + met.stderr
    # Tally succeeds on even seeds: trials 0 and 1 run seeds 0 and 1, so each task is 1 of 2.
    assert "report: completed" in met.stdout
    assert "success: overall 50.0% (n=4)" in met.stdout
    assert "task three: 50.0% (n=2)" in met.stdout and "task ten: 50.0% (n=2)" in met.stdout
    assert "gate: success 0.500 >= 0.5 — passed" in met.stdout + met.stderr
    missed = seq(
        platform,
        "eval",
        "run",
        "rows",
        "--benchmark",
        "toys.tally",
        "--trials",
        "2",
        "--gate",
        "success>=0.9",
    )
    assert missed.returncode == 8, missed.stdout + missed.stderr
    assert "gate: success 0.500 >= 0.9 — failed" in missed.stderr


def test_the_report_is_the_same_episodes_as_an_eval_run_in_process(platform: Harness) -> None:
    ran = seq(platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--trials", "3")
    assert ran.returncode == 0, ran.stderr
    rows = csv_rows(platform, eval_id_of(ran.stdout))
    local = evaluate(
        RunRequest(
            work=Work(Component(f"{TOYS}:Tally"), Component(f"{TOYS}:Rows")),
            tasks=["three", "ten"],
            trials=3,
            workers=0,
        )
    )
    mine = sorted((r["task"], int(r["seed"]), r["success"], int(r["steps"])) for r in rows)
    theirs = sorted((r.task, r.seed, "true" if r.success else "false", r.steps) for r in local.results)
    assert mine == theirs


def csv_rows(platform: Harness, eval_id: str) -> list[dict[str, str]]:
    shown = seq(platform, "eval", "report", eval_id, "--csv")
    assert shown.returncode == 0, shown.stderr
    return list(csv.DictReader(io.StringIO(shown.stdout)))


def test_report_csv_has_the_documented_columns(platform: Harness) -> None:
    ran = seq(
        platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--tasks", "three", "--trials", "2"
    )
    rows = csv_rows(platform, eval_id_of(ran.stdout))
    assert len(rows) == 2
    for column in ("index", "arm", "task", "seed", "repeat", "success", "seconds", "max_seconds", "steps",
                   "terminated", "truncated", "timed_out", "error", "metrics.total"):  # fmt: skip
        assert column in rows[0], column
    assert [(r["task"], r["seed"], r["success"]) for r in rows] == [
        ("three", "0", "true"),
        ("three", "1", "false"),
    ]


@pytest.mark.parametrize(("limit", "steps"), [("3.5", 35), ("0.5", 5)])
def test_eval_max_seconds_raises_or_lowers_the_limit_the_csv_states(
    platform: Harness, limit: str, steps: int
) -> None:
    # toys.endless is Tally's "never", 2 s a task: Rows at 10 Hz plays until the limit in force.
    ran = seq(platform, "eval", "run", "rows", "--benchmark", "toys.endless", "--trials", "1",
              "--param", f"eval.max_seconds={limit}")  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [row] = csv_rows(platform, eval_id_of(ran.stdout))
    assert (int(row["steps"]), float(row["seconds"]), float(row["max_seconds"])) == (
        steps,
        steps / 10,
        float(limit),
    )
    assert row["truncated"] == "true" and row["error"] == ""


def test_a_dry_run_lays_out_the_selection_and_files_nothing(platform: Harness) -> None:
    before = httpx.get(f"{platform.url}/v1/submissions.list", headers=auth(platform)).json()
    dry = seq(
        platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--trials", "three=5,*=1", "--dry-run"
    )
    assert dry.returncode == 0, dry.stderr
    assert "episodes: 6 (2 tasks)" in dry.stdout
    assert re.search(r"three: seeds \[0, 1, 2, 3\], 5 episodes", dry.stdout), dry.stdout
    after = httpx.get(f"{platform.url}/v1/submissions.list", headers=auth(platform)).json()
    assert after == before


def auth(platform: Harness) -> dict[str, str]:
    return {"Authorization": f"Bearer {platform.keys['alice']}"}


def test_per_task_seeds_and_trials_and_repeats(platform: Harness) -> None:
    ran = seq(platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--seeds", "three=2,*=1",
              "--trials", "three=3,*=1")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    rows = csv_rows(platform, eval_id_of(ran.stdout))
    three = [(r["seed"], r["repeat"]) for r in rows if r["task"] == "three"]
    assert three == [
        ("2", "0"),
        ("2", "1"),
        ("2", "2"),
    ]  # trial k runs seeds[k % 1]: the same start, repeated
    assert [r["seed"] for r in rows if r["task"] == "ten"] == ["1"]


def test_rerun_unsuccessful_replays_only_what_failed(platform: Harness) -> None:
    first = seq(platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--trials", "4")
    earlier = eval_id_of(first.stdout)
    again = seq(platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--rerun-unsuccessful", earlier)
    assert again.returncode == 0, again.stdout + again.stderr
    # Said as what it reran (the episodes that did not succeed), never as a rerun of the errors alone.
    assert f"the episodes {earlier} ran and did not succeed on" in again.stdout, again.stdout
    assert "reran the errors" not in again.stdout
    rows = csv_rows(platform, eval_id_of(again.stdout))
    # Tally fails on odd seeds: seeds 1 and 3 of each task.
    assert sorted((r["task"], r["seed"]) for r in rows) == [
        ("ten", "1"),
        ("ten", "3"),
        ("three", "1"),
        ("three", "3"),
    ]
    assert all(r["success"] == "false" for r in rows)


def test_a_sweep_runs_one_arm_per_value_on_the_same_episodes(platform: Harness) -> None:
    sweep = ("--sweep", "delay=0.0,0.001")
    ran = seq(
        platform,
        "eval",
        "run",
        "slower",
        "--benchmark",
        "toys.tally",
        "--tasks",
        "three",
        "--trials",
        "2",
        *sweep,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "arms:" in ran.stdout
    eval_id = eval_id_of(ran.stdout)
    rows = csv_rows(platform, eval_id)
    by_arm = {arm: sorted((r["task"], r["seed"]) for r in rows if r["arm"] == arm) for arm in ("0", "1")}
    assert by_arm["0"] == by_arm["1"] == [("three", "0"), ("three", "1")]
    # Each arm's parameters as the arm ran them, and where each came from.
    assert "params, arm 0: policy.delay=0.0 (" in ran.stdout and "params, arm 1: policy.delay=0.001 (" in (
        ran.stdout
    ), ran.stdout
    report = httpx.get(f"{platform.url}/v1/eval/{eval_id}", headers=bearer(platform), timeout=60).json()
    assert [a["policy"]["delay"] for a in report["arm_params"]] == [
        {"value": 0.0, "source": "cli"},
        {"value": 0.001, "source": "cli"},
    ]
    # The arms are side by side, never pooled, and neither is the eval's: the top level names no metric.
    assert report["metrics"] == {}
    assert [a["metrics"]["success"]["n"] for a in report["arms"]] == [2, 2]
    assert "success: overall" not in ran.stdout.split("arms:")[0], ran.stdout


def bearer(platform: Harness) -> dict[str, str]:
    return {"Authorization": f"Bearer {platform.keys['alice']}"}


def test_cancel_stops_a_running_eval(platform: Harness) -> None:
    started = seq(
        platform, "eval", "run", "slower", "--benchmark", "toys.endless", "--trials", "40", "--no-wait"
    )
    assert started.returncode == 0, started.stderr
    eval_id = eval_id_of(started.stdout)
    cancelled = seq(platform, "eval", "cancel", eval_id)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    report = seq(platform, "eval", "report", eval_id)
    assert "report: canceled" in report.stdout, report.stdout
    # An ended eval is a state, not a bad request: the CLI's conflict, said in this contract's words.
    again = seq(platform, "eval", "cancel", eval_id)
    assert again.returncode == 5, again.stdout + again.stderr
    assert f"error[conflict]: eval_id: eval {eval_id} already ended (canceled)" in again.stderr, again.stderr
    assert "submission" not in again.stderr


def test_a_failed_episode_is_counted_done_and_not_scored(platform: Harness) -> None:
    """The CLI scores `done - failed` of an eval's episodes: a failed episode is one that is done."""
    ran = seq(
        platform, "eval", "run", "crash", "--benchmark", "toys.tally", "--tasks", "ten", "--trials", "1"
    )
    eval_id = eval_id_of(ran.stdout + ran.stderr)
    headers = {"Authorization": f"Bearer {platform.keys['alice']}"}
    deadline = give_up_at(180)
    while httpx.get(f"{platform.url}/v1/eval/{eval_id}", headers=headers, timeout=60).json()["status"] in (
        "queued",
        "pending",
        "running",
    ):
        assert time.monotonic() < deadline, f"{eval_id} did not end"
        threading.Event().wait(0.2)
    report = seq(platform, "eval", "report", eval_id)
    said = report.stdout + report.stderr
    assert "partial results: 0 of 1 episodes scored (1 failed)" in said, said
    # The episode's error, once: the run's reason names it, and no second line repeats it.
    assert said.count("boom") == 1, said
    assert "1 / 1 episodes done (1 failed)" in seq(platform, "eval", "status", eval_id).stdout

    shown = seq(platform, "benchmark", "tasks", "toys.tally")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert re.search(r"^three\s", shown.stdout, re.M) and re.search(r"^ten\s", shown.stdout, re.M), (
        shown.stdout
    )
    unknown = seq(platform, "benchmark", "tasks", "toys.none")
    assert unknown.returncode == 4 and "toys.tally" in unknown.stderr, unknown.stderr


def test_episodes_lists_each_episode_with_its_outcome(platform: Harness) -> None:
    ran = seq(platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--tasks", "ten", "--trials", "2")
    listed = seq(platform, "eval", "episodes", eval_id_of(ran.stdout))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("ten") >= 2


def test_refusals_reach_the_cli_as_its_exit_statuses(platform: Harness) -> None:
    nobody = seq(platform, "eval", "run", "rows", "--benchmark", "toys.tally", key=None)
    assert nobody.returncode == 3
    unknown = seq(platform, "eval", "run", "nope", "--benchmark", "toys.tally")
    assert unknown.returncode == 4 and "error[not_found]" in unknown.stderr and "rows" in unknown.stderr
    bad_task = seq(platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--tasks", "fly")
    assert (
        bad_task.returncode == 2
        and "error[invalid_request]" in bad_task.stderr
        and "'fly'" in bad_task.stderr
    )
    foreign = seq(platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--seeds", "99")
    assert foreign.returncode == 2 and "[99] are not seeds" in foreign.stderr
    missing = seq(platform, "eval", "report", "ev-1234")
    assert missing.returncode == 4
    # An eval past the platform's episodes an eval is refused before one episode is laid out.
    huge = seq(platform, "eval", "run", "rows", "--benchmark", "toys.tally", "--trials", "60000")
    assert huge.returncode == 2 and "120,000 episodes" in huge.stderr and "10,000" in huge.stderr, huge.stderr


def test_secrets_are_set_listed_and_removed_and_their_values_never_come_back(platform: Harness) -> None:
    set_secret(platform.url, platform.keys["alice"], "lab", "LAB_TOKEN", "s3cr3t-value")
    listed = seq(platform, "secret", "ls")
    assert listed.returncode == 0 and "lab" in listed.stdout and "LAB_TOKEN" in listed.stdout
    assert "s3cr3t-value" not in listed.stdout
    with platform.platform.db.reading() as session:
        stored = session.execute(text("SELECT sealed FROM secrets")).scalars().all()
    assert stored and all("s3cr3t-value" not in value for value in stored)
    assert seq(platform, "secret", "rm", "lab").returncode == 0
    assert "lab" not in seq(platform, "secret", "ls").stdout
    assert seq(platform, "secret", "rm", "lab").returncode == 4
