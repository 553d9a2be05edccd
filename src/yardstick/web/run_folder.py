"""The run folder: report.json for machines, episodes.csv for spreadsheets, report.html for people.

The HTML is one self-contained file (inline CSS and SVG, no external resources) so it can be mailed,
attached to CI or opened offline. It has no scripts, but for a run that recorded videos: then the episode
table shows each episode's cameras (the mp4s beside the page, by relative links) and a few inline lines
play an episode's cameras together from their first frame. A run that recorded 3D replays also gets the
viewer beside the page (replay.html and viewer/, `replay_viewer`), linked from each episode's row.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from yardstick.engine.recording import TRAJECTORY, VIDEO_SUFFIX, camera_of
from yardstick.engine.results import EpisodeResult
from yardstick.scoring import Summary
from yardstick.web.charts import stopping_chart_svg, success_chart_svg
from yardstick.web.folder_templates import folder_templates, write_whole
from yardstick.web.replay_viewer import PAGE as REPLAY_PAGE
from yardstick.web.replay_viewer import Pane, files_of, write_folder_viewer

EPISODE_COLUMNS = (
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
)
METRIC_PREFIX = "metric."
# Metrics shown as a percentage rather than a plain number.
_RATES = frozenset({"success", "success_pooled"})
# Past this many episodes the episode table starts folded: the page stays quick to scroll on a phone.
_OPEN_EPISODE_ROWS = 200


def write_run_folder(
    out_dir: Path, report: Mapping[str, Any], results: Sequence[EpisodeResult]
) -> dict[str, Path]:
    """Write report.json, episodes.csv and report.html into `out_dir` (made if missing) and return their
    paths by kind: "json", "csv", "html". Each file is replaced whole, never left half-written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ordered = sorted(results, key=lambda result: result.index)
    paths = {
        "json": out_dir / "report.json",
        "csv": out_dir / "episodes.csv",
        "html": out_dir / "report.html",
    }
    write_whole(paths["json"], json.dumps(report, indent=2, default=_jsonable) + "\n")
    write_whole(paths["csv"], episodes_csv(ordered))
    replays = _write_replays(out_dir, report, ordered)
    media = _media_base(out_dir, report)
    write_whole(paths["html"], render_report_html(report, ordered, media=media, replays=replays))
    return paths


def _write_replays(out_dir: Path, report: Mapping[str, Any], results: Sequence[EpisodeResult]) -> set[int]:
    """The 3D viewer beside report.html (replay.html and what it loads) when episodes recorded a replay;
    the indices of those episodes."""
    recording = report.get("recording")
    folder = recording.get("folder") if isinstance(recording, Mapping) else None
    panes = {}
    for result in results:
        files = files_of(result.artifacts) if folder else None
        if files is not None:
            outcome = "Error" if not result.finished else "Success" if result.success else "Failure"
            panes[result.index] = Pane(
                title=f"#{result.index} {result.task} · seed {result.seed}",
                subtitle=_name(report.get("policy"))[0],
                outcome=outcome,
                replay=files.replay,
                scene=files.scene,
                trajectory=files.trajectory,
            )
    if panes and folder:
        benchmark, policy = _name(report.get("benchmark"))[0], _name(report.get("policy"))[0]
        write_folder_viewer(out_dir, Path(folder), f"{policy} on {benchmark}", panes)
    return set(panes)


def _media_base(out_dir: Path, report: Mapping[str, Any]) -> str:
    """The recording folder as seen from the page: "" when the run folder is the recording folder."""
    recording = report.get("recording")
    folder = recording.get("folder") if isinstance(recording, Mapping) else None
    if not folder:
        return ""
    try:
        base = os.path.relpath(Path(folder).resolve(), out_dir.resolve())
    except ValueError:  # another drive: only an absolute link reaches it
        return Path(folder).resolve().as_uri() + "/"
    return "" if base == "." else quote(Path(base).as_posix(), safe="/") + "/"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Summary):
        return value.to_dict()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"report.json cannot hold a {type(value).__name__}: {value!r}")


def _metric_names(results: Sequence[EpisodeResult]) -> list[str]:
    return sorted({name for result in results for name in result.metrics})


def episodes_csv(results: Sequence[EpisodeResult]) -> str:
    """One row per episode in the order given: the fixed columns, then `metric.<name>` for every metric any
    episode reported (sorted; empty where an episode did not report it)."""
    metrics = _metric_names(results)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*EPISODE_COLUMNS, *(METRIC_PREFIX + name for name in metrics)])
    for result in results:
        fixed = [getattr(result, column) for column in EPISODE_COLUMNS]
        writer.writerow(
            [
                *("" if value is None else value for value in fixed),
                *(result.metrics.get(name, "") for name in metrics),
            ]
        )
    return buffer.getvalue()


def render_report_html(
    report: Mapping[str, Any],
    results: Sequence[EpisodeResult],
    *,
    media: str = "",
    replays: Collection[int] = (),
) -> str:
    """The report page. Tolerates a report missing any key: a section with nothing to show is left out.
    `media` is the path from the page to the folder the episodes' artifacts are named from; `replays` the
    episodes whose 3D replay the viewer beside the page shows."""
    summary = report.get("summary") or {}
    if isinstance(summary, Summary):
        summary = summary.to_dict()
    context = _context(report, summary, results, media, replays)
    return folder_templates().get_template("report.html").render(context)


def _name(part: Any) -> tuple[str, str]:
    if isinstance(part, Mapping):
        return str(part.get("name") or "?"), str(part.get("ref") or "")
    return (str(part), "") if part else ("?", "")


