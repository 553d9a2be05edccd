"""Every command and flag of the real `seq` CLI (sequence-ai 0.51.5) against one `yardstick server`, on SQLite
and PostgreSQL: each row of `ROWS` says what the SDK promises, what Yardstick answers, and how the command
must end - it works (`ok`), it is refused in the contract's error body naming the feature and why
(`refused`, with the code), the CLI itself refuses it before asking (`usage`), or it is a local tool that
never reaches the platform (`local`). Whatever a row expects, no command may crash the CLI (a traceback) or
answer the bare `Not Found` that reads as "your thing does not exist".

`test_every_command_and_flag_of_the_cli_has_a_row` reads the CLI's own parser: a new SDK version's new
command or flag fails it until a row says what Yardstick does with it. `python tests/test_sequences_sweep.py`
prints the table.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
import pytest

from conftest import fresh_database, one_database
from hosted_helpers import seq_cli, set_secret

ROOT = Path(__file__).parent.parent
SEQ = ROOT / ".venv-seq" / "bin" / "seq"
SEQ_PYTHON = ROOT / ".venv-seq" / "bin" / "python"
EXAMPLES = Path(__file__).parent / "seq_examples"
SECRET_VALUE = "chatty-s3cr3t-value-0451"

Ends = Literal["ok", "refused", "usage", "local"]


@dataclass(frozen=True)
class Row:
    """One command line (`{P}` the deployed policy, `{B}` the benchmark, `{E}` an eval of them, `{T}` a
    scratch folder, `{F}` the examples' folders), what the SDK promises of it, what Yardstick answers."""

    argv: str
    promise: str
    answer: str
    ends: Ends = "ok"
    code: str | None = None  # the error code a refusal carries
    shows: str | None = None  # text the output must hold (a regular expression)
    stdin: str = ""  # what is typed at its prompt


NOT_OFFERED = "dependency_missing"
ROWS: tuple[Row, ...] = (
    # --- the core flow ---------------------------------------------------------------------------------
    Row("init --list", "lists the templates", "the three Yardstick ships", shows="metaworld-policy"),
    Row(
        "init gym-benchmark {T}/gym-bench --no-source", "writes a template's folder", "written", shows="wrote"
    ),
    Row(
        "init toy-policy {T}/init",
        "starts a folder from a template",
        "no such template: named, with where to look",
        "refused",
        "not_found",
        "no template named",
    ),
    Row(
        "deploy {F}/chatty-policy --dry-run",
        "checks and prices a policy, building nothing",
        "checked, priced from the install's tariff",
        shows=r"--dry-run",
    ),
    Row(
        "deploy {F}/chatty-bench --dry-run",
        "checks a benchmark, building nothing",
        "checked",
        shows="nothing was built",
    ),
    Row(
        "deploy {F}/chatty-policy --no-wait --timeout 120",
        "submits without following the build",
        "accepted",
        shows="accepted",
    ),
    Row(
        "deploy {F}/chatty-policy --replace --hours-per-day 2 --starts-per-day 3 --robots 1 --max-gpus 1",
        "deploys, the price estimate at the given use",
        "deployed (max_gpus is a cap: 0 cards held)",
        shows="ready",
    ),
    Row(
        "deploy {F}/chatty-policy --freeze",
        "deploys and keeps the built environment",
        "deployed: every version's environment is kept as long as the version",
        shows="ready",
    ),
    Row(
        "deploy {F}/chatty-policy --name chatty-copy",
        "deploys under another name",
        "deployed",
        shows="chatty-copy",
    ),
    Row(
        "deploy {F}/gpu-policy --max-gpus 1",
        "deploys on an L4",
        "refused: no GPUs here, by name",
        "refused",
        NOT_OFFERED,
        "resources.gpu",
    ),
    # --- evals -----------------------------------------------------------------------------------------
    Row(
        "eval run {P} --benchmark {B} --dry-run",
        "says what would run and cost",
        "the layout and cost",
        shows="episodes",
    ),
    Row(
        "eval run {P} --benchmark {B} --no-wait --trials 1", "starts and returns", "started", shows="started"
    ),
    Row(
        "eval run {P} --benchmark {B} --tasks near --seeds 0,1 --spend-cap 5 --gate success>=0.5 "
        "--timeout 300",
        "runs the selection and checks a gate",
        "ran, gate passed",
        shows="passed",
    ),
    Row(
        "eval run {P} --benchmark {B} --trials near=1 --param policy.gain=0.5 --replay none",
        "runs with a parameter, no replay",
        "ran with gain 0.5",
        shows="success",
    ),
    Row(
        "eval run {P} --benchmark {B} --trials 1 --sweep policy.gain=0.5,1.0",
        "one arm a value",
        "two arms",
        shows="arm",
    ),
    Row(
        "eval run {P} --benchmark {B} --rerun-failed {E}",
        "reruns the errored episodes",
        "reruns them (none errored: the eval whole)",
        shows="success",
    ),
    Row(
        "eval run {P} --benchmark {B} --rerun-unsuccessful {E}",
        "reruns the unsuccessful episodes",
        "reruns the far task's",
        shows="far",
    ),
    Row(
        "eval run {P} --benchmark {B} --policy-machines 2",
        "two policy machines",
        "refused: the install's workers play it",
        "refused",
        NOT_OFFERED,
        "policy_machines",
    ),
    Row(
        "eval run {P} --benchmark {B} --benchmark-machines 2",
        "two benchmark machines an arm",
        "refused: the install's workers play it",
        "refused",
        NOT_OFFERED,
        "benchmark_machines",
    ),
    Row(
        "eval run {P} --benchmark {B} --policy-gpu L4",
        "the policy on an L4",
        "refused: no GPUs",
        "refused",
        NOT_OFFERED,
        "policy_gpu",
    ),
    Row(
        "eval run {P} --benchmark {B} --adapter my-adapter",
        "maps I/O through an adapter",
        "an adapter never registered: named",
        "refused",
        "not_found",
        "no adapter 'my-adapter'",
    ),
    Row(
        "eval run {P} --benchmark {B} --adapter to-delta",
        "refuses a pair the adapter does not declare, before anything runs",
        "refused, its pairs named",
        "refused",
        "conflict",
        "declares the pairs reach-bench → delta-policy",
    ),
    Row(
        "eval run {P} --benchmark {B} --trials 1 --replay 3d",
        "records 3D replays where the benchmark declares replay=",
        "ran: this benchmark declares none, so none recorded (tests/test_sequences_replays.py: ones that do)",
        shows="success",
    ),
    Row("eval run {P} --benchmark {B} --envs 4", "gone from the SDK", "the CLI refuses it", "usage"),
    Row("eval run {P} --benchmark {B} --max-steps 4", "gone from the SDK", "the CLI refuses it", "usage"),
    Row("eval run {P} --benchmark {B} --variants 4", "gone from the SDK", "the CLI refuses it", "usage"),
    Row("eval run {P} --benchmark {B} --record", "gone from the SDK", "the CLI refuses it", "usage"),
    Row("eval run {P} --benchmark {B} --latency-ms 50", "gone from the SDK", "the CLI refuses it", "usage"),
    Row(
        "deploy {F}/broken-policy",
        "deploys, or says why its build failed",
        "failed: its constructor's error",
        "refused",
        "conflict",
        "broken on purpose",
    ),
    Row(
        "eval run broken-policy --benchmark {B}",
        "an eval of a deployment whose build failed",
        "refused naming why, not listed on offer",
        "refused",
        "conflict",
        "no version that passed its build",
    ),
    Row(
        "eval run {P} --benchmark no-such-bench",
        "an unknown benchmark",
        "not found, what is on offer",
        "refused",
        "not_found",
        "on offer",
    ),
    Row("eval status {E}", "the eval's state and progress", "completed, n of n", shows="completed"),
    Row("eval status {E} --watch --every 1", "watches until it ends", "ended at once", shows="completed"),
    Row("eval report {E} --wait --timeout 60", "the report", "the report", shows="success"),
    Row(
        "eval report {E} --videos {T}/videos",
        "saves the recordings",
        "none kept by this benchmark",
        shows="no recordings",
    ),
    Row("eval report {E} --csv -o {T}/report.csv", "the episodes as CSV", "written", shows="wrote"),
    Row(
        "eval report {E} --csv --out {T}/report.csv", "the episodes as CSV (--out)", "written", shows="wrote"
    ),
    Row("eval report {E} --trajectories {T}/traj", "saves each episode's trajectory", "saved", shows="saved"),
    Row(
        "eval report {E} --replays {T}/replays",
        "saves 3D replays",
        "none recorded (the benchmark declares no replay=): said; test_sequences_replays.py saves some",
        shows="no 3D replays",
    ),
    Row("eval ls {P} --limit 2", "the policy's evals", "a page", shows="ev-"),
    Row(
        "eval ls {P} --cursor not-a-cursor",
        "a page from a cursor",
        "refused: not a cursor it handed out",
        "refused",
        "invalid_request",
        "cursor",
    ),
    Row("eval ls {P} --limit 1 --cursor 1", "the next page", "the second eval", shows="2–2|2-2"),
    Row(
        "eval ls --benchmark {B} --since 2026-01-01 --limit 5 --cursor 0",
        "the benchmark's evals",
        "a page",
        shows="ev-",
    ),
    Row(
        "eval episodes {E} --task far --outcome failure --arm 0 --limit 1",
        "one page of episodes",
        "the far task's failures",
        shows="far",
    ),
    Row("eval episodes {E} --limit 1 --cursor 1", "the next page", "the next page", shows="near|far"),
    Row("eval episodes {E} --csv -o {T}/episodes.csv", "the episodes as CSV", "written", shows="wrote"),
    Row(
        "eval episodes {E} --csv --out {T}/episodes2.csv",
        "the episodes as CSV (--out)",
        "written",
        shows="wrote",
    ),
    Row(
        "eval logs {E}",
        "the benchmark's and the policy's lines",
        "both, secrets masked",
        shows=r"bench stdout: reset",
    ),
    Row(
        "eval logs {E} --side benchmark --limit 100",
        "the benchmark's lines",
        "its stdout and stderr",
        shows=r"token \*\*\*",
    ),
    Row(
        "eval logs {E} --side policy --arm 0",
        "the policy's lines",
        "its stdout and stderr",
        shows="policy stdout",
    ),
    Row(
        "eval logs {E} --machine no-such-machine",
        "one machine's lines",
        "none from that machine",
        shows="no lines",
    ),
    Row("eval logs {E} --follow", "follows until the eval ends", "ends with it", shows="completed"),
    Row(
        "eval cancel {E}",
        "stops a running eval",
        "refused: it ended already, a conflict naming its status",
        "refused",
        "conflict",
        "already ended",
    ),
    # --- policies --------------------------------------------------------------------------------------
    Row("policy ls --limit 5 --cursor 0", "the deployments", "listed", shows="chatty-policy"),
    Row(
        "policy status {P} --wait --timeout 60", "its state and fleet", "ready, no fleet: said", shows="ready"
    ),
    Row("policy versions {P}", "its versions and builds", "listed", shows="v1"),
    Row("policy source {P} -o {T}/policy-src", "its code, downloaded", "downloaded", shows="file"),
    Row("policy source {P} --out {T}/policy-src2", "its code (--out)", "downloaded", shows="file"),
    Row("policy settings {P}", "its settings", "listed", shows="settings"),
    Row("policy set {P} timeouts.request=30", "changes a setting", "changed", shows="timeouts.request"),
    Row(
        "policy set {P} hz=5",
        "an unknown setting",
        "refused by name",
        "refused",
        "invalid_request",
        "not a setting",
    ),
    Row("policy logs {P} --build", "its newest build's steps", "image and check", shows="check"),
    Row("policy logs {P}@v1 --build", "one version's build", "image and check", shows="check"),
    Row(
        "policy logs {P}",
        "its serving events",
        "refused: served only inside evals",
        "refused",
        NOT_OFFERED,
        "eval logs",
    ),
    Row(
        "policy logs {P} --rid r1 --all --worker w1 --since 1h",
        "one request's timeline",
        "refused: served only inside evals",
        "refused",
        NOT_OFFERED,
        "eval logs",
    ),
    Row(
        "policy doctor {P}",
        "probes the direct-connect chain",
        "refused: no per-act diagnostics kept",
        "refused",
        NOT_OFFERED,
        "diagnostics",
    ),
    Row(
        "policy freeze {P}@v1", "keeps a version's environment", "kept already: its size said", shows="frozen"
    ),
    Row(
        "policy freeze {P}@v1 --off",
        "unfreezes it",
        "refused: nothing to let go",
        "refused",
        NOT_OFFERED,
        "unfreezing",
    ),
    Row(
        "policy upgrade {P} --to toy-policy@v2 --dry-run --no-wait --timeout 60",
        "moves to a newer template",
        "refused: no templates",
        "refused",
        NOT_OFFERED,
        "template",
    ),
    Row(
        "deploy {F}/chatty-policy-v2",
        "deploys other code under the name",
        "its next version, serving",
        shows="ready",
    ),
    Row(
        "policy rollback {P}",
        "serves the version before, nothing rebuilt",
        "v1 serves again",
        shows="serves v1",
    ),
    Row(
        "policy rollback {P}",
        "serves the version before",
        "refused: v1 has none before it",
        "refused",
        "conflict",
        "no ready version before",
    ),
    Row("policy rename chatty-copy chatty-renamed", "renames it", "renamed", shows="chatty-renamed"),
    Row("policy fork {P} chatty-fork", "copies it under a new name", "a copy, building", shows="chatty-fork"),
    Row(
        "policy data export {P} -o {T}/data --format jsonl",
        "its captured robot data",
        "its files (none: no robot played it)",
        shows="wrote 0 file",
    ),
    Row(
        "policy data export {P} --out {T}/data2",
        "its captured robot data (--out)",
        "nothing captured yet, said",
        shows="nothing captured yet",
    ),
    Row("policy stop {P}", "stops it", "stopped", shows="stopped"),
    Row("policy start {P}", "starts it", "started", shows="started"),
    Row(
        "policy status no-such-policy",
        "an unknown policy",
        "not found by name",
        "refused",
        "not_found",
        "no-such-policy",
    ),
    Row(
        "prod promote {P}",
        "makes it a production policy",
        "refused by name",
        "refused",
        NOT_OFFERED,
        "production",
    ),
    # --- robots and planners ---------------------------------------------------------------------------
    Row("robot add --policy {P}", "a robot key", "a key, shown once", shows="seq_robot_"),
    Row("robot list", "the robot keys", "the key just added, no connection", shows="0 connections"),
    Row("robot revoke rk_1", "revokes one", "not found by name", "refused", "not_found", "rk_1"),
    # (test_planners.py deploys a planner and drives its keys; here none is deployed.)
    Row(
        "planner key add site --member {P} --name ipad",
        "a planner's key",
        "not found: no planner deployed",
        "refused",
        "not_found",
        "no planner 'site'",
    ),
    Row("planner key list site", "its keys", "not found", "refused", "not_found", "no planner 'site'"),
    Row(
        "planner key revoke site pk_1",
        "revokes one",
        "not found",
        "refused",
        "not_found",
        "no planner 'site'",
    ),
    # --- benchmarks ------------------------------------------------------------------------------------
    Row("benchmark ls --limit 5 --cursor 0", "the benchmarks", "listed", shows="chatty-bench"),
    Row("benchmark versions {B}", "its versions", "listed", shows="v1"),
    Row("benchmark tasks {B}", "its tasks", "listed", shows="near"),
    Row("benchmark status {B} --wait --timeout 60", "its build state", "ready", shows="ready"),
    Row("benchmark source {B} -o {T}/bench-src", "its code", "downloaded", shows="file"),
    Row("benchmark source {B} --out {T}/bench-src2", "its code (--out)", "downloaded", shows="file"),
    Row("benchmark logs {B}", "its runs' lines", "the newest runs' lines", shows="bench stdout"),
    Row("benchmark logs {B} --worker {E} --since 1d", "one run's lines", "that run's", shows="bench"),
    Row("benchmark logs {B} --build", "its build and check log", "phases, check, log", shows="check"),
    Row("benchmark freeze {B}@v1", "keeps a version's environment", "kept already", shows="frozen"),
    Row(
        "benchmark freeze {B}@v1 --off",
        "unfreezes it",
        "refused: nothing to let go",
        "refused",
        NOT_OFFERED,
        "unfreezing",
    ),
    Row(
        "benchmark upgrade {B} --to toy-bench@v2 --dry-run --no-wait --timeout 60",
        "a newer template",
        "refused: no templates",
        "refused",
        NOT_OFFERED,
        "template",
    ),
    Row(
        "benchmark cancel {B}",
        "stops a build in flight",
        "refused: none in flight",
        "refused",
        "conflict",
        "no build",
    ),
    Row("benchmark rm {B} --dry-run", "says what rm would touch, deleting nothing", "listed", shows="would"),
    # --- adapters ---------------------------------------------------------------------------------------
    Row(
        "deploy {F}/to-delta --dry-run",
        "checks an adapter's registration, registering nothing",
        "the platform's check: the version it already is",
        shows="this code is to-delta@v1 already",
    ),
    Row("adapter ls --limit 5 --cursor 0", "the adapters", "listed with their pairs", shows="to-delta"),
    Row(
        "adapter source to-delta -o {T}/adapter --force",
        "its file",
        "written byte for byte",
        shows="to-delta@v1 ->",
    ),
    Row(
        "adapter source to-delta --out {T}/adapter2",
        "its file (--out)",
        "written byte for byte",
        shows="to-delta@v1 ->",
    ),
    Row("adapter check to-delta@v1", "checks a registered one here", "its two methods", shows="to_policy"),
    Row("adapter rm spare-delta", "removes it", "removed", shows="removed: spare-delta"),
    Row("adapter rm my-adapter", "removes it", "none such: named", "refused", "not_found", "no adapter"),
    Row("adapter check {T}/no-such-adapter.py", "checks one locally", "the CLI's own: no such file", "usage"),
    Row(
        "adapter check {T}/no-such-adapter.py -m x --benchmark {B} --policy {P} --no-record",
        "checks one against a pair",
        "the CLI refuses the flags it retired",
        "usage",
    ),
    # --- storage ---------------------------------------------------------------------------------------
    Row(
        "volume put chatty-vol {T}/weights --kind checkpoint",
        "uploads a volume",
        "uploaded",
        shows="chatty-vol",
    ),
    Row("volume ls --limit 5 --cursor 0", "the volumes", "listed", shows="chatty-vol"),
    Row("volume show chatty-vol", "one volume", "shown", shows="chatty-vol"),
    Row("volume rm chatty-vol --yes", "removes it", "removed", shows="chatty-vol"),
    Row(
        "volume show chatty-vol",
        "a removed volume",
        "not found by name",
        "refused",
        "not_found",
        "chatty-vol",
    ),
    Row(
        "secret set chatty-extra --env EXTRA_TOKEN",
        "sets a secret, its value typed",
        "set",
        stdin="an-extra-value\n",
    ),
    Row("secret ls", "the secrets, no values", "listed", shows="chatty-extra"),
    Row("secret rm chatty-extra", "removes one", "removed", shows="chatty-extra"),
    Row(
        "secret rm no-such-secret",
        "removes one",
        "not found by name",
        "refused",
        "not_found",
        "no-such-secret",
    ),
    # --- account ---------------------------------------------------------------------------------------
    Row(
        "account",
        "the balance, GPUs, limits",
        "credits as dollars, 0 GPUs, the org's limits",
        shows="balance",
    ),
    Row("gpus", "the cards and prices", "no cards; a core-hour from the tariff", shows="per core-hour"),
    Row(
        "usage --since 2026-11-01 --until 2026-12-31 --by day --group deployment --csv",
        "machine-hours used and their cost",
        "what its evals were charged (none: a packaged org), 0 card-hours",
        shows="start,group",
    ),
    Row("usage --policy {P}", "one policy's usage", "its evals' charges", shows="chatty-policy"),
    Row(
        "audit --limit 5 --before 100000",
        "who did what, newest first",
        "the org's changes from the install's append-only log",
        shows=r"(secret|volume|deployment|benchmark|eval)\.",
    ),
    Row("models", "the VLM models", "refused: no model service", "refused", NOT_OFFERED, "model service"),
    Row(
        "models --endpoint chat",
        "the chat models",
        "refused: no model service",
        "refused",
        NOT_OFFERED,
        "model service",
    ),
    # --- local tools (never reach the platform) --------------------------------------------------------
    Row(
        "port export {F}/chatty-bench -o {T}/port --trials 1 --tasks near --rollout-steps 2",
        "exports scenes here",
        "a local tool: needs MuJoCo here",
        "local",
    ),
    Row(
        "port check-model {T}/port --engine mjwarp",
        "compiles a scene bundle here",
        "a local tool: needs MuJoCo Warp here",
        "local",
    ),
    Row(
        "port scaffold {T}/port --engine mjwarp -o {T}/scaffold --worlds 2 --envs 2 --model m --no-pins "
        "--force",
        "writes a GPU benchmark's skeleton",
        "a local tool",
        "local",
    ),
    Row(
        "port compare {F}/chatty-bench --steps 2 --atol 0.1 --episodes 1 --conditions 1 --seed 0",
        "compares motion here",
        "a local tool",
        "local",
    ),
    Row(
        "port convert {F}/chatty-bench --engine mjwarp -o {T}/convert --trials 1 --worlds 2 --envs 2 --force",
        "export, check and scaffold",
        "a local tool",
        "local",
    ),
    # --- last: what removes ----------------------------------------------------------------------------
    Row("secret rm chatty", "removes a secret", "removed", shows="chatty"),
    Row("policy rm chatty-renamed --dry-run", "says what rm would touch", "listed", shows="would"),
    Row("policy rm chatty-renamed --force", "removes it", "removed", shows="chatty-renamed"),
    Row("benchmark rm {B} --force", "removes it", "removed", shows="chatty-bench"),
)


# --- the platform ------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=one_database("sqlite"))
def swept(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """One server, the chatty benchmark and policy deployed and one eval of them played."""
    from platform_harness import running_platform

    assert SEQ.exists(), f"{SEQ} is missing: `make env` installs the Sequences CLI in a venv apart"
    folder = tmp_path_factory.mktemp(f"sweep-{request.param}")
    folders = folder / "code"
    for name in ("chatty-bench", "chatty-policy", "to-delta"):
        shutil.copytree(EXAMPLES / name, folders / name)
    spare = folders / "spare-delta"  # an adapter to remove
    shutil.copytree(folders / "to-delta", spare)
    (spare / "adapter.py").write_text(
        (spare / "adapter.py").read_text().replace('"to-delta"', '"spare-delta"')
    )
    second = folders / "chatty-policy-v2"  # the same deployment, other code: its next version
    shutil.copytree(folders / "chatty-policy", second)
    (second / "policy.py").write_text((second / "policy.py").read_text() + "\n# its second version\n")
    (folders / "broken-policy").mkdir()
    (folders / "broken-policy" / "policy.py").write_text(BROKEN_POLICY)
    gpu = (folders / "chatty-policy" / "policy.py").read_text().replace('gpu="cpu"', 'gpu="L4"')
    (folders / "gpu-policy").mkdir()
    (folders / "gpu-policy" / "policy.py").write_text(gpu.replace("chatty-policy", "gpu-policy"))
    scratch = folder / "scratch"
    scratch.mkdir()
    (scratch / "weights").mkdir()
    (scratch / "weights" / "model.bin").write_bytes(b"\0" * 1024)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, per_day=500) as harness:
        harness.wait_for_workers(120)
        key = harness.keys["alice"]
        set_secret(harness.url, key, "chatty", "CHATTY_TOKEN", SECRET_VALUE)
        names = {"url": harness.url, "key": key, "F": str(folders), "T": str(scratch)}
        for name in ("chatty-bench", "chatty-policy", "to-delta", "spare-delta"):
            done = _seq(names, "deploy", str(folders / name))
            assert done.returncode == 0, done.stdout + done.stderr
        ran = _seq(names, "eval", "run", "chatty-policy", "--benchmark", "chatty-bench")
        found = re.search(r"eval (ev-[0-9a-f]+)", ran.stdout)
        assert found, ran.stdout + ran.stderr
        yield {**names, "P": "chatty-policy", "B": "chatty-bench", "E": found.group(1)}


def _seq(names: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return seq_cli(names["url"], names["key"], *args, stdin=stdin)


def _argv(row: Row, names: dict[str, str]) -> list[str]:
    return [part.format(**names) for part in row.argv.split()]


def test_follow_reads_an_eval_as_it_plays_and_ends_with_it(swept: dict[str, str]) -> None:
    started = _seq(swept, "eval", "run", "chatty-policy", "--benchmark", "chatty-bench", "--no-wait")
    found = re.search(r"eval (ev-[0-9a-f]+)", started.stdout)
    assert started.returncode == 0 and found, started.stdout + started.stderr
    followed = _seq(swept, "eval", "logs", found.group(1), "--follow")
    assert followed.returncode == 0, followed.stdout + followed.stderr
    lines = followed.stdout.splitlines()
    assert lines[-1] == f"eval {found.group(1)} completed", lines
    # Every episode's lines, each side's, arrived before the follow ended: four episodes, both streams.
    assert sum("bench stdout: reset" in line for line in lines) == 4, lines
    assert sum("policy stderr: a new episode" in line for line in lines) == 4, lines
    assert not [line for line in lines if SECRET_VALUE in line]


@pytest.mark.parametrize("row", ROWS, ids=[row.argv.split(" -")[0].replace(" ", "-") for row in ROWS])
def test_the_command_ends_as_its_row_says(swept: dict[str, str], row: Row) -> None:
    done = _seq(swept, *_argv(row, swept), stdin=row.stdin)
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said
    assert not re.search(r"error\[not_found\]: Not Found\s*$", said, re.M), said
    if row.ends == "ok":
        assert done.returncode == 0, said
    elif row.ends == "refused":
        assert done.returncode != 0, said
        assert f"error[{row.code}]" in said, said
    elif row.ends == "usage":
        assert done.returncode == 2, said
    else:
        assert done.returncode != 0 and "error" in said, said
    if row.shows is not None:
        assert re.search(row.shows, said), said
    assert SECRET_VALUE not in said, said


def _cli_surface() -> dict[str, list[list[str]]]:
    """Every command of the real CLI and the flags each takes (each flag's spellings), read from its own
    parser."""
    program = """
import argparse, json
from seq.cli_parser import build_parser
found = {}
def walk(parser, path):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        flags = [a.option_strings for a in parser._actions if a.option_strings]
        found[" ".join(path)] = [spellings for spellings in flags if "-h" not in spellings]
    for action in subs:
        for name, below in action.choices.items():
            walk(below, [*path, name])
walk(build_parser(), [])
print(json.dumps(found))
"""
    done = subprocess.run([str(SEQ_PYTHON), "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    surface: dict[str, list[list[str]]] = json.loads(done.stdout)
    return surface


def test_every_command_and_flag_of_the_cli_has_a_row() -> None:
    surface = _cli_surface()
    assert len(surface) > 60, surface  # the whole CLI was read, not a part of it
    missing = []
    for command, flags in surface.items():
        rows = [row.argv.split() for row in ROWS if row.argv == command or row.argv.startswith(command + " ")]
        if not rows:
            missing.append(command)
        missing += [
            f"{command} {'/'.join(spellings)}"
            for spellings in flags
            if not any(flag in argv for argv in rows for flag in spellings)
        ]
    assert not missing, f"no row says what Yardstick does with: {missing}"


def test_a_template_is_written_deployed_and_evaluated(swept: dict[str, str]) -> None:
    """`seq init` of the Meta-World policy and the Gymnasium benchmark Yardstick ships, deployed as they
    are and evaluated: the expert reaches, a cart-pole heuristic plays the benchmark."""
    scratch = Path(swept["T"])
    written = _seq(swept, "init", "metaworld-policy", str(scratch / "mw-expert"))
    assert written.returncode == 0, written.stdout + written.stderr
    assert _seq(swept, "deploy", str(scratch / "mw-expert")).returncode == 0
    ran = _seq(swept, "eval", "run", "mw-expert", "--benchmark", "metaworld.mt10", "--tasks", "reach-v3",
               "--trials", "2")  # fmt: skip
    assert ran.returncode == 0 and "success: overall 100.0% (n=2)" in ran.stdout, ran.stdout + ran.stderr

    assert _seq(swept, "init", "gym-benchmark", str(scratch / "cartpole")).returncode == 0
    made = _seq(swept, "deploy", str(scratch / "cartpole"))
    assert made.returncode == 0 and "gym-benchmark: ready" in made.stdout, made.stdout + made.stderr
    pusher = scratch / "pusher"
    pusher.mkdir()
    (pusher / "policy.py").write_text(CARTPOLE_POLICY)
    assert _seq(swept, "deploy", str(pusher)).returncode == 0
    played = _seq(swept, "eval", "run", "cartpole-pusher", "--benchmark", "gym-benchmark", "--trials", "2")
    assert played.returncode == 0 and "n=2" in played.stdout, played.stdout + played.stderr


def test_deploys_and_evals_leave_no_defunct_process_and_boxes_bounded(swept: dict[str, str]) -> None:
    """Each deploy of new code is a new version (a new box for its check and one to serve it); the server
    reaps every one it ends, and keeps at most its warm ones (two players and two servers a worker)."""
    folder = Path(swept["T"]) / "churn"
    folder.mkdir()
    source = CARTPOLE_POLICY.replace("cartpole-pusher", "churn-policy")
    for gain in range(4):
        (folder / "policy.py").write_text(source + f"\nVERSION = {gain}\n")
        assert _seq(swept, "deploy", str(folder)).returncode == 0
        ran = _seq(swept, "eval", "run", "churn-policy", "--benchmark", "gym-benchmark", "--trials", "1")
        assert ran.returncode == 0 and "n=1" in ran.stdout, ran.stdout + ran.stderr
    health = httpx.get(f"{swept['url']}/healthz", params={"boxes": "true"}).json()["processes"]
    assert health["defunct"] == 0, health
    assert health["boxes"] <= 4, health


BROKEN_POLICY = """\
import seq


@seq.policy(name="broken-policy", gpu="cpu", hz=10)
class Broken(seq.Policy):
    def __init__(self):
        raise RuntimeError("broken on purpose")

    @seq.infer
    def infer(self, obs):
        return [[0.0]]
"""
CARTPOLE_POLICY = """\
import seq


@seq.policy(name="cartpole-pusher", gpu="cpu", hz=50, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Pusher(seq.Policy):
    @seq.infer
    def infer(self, obs):
        _, _, angle, spin = obs["state"]
        return [[1 if angle + 0.5 * spin > 0 else 0]]
"""


SDK_CALLS = """
import json, sequence_ai
calls = {
    "account": lambda: sequence_ai.account(),
    "gpus": lambda: sequence_ai.gpus(),
    "usage": lambda: sequence_ai.usage("chatty-policy"),
    "billing": lambda: sequence_ai.billing("2026-12-01", "2026-12-03"),
    "models": lambda: sequence_ai.models(),
    "chat": lambda: sequence_ai.chat("m", [{"role": "user", "content": "hi"}]),
    "decide": lambda: sequence_ai.decide("m", {}, {"q": {"type": "boolean"}}),
    "fleet": lambda: sequence_ai.fleet("chatty-policy"),
    "connect": lambda: sequence_ai.connect(model="chatty-policy").act(),
    "planner": lambda: sequence_ai.planner("site").observe({"x": 1}),
}
said = {}
for name, call in calls.items():
    try:
        said[name] = {"ok": str(call())[:300]}
    except sequence_ai.SequencesError as exc:
        said[name] = {"error": type(exc).__name__, "message": str(exc)}
print(json.dumps(said))
"""
# What each call of the Python SDK answers here: a value, or the exception the SDK makes of a named refusal.
SDK_ANSWERS = {
    "account": "ok",
    "gpus": "ok",
    "usage": "bills and a deployment's serving usage",
    "billing": "bills and a deployment's serving usage",
    "models": "VLM models",
    "chat": "VLM models",
    "decide": "VLM models",
    "fleet": "serving fleet",
    "connect": "no observation before it",
    "planner": "planners",
}


def test_the_python_sdks_calls_answer_or_refuse_by_name(swept: dict[str, str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=swept["url"], SEQUENCES_API_KEY=swept["key"])
    done = subprocess.run(
        [str(SEQ_PYTHON), "-c", SDK_CALLS], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert set(said) == set(SDK_ANSWERS)
    for call, answer in SDK_ANSWERS.items():
        if answer == "ok":
            assert "ok" in said[call], (call, said[call])
        else:
            assert answer in said[call].get("message", ""), (call, said[call])
            assert said[call]["message"].strip().lower() != "not found", (call, said[call])


def table() -> str:
    """The rows as the closing note's table."""
    lines = ["| command | the SDK promises | Yardstick answers | ends |", "|---|---|---|---|"]
    for row in ROWS:
        ends = f"refused `{row.code}`" if row.ends == "refused" else row.ends
        lines.append(f"| `seq {row.argv}` | {row.promise} | {row.answer} | {ends} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
