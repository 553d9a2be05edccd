"""The run folder: report.json, episodes.csv and report.html written from synthetic episodes."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

from yardstick.engine.results import EpisodeResult, Timing
from yardstick.scoring import summarize
from yardstick.web import success_chart_svg, write_run_folder

TASKS = {
    "reach-v3": "Reach a goal position",
    "push-v3": "Push the puck <script>alert('pwned')</script> to a goal",
    "pick-place-v3": "Pick and place a puck",
}


def _results() -> list[EpisodeResult]:
    results = []
    for index in range(12):
        task = list(TASKS)[index % 3]
        trial = index // 3
        metrics = {"success": float(index % 2 == 0), "return": 10.0 + index}
        if task == "reach-v3":
            metrics["distance"] = 0.01 * index
        results.append(
            EpisodeResult(
                index=index,
                task=task,
                trial=trial,
                seed=100 + trial,
                repeat=trial >= 3,
                success=index % 2 == 0,
                terminated=index % 2 == 0,
                truncated=index % 2 == 1,
                steps=50 + index,
                robot_seconds=2.5 + index / 10,
                inferences=5 + index,
                metrics=metrics,
                wall_seconds=0.25,
                timing=Timing(simulation=0.1, rendering=0.05, policy=0.05, overhead=0.05),
            )
        )
    results[5] = EpisodeResult(
        index=5,
        task="pick-place-v3",
        trial=1,
        seed=101,
        repeat=False,
        steps=3,
        error="policy crashed: ValueError('bad <action>')",
    )
    return results


def _report(results: list[EpisodeResult]) -> dict[str, Any]:
    summary = summarize([r.to_dict() for r in results], TASKS).to_dict()
    return {
        "benchmark": {"name": "mt-demo", "ref": "yardstick.catalog.metaworld:MT10"},
        "policy": {"name": "scripted-expert", "ref": "yardstick.catalog.experts:Expert"},
        "status": "incomplete",
        "errors": [
            {"index": r.index, "task": r.task, "seed": r.seed, "error": r.error}
            for r in results
            if r.error is not None
        ],
        "summary": summary,
        "timing": {"wall_seconds": 3.25, "simulation": 1.2, "policy": 0.6},
        "config": {"trials": 4, "seeds": [100, 101, 102], "vectorized": False},
    }


@pytest.fixture()
def folder(tmp_path: Path) -> tuple[dict[str, Path], dict[str, Any], list[EpisodeResult]]:
    results = _results()
    report = _report(results)
    # Out of order on purpose: the folder lists episodes by index.
    paths = write_run_folder(tmp_path / "runs" / "demo", report, list(reversed(results)))
    return paths, report, results


def test_the_folder_holds_three_files(
    folder: tuple[dict[str, Path], dict[str, Any], list[EpisodeResult]],
) -> None:
    paths, _, _ = folder
    assert {kind: path.name for kind, path in paths.items()} == {
        "json": "report.json",
        "csv": "episodes.csv",
        "html": "report.html",
    }
    assert sorted(p.name for p in paths["json"].parent.iterdir()) == [
        "episodes.csv",
        "report.html",
        "report.json",
    ]


def test_report_json_is_the_report(
    folder: tuple[dict[str, Path], dict[str, Any], list[EpisodeResult]],
) -> None:
    paths, report, _ = folder
    assert json.loads(paths["json"].read_text(encoding="utf-8")) == report


def test_episodes_csv(folder: tuple[dict[str, Path], dict[str, Any], list[EpisodeResult]]) -> None:
    paths, _, results = folder
    with paths["csv"].open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
        assert reader.fieldnames == [
            "index",
            "task",
            "trial",
            "seed",
            "repeat",
            "success",
            "terminated",
            "truncated",
            "steps",
            "robot_seconds",
            "inferences",
            "wall_seconds",
            "error",
            "metric.distance",
            "metric.return",
            "metric.success",
        ]
    assert [int(row["index"]) for row in rows] == list(range(12))
    first = rows[0]
    assert (first["task"], first["trial"], first["seed"], first["repeat"]) == (
        "reach-v3",
        "0",
        "100",
        "False",
    )
    assert (first["success"], first["terminated"], first["truncated"]) == ("True", "True", "False")
    assert (int(first["steps"]), float(first["robot_seconds"]), int(first["inferences"])) == (50, 2.5, 5)
    assert float(first["wall_seconds"]) == 0.25 and first["error"] == ""
    assert (float(first["metric.success"]), float(first["metric.return"])) == (1.0, 10.0)
    assert float(first["metric.distance"]) == 0.0
    assert rows[1]["metric.distance"] == ""  # push-v3 never reports a distance
    assert rows[9]["repeat"] == "True"
    crashed = rows[5]
    assert crashed["error"] == "policy crashed: ValueError('bad <action>')"
    assert crashed["metric.return"] == "" and crashed["success"] == "False"
    assert (
        float(rows[7]["robot_seconds"]) == results[7].robot_seconds
    )  # full precision, not the page's rounding


def test_report_html(folder: tuple[dict[str, Path], dict[str, Any], list[EpisodeResult]]) -> None:
    paths, _, _ = folder
    html = paths["html"].read_text(encoding="utf-8")
    assert "<svg" in html and "</svg>" in html and "<?xml" not in html
    for task in TASKS:
        assert task in html
    assert "<script>" not in html  # neither the description's nor any of our own
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in html
    assert "bad &lt;action&gt;" in html
    assert "scripted-expert on mt-demo" in html
    assert "incomplete" in html and "1 episode failed" in html
    assert "stratified bootstrap 95%" in html and "mean of task means" in html
    # Offline: nothing is fetched from elsewhere (the SVG's xmlns names are identifiers, not fetches).
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert 'name="viewport"' in html and 'class="scroll"' in html
    for key, value in [("wall_seconds", "3.25"), ("trials", "4"), ("seeds", "[100, 101, 102]")]:
        assert re.search(rf"<td>{key}</td><td>{re.escape(value)}</td>", html)


def test_the_page_tolerates_a_sparse_report(tmp_path: Path) -> None:
    paths = write_run_folder(tmp_path, {"status": "complete"}, [])
    html = paths["html"].read_text(encoding="utf-8")
    assert "complete" in html and "<svg" not in html
    assert paths["csv"].read_text(encoding="utf-8").splitlines() == [
        "index,task,trial,seed,repeat,success,terminated,truncated,steps,robot_seconds,inferences,"
        "wall_seconds,error"
    ]


def test_the_folder_is_rewritten_whole(tmp_path: Path) -> None:
    results = _results()
    write_run_folder(tmp_path, _report(results), results)
    write_run_folder(tmp_path, _report(results[:3]), results[:3])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["episodes.csv", "report.html", "report.json"]
    assert len(list(csv.DictReader((tmp_path / "episodes.csv").open(newline="")))) == 3


def test_the_chart_draws_fifty_tasks() -> None:
    # How quickly is bench/quickly.py's to say.
    tasks = {f"task-{i:02d}-with-a-long-name-v3": f"task {i}" for i in range(50)}
    rows = [
        {
            "task": task,
            "metrics": {"success": float((i + j) % 3 != 0)},
            "steps": 10,
            "robot_seconds": 1.0,
            "error": None,
        }
        for i, task in enumerate(tasks)
        for j in range(10)
    ]
    summary = summarize(rows, tasks, resamples=200)
    small = success_chart_svg(summarize(rows[:20], dict(list(tasks.items())[:2]), resamples=200))
    svg = success_chart_svg(summary)
    assert svg.startswith("<svg") and all(task in svg for task in tasks)

    def height(text: str) -> float:
        found = re.search(r'height="([\d.]+)pt"', text)
        assert found is not None
        return float(found.group(1))

    assert height(svg) > 8 * height(small)
    assert svg == success_chart_svg(summary)  # the same summary draws the same bytes


def test_the_chart_keeps_task_names_literal() -> None:
    tasks = {"cost-$x$": "", "<b>bold</b>": ""}
    rows = [
        {"task": t, "metrics": {"success": 1.0}, "steps": 1, "robot_seconds": 0.1, "error": None}
        for t in tasks
    ]
    svg = success_chart_svg(summarize(rows, tasks, resamples=50))
    assert "cost-$x$" in svg and "&lt;b&gt;bold&lt;/b&gt;" in svg and "<b>" not in svg
