"""A local run survives its process: each episode lands in the run folder's episodes.jsonl as it ends, a run
killed with SIGKILL is resumed with `--resume` to the folder an uninterrupted run writes, and a run folder
is never written over unless asked."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import toy
from yardstick.engine.journal import JOURNAL

COMMAND = [
    sys.executable, "-m", "yardstick", "eval", "run",
    "--benchmark", toy("Tally"), "--policy", toy("SlowRows"), "--param", "policy.delay=0.05",
    "--tasks", "three,ten", "--trials", "8", "--in-process",
]  # fmt: skip


def yardstick(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=600, check=False)


def rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "episodes.csv").open() as file:
        return [{k: v for k, v in row.items() if k != "wall_seconds"} for row in csv.DictReader(file)]


def successes(folder: Path) -> dict[str, object]:
    summary = json.loads((folder / "report.json").read_text())["summary"]
    return {task: (said["metrics"]["success"], said["episodes"]) for task, said in summary["tasks"].items()}


def test_a_run_killed_half_way_resumes_to_the_folder_of_one_never_killed(tmp_path: Path) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert yardstick("--out", str(whole)).returncode == 0
    played = subprocess.Popen(
        [*COMMAND, "--out", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    journal = killed / JOURNAL
    deadline = time.monotonic() + 300  # generous: a loaded machine
    while not (journal.exists() and journal.read_text().count("\n") >= 3):
        assert played.poll() is None, played.stderr.read() if played.stderr else ""
        assert time.monotonic() < deadline, "no episode landed in the journal"
        time.sleep(0.05)
    played.send_signal(signal.SIGKILL)
    played.wait(timeout=60)
    kept = journal.read_text().count("\n")
    assert 3 <= kept < 16 and not (killed / "report.json").exists()

    resumed = yardstick("--out", str(killed), "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert rows(killed) == rows(whole)
    assert successes(killed) == successes(whole)
    assert journal.read_text().count("\n") == 16  # only the missing episodes were played again


def test_a_run_folder_is_not_written_over_unless_asked(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    assert yardstick("--out", str(folder)).returncode == 0
    before = (folder / "report.json").read_bytes()
    refused = yardstick("--out", str(folder))
    assert refused.returncode == 2 and "--resume" in refused.stderr and "--overwrite" in refused.stderr
    assert (folder / "report.json").read_bytes() == before  # nothing changed
    (folder / "stale.mp4").write_bytes(b"an earlier run's video")
    assert yardstick("--out", str(folder), "--overwrite").returncode == 0
    assert not (folder / "stale.mp4").exists() and (folder / JOURNAL).read_text().count("\n") == 16
    other = subprocess.run(
        [*COMMAND[: COMMAND.index("--tasks")], "--tasks", "three,ten", "--trials", "4", "--in-process",
         "--out", str(folder), "--resume"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert other.returncode == 2 and "another plan" in other.stderr
