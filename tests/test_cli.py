"""The `yardstick` command as a user runs it: tables and files, exit statuses, gates, --json, Ctrl-C."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import toy
from yardstick.cli.main import app

runner = CliRunner()


def yardstick(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def run_toy(tmp_path: Path, *extra: str, policy: str = "Rows") -> tuple[int, str]:
    return yardstick(
        "eval",
        "run",
        "--benchmark",
        toy("Tally"),
        "--policy",
        toy(policy),
        "--in-process",
        "--out",
        str(tmp_path / "run"),
        *extra,
    )


def test_a_run_prints_its_table_and_writes_its_folder(tmp_path: Path) -> None:
    code, output = run_toy(tmp_path, "--trials", "4")
    assert code == 0, output
    assert "three" in output and "overall" in output and "report:" in output
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["status"] == "complete" and report["episodes"]["planned"] == 12
    # Seeds 0 and 2 succeed on tasks that end (three, ten): 2 of 4 each; "never" never succeeds.
    tasks = report["summary"]["tasks"]
    assert [tasks[t]["metrics"]["success"]["value"] for t in ("three", "ten", "never")] == [0.5, 0.5, 0.0]
    with (tmp_path / "run" / "episodes.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12 and rows[0]["task"] == "three" and rows[0]["steps"] == "3"
    assert "<svg" in (tmp_path / "run" / "report.html").read_text()


def eval_run_process(policy: str, *extra: str) -> list[str]:
    """The command line of `yardstick eval run` on the Tally toy, for a process of its own."""
    return [
        sys.executable,
        "-m",
        "yardstick.cli",
        "eval",
        "run",
        "-b",
        toy("Tally"),
        "-p",
        toy(policy),
        *extra,
    ]


def test_json_prints_the_report_on_stdout(tmp_path: Path) -> None:
    result = subprocess.run(
        eval_run_process(
            "Rows",
            "--tasks",
            "three",
            "--seeds",
            "0..1",
            "--in-process",
            "--json",
            "--out",
            str(tmp_path / "r"),
        ),
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(result.stdout)
    assert report["config"]["tasks"] == ["three"] and report["episodes"]["planned"] == 2
    assert "episodes" in result.stderr  # the progress bar went to stderr


@pytest.mark.parametrize(
    ("gate", "code"),
    [
        ("success>=0.3", 0),
        ("success>=0.9", 8),
        ("success[three]>=0.5", 0),
        ("success.low>=0.4", 8),
        ("total[never]>0", 0),
    ],
)
def test_gates_decide_the_exit_status(tmp_path: Path, gate: str, code: int) -> None:
    status, output = run_toy(tmp_path, "--trials", "4", "--gate", gate)
    assert status == code, output
    assert ("gate met" if code == 0 else "gate not met") in output


@pytest.mark.parametrize(
    "args",
    [["--gate", "success>>1"], ["--seeds", "a..b"], ["--param", "oops"], ["--trials", "0"], ["--bogus"]],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    status, output = run_toy(tmp_path, *args)
    assert status == 2, output


def test_a_second_policy_is_refused_not_dropped(tmp_path: Path) -> None:
    status, output = run_toy(tmp_path, "--policy", toy("Sampler"))
    assert status == 2, output
    assert "eval run plays one policy, not 2" in " ".join(output.split()), output
    assert not (tmp_path / "run").exists()  # nothing played, no folder claimed


def test_the_interval_of_a_rate_is_chosen_and_named(tmp_path: Path) -> None:
    status, output = run_toy(tmp_path, "--trials", "4", "--interval", "jeffreys")
    assert status == 0, output
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["config"]["interval"] == "jeffreys"
    assert report["summary"]["overall"]["success"]["interval"] == "stratified jeffreys 95%"
    assert {t["metrics"]["success"]["interval"] for t in report["summary"]["tasks"].values()} == {
        "jeffreys 95%"
    }

    status, output = run_toy(tmp_path, "--interval", "agresti-coull")
    assert status == 2 and "--interval" in output and "clopper-pearson" in output, output


@pytest.mark.parametrize(
    ("benchmark", "policy", "says"),
    [
        ("no_such_module:Thing", toy("Rows"), "no module named"),
        ("mt11", toy("Rows"), "mt11"),
        (toy("Tally"), "collections:OrderedDict", "not a policy"),
        (toy("Tally"), toy("Rows"), "not a task"),
    ],
)
def test_the_callers_faults_exit_1_with_the_reason(
    tmp_path: Path, benchmark: str, policy: str, says: str
) -> None:
    extra = ["--tasks", "nope"] if says == "not a task" else []
    status, output = yardstick(
        "eval", "run", "-b", benchmark, "-p", policy, "--in-process", "--out", str(tmp_path / "r"), *extra
    )
    assert status == 1 and says in output, output
    assert not (tmp_path / "r").exists()  # refused before anything ran or was written


def test_failed_episodes_exit_1_and_are_listed(tmp_path: Path) -> None:
    status, output = run_toy(tmp_path, "--trials", "1", policy="CrashOnTen")
    assert status == 1
    assert "boom at step 5" in output
    assert json.loads((tmp_path / "run" / "report.json").read_text())["status"] == "incomplete"


def test_an_internal_error_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("yardstick.cli.eval_cmd.evaluate", broken)
    status, output = run_toy(tmp_path)
    assert status == 3 and "internal error" in output


def test_params_reach_the_constructor(tmp_path: Path) -> None:
    status, output = run_toy(tmp_path, "--trials", "1", "--param", "benchmark.surprise=1")
    assert status == 1 and "unexpected keyword argument 'surprise'" in output


def test_ctrl_c_stops_with_an_incomplete_report(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # As a terminal starts it: a shell without job control starts background jobs ignoring SIGINT, and
    # Python then never turns it into KeyboardInterrupt. A signal handled here is default after exec (a
    # preexec_fn would run Python in a forked copy of this multithreaded process).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen(
            eval_run_process(
                "SlowRows",
                "--trials",
                "4",
                "--workers",
                "2",
                "--param",
                "policy.delay=0.3",
                "--out",
                str(out),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    time.sleep(4)  # workers started and playing
    os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C reaches the whole group
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "incomplete" and report["interrupted"]
    assert report["episodes"]["not_run"] > 0


def test_show_commands(tmp_path: Path) -> None:
    status, output = yardstick("benchmark", "show", "mt10")
    assert status == 0 and "reach-v3" in output and "50 seeds" in output and "6.25" in output
    status, output = yardstick("policy", "show", "expert")
    assert status == 0 and "80" in output
    status, output = yardstick("benchmark", "show", toy("TallyMany"), "--json")
    assert status == 0 and json.loads(output)["worlds"] == 4
    status, output = yardstick("policy", "show", "nope:Nope")
    assert status == 1


def test_a_table_too_wide_for_the_terminal_shows_every_cell_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from yardstick.cli import display

    estimate = {"value": 1.0, "low": 0.722, "high": 1.0, "n": 20}
    task = {"metrics": {"success": estimate}, "episodes": 10, "errors": 0, "mean_steps": 123.4}
    report = {
        "policy": {"name": "ScriptedExpert"},
        "benchmark": {"name": "MT50"},
        "summary": {
            "tasks": {
                name: {**task, "mean_robot_seconds": 1.55}
                for name in ("reach-v3", "button-press-topdown-wall-v3")
            },
            "overall": {"success": estimate, "success_pooled": estimate},
        },
    }
    shown = {}
    for columns in (200, 80):
        monkeypatch.setenv("COLUMNS", str(columns))
        with display.console.capture() as captured:
            display.print_table(display.results_table(report))
        shown[columns] = captured.get()
    # Wide: the table. At 80 columns MT50's longest name does not fit beside the numbers: rich would cut it
    # and the intervals short; each row is a block instead, every cell whole.
    assert "┃" in shown[200] and "┃" not in shown[80]
    for out in shown.values():
        assert "button-press-topdown-wall-v3" in out and out.count("72.2-100.0") == 4 and "…" not in out


@pytest.mark.parametrize("command", ["server", "worker"])
def test_where_robots_reach_act_workers_is_checked_and_kept(command: str, tmp_path: Path) -> None:
    from yardstick.cli.platform_cmd import _platform_settings

    refused = runner.invoke(app, [command, "--data-dir", str(tmp_path), "--robots-host", "no such host!"])
    assert refused.exit_code == 2 and "--robots-host" in refused.output, refused.output
    assert not (tmp_path / "yardstick.db").exists()  # refused before anything was made
    kept = _platform_settings(
        tmp_path, None, None, [], None, None, None, robots_host="10.0.0.5", robot_idle=7.0
    )
    assert (kept.act_host, kept.act_idle_s) == ("10.0.0.5", 7.0)


def test_python_m_yardstick_is_the_command_and_its_version_imports_no_cli() -> None:
    said = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "yardstick", "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    from yardstick import __version__

    assert said.stdout.strip() == __version__
    imported = said.stderr  # -X importtime lists every module the process imported
    for heavy in ("typer", "numpy", "yardstick.cli.main", "yardstick.sdk"):
        assert f" {heavy}\n" not in imported, f"--version imported {heavy}"
    helped = subprocess.run(
        [sys.executable, "-m", "yardstick", "eval", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "--benchmark" in helped.stdout


def test_a_mistyped_benchmark_or_task_is_answered_with_the_name_meant(tmp_path: Path) -> None:
    code, said = yardstick(
        "eval", "run", "--benchmark", "mt1O", "--policy", "expert", "--out", str(tmp_path / "a")
    )
    assert code != 0 and "did you mean 'mt10'?" in said
    code, said = run_toy(tmp_path, "--tasks", "thre")
    assert code != 0 and "did you mean 'three'?" in said