def _context(
    report: Mapping[str, Any],
    summary: Mapping[str, Any],
    results: Sequence[EpisodeResult],
    media: str = "",
    replays: Collection[int] = (),
) -> dict[str, Any]:
    benchmark, benchmark_ref = _name(report.get("benchmark"))
    policy, policy_ref = _name(report.get("policy"))
    tasks: Mapping[str, Any] = summary.get("tasks") or {}
    metrics = _metric_names(results)
    return {
        "title": f"{policy} on {benchmark}",
        "benchmark": benchmark,
        "benchmark_ref": benchmark_ref,
        "policy": policy,
        "policy_ref": policy_ref,
        "status": str(report.get("status") or "unknown"),
        "errors": [_error_row(error) for error in report.get("errors") or []],
        "overall": [_overall_row(name, est) for name, est in (summary.get("overall") or {}).items()],
        "chart": Markup(success_chart_svg(summary)) if tasks else None,
        "stopping": report.get("stopping"),
        "stopping_chart": Markup(stopping_chart_svg(report["stopping"])) if report.get("stopping") else None,
        "task_metrics": (extra := _task_metric_names(tasks)),
        "tasks": [_task_row(name, task, extra) for name, task in tasks.items()],
        "timing": _key_values(report.get("timing")),
        "config": _key_values(report.get("config")),
        "episode_metrics": metrics,
        "episodes": (rows := [_episode_row(result, metrics, media, replays) for result in results]),
        "episodes_open": len(results) <= _OPEN_EPISODE_ROWS,
        "episode_videos": any(row["videos"] for row in rows),
        "episode_files": any(row["videos"] or row["trajectory"] or row["replay"] for row in rows),
    }


def _number(value: Any, spec: str = ".4g") -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    try:
        return format(float(value), spec)
    except (TypeError, ValueError):
        return str(value)


def _percent(value: Any) -> str:
    return "–" if value is None else f"{float(value) * 100:.1f}%"


def _estimate(name: str, est: Mapping[str, Any]) -> tuple[str, str]:
    """The value and its interval as text, a rate in percent and anything else as a number."""
    show = _percent if name in _RATES else _number
    low, high = est.get("low"), est.get("high")
    interval = f"{show(low)} – {show(high)}" if low is not None and high is not None else ""
    return show(est.get("value")), interval


def _overall_row(name: str, est: Mapping[str, Any]) -> dict[str, str]:
    value, interval = _estimate(name, est)
    return {
        "name": name,
        "value": value,
        "interval": interval,
        "n": _number(est.get("n")),
        "method": str(est.get("method") or ""),
        "kind": str(est.get("interval") or ""),
    }


def _task_metric_names(tasks: Mapping[str, Any]) -> list[str]:
    names = {name for task in tasks.values() for name in (task.get("metrics") or {})}
    return sorted(names - {"success"})


def _task_row(name: str, task: Mapping[str, Any], extra: Sequence[str]) -> dict[str, Any]:
    metrics: Mapping[str, Any] = task.get("metrics") or {}
    success = metrics.get("success")
    value, interval = _estimate("success", success) if success else ("–", "")
    return {
        "name": name,
        "description": str(task.get("description") or ""),
        "episodes": _number(task.get("episodes")),
        "errors": int(task.get("errors") or 0),
        "success": value,
        "success_interval": interval,
        "mean_steps": _number(task.get("mean_steps"), ".1f"),
        "mean_robot_seconds": _number(task.get("mean_robot_seconds"), ".2f"),
        "metrics": [
            _estimate(metric, metrics[metric]) if metric in metrics else ("–", "") for metric in extra
        ],
    }


def _error_row(error: Any) -> dict[str, str]:
    if not isinstance(error, Mapping):
        return {"index": "", "task": "", "seed": "", "error": str(error)}
    return {
        key: "" if error.get(key) is None else str(error.get(key))
        for key in ("index", "task", "seed", "error")
    }


def _key_values(section: Any) -> list[tuple[str, str]]:
    if not isinstance(section, Mapping):
        return []
    rows: list[tuple[str, str]] = []
    for key, value in section.items():
        if isinstance(value, Mapping):
            # One level of nesting (timing's per_step_ms) reads better as rows of its own.
            rows.extend((f"{key}.{inner}", text) for inner, text in _key_values(value))
            continue
        if isinstance(value, (list, tuple)):
            text = json.dumps(value, default=str)
        elif isinstance(value, float):
            text = _number(value)
        else:
            text = "–" if value is None else str(value)
        rows.append((str(key), text))
    return rows


def _link(media: str, artifact: str) -> str:
    return media + quote(artifact, safe="/")


def _episode_row(
    result: EpisodeResult, metrics: Sequence[str], media: str = "", replays: Collection[int] = ()
) -> dict[str, Any]:
    artifacts = result.artifacts
    trajectory = [a for a in artifacts if a.endswith(TRAJECTORY)]
    return {
        "replay": f"{REPLAY_PAGE}?episode={result.index}" if result.index in replays else "",
        "videos": [
            {"src": _link(media, a), "camera": camera_of(a)} for a in artifacts if a.endswith(VIDEO_SUFFIX)
        ],
        "trajectory": _link(media, trajectory[0]) if trajectory else "",
        "index": result.index,
        "task": result.task,
        "trial": result.trial,
        "seed": result.seed,
        "repeat": result.repeat,
        "success": result.success,
        "finished": result.finished,
        "end": "terminated" if result.terminated else "truncated" if result.truncated else "",
        "steps": result.steps,
        "robot_seconds": _number(result.robot_seconds, ".2f"),
        "inferences": result.inferences,
        "wall_seconds": _number(result.wall_seconds, ".2f"),
        "error": result.error or "",
        "metrics": [_number(result.metrics.get(name)) for name in metrics],
    }
