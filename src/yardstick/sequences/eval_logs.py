"""An eval's logs as `seq eval logs` reads them: the platform's events (queued, running, each episode's end,
the end) on the `eval` side, and every line the boxes printed while they played it - the benchmark's code
on the `benchmark` side, the deployed policy's on the `policy` side - each with its time, the worker that
played it (`machine_name`) and its arm.

The lines are kept in the order the platform learned of them (an event when it happened; a box's lines
when the batch that printed them ended, the moment its log file was written), so a line learned later is
never placed before one already read: the `after` cursor is a count of lines in that order, for one
query's filters, and `--follow` reads each new one once. The worker masks secrets before it writes a line.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from yardstick.core.artifacts import ArtifactNotFound
from yardstick.core.lifecycle import LOGS
from yardstick.core.platform import Platform
from yardstick.sequences import eval_report
from yardstick.store.models import Run, RunEpisode
from yardstick.store.states import RunStatus

Side = Literal["eval", "benchmark", "policy"]
SIDES: Final = ("eval", "benchmark", "policy")
NANOSECONDS: Final = 1_000_000_000


@dataclass(frozen=True)
class LogQuery:
    """Which lines: one side, one arm, one machine (None: all), those after the cursor `after` (None: the
    newest `limit`)."""

    side: Side | None = None
    arm: int | None = None
    machine: str | None = None
    after: int | None = None
    limit: int = 500

    def keeps(self, line: dict[str, Any]) -> bool:
        return (
            (self.side is None or line["side"] == self.side)
            and (self.arm is None or line.get("arm") == self.arm)
            and (self.machine is None or line.get("machine_name") == self.machine)
        )


def page(plat: Platform, run: Run, eval_id: str, query: LogQuery) -> dict[str, Any]:
    """One page of the eval's lines, `{eval_id, status, lines, next}`: `next` is the cursor after them."""
    lines = [line for _, line in sorted(_learned(plat, run), key=lambda x: x[0]) if query.keeps(line)]
    if query.after is None:
        shown = lines[-query.limit :]
        cursor = len(lines)
    else:
        start = max(0, query.after)
        shown = lines[start : start + query.limit]
        cursor = start + len(shown)
    return {
        "eval_id": eval_id,
        "status": eval_report.STATUS[RunStatus(run.status)],
        "lines": shown,
        "next": cursor,
    }


def _learned(plat: Platform, run: Run) -> list[tuple[float, dict[str, Any]]]:
    """Every line with when the platform learned of it."""
    found = [(at.timestamp(), _event(at, text)) for at, text in _events(plat, run)]
    for key, _size in plat.artifacts.keys(run.id, LOGS):
        learned = _written_at(key)
        try:
            with plat.artifacts.open(run.id, key) as stream:
                content = stream.read().decode("utf-8", "replace")
        except (ArtifactNotFound, OSError):
            continue  # removed as it was read (the run's artifacts expired): nothing to show
        for row in content.splitlines():
            line = _printed(row)
            if line is not None:
                found.append((learned, line))
    return found


def _events(plat: Platform, run: Run) -> list[tuple[dt.datetime, str]]:
    events = [(run.received_at, "eval queued")]
    if run.started_at is not None:
        events.append((run.started_at, "eval running"))
    for episode in plat.runs.episodes(run.id):
        if episode.finished_at is not None:
            events.append((episode.finished_at, _episode_line(episode)))
    if run.ended_at is not None:
        events.append((run.ended_at, f"eval {eval_report.STATUS[RunStatus(run.status)]}"))
    return events


def _event(at: dt.datetime, text: str) -> dict[str, Any]:
    return {"ts": _utc(at).isoformat(), "side": "eval", "machine_name": None, "arm": None, "line": text}


def _printed(row: str) -> dict[str, Any] | None:
    """A line of a log file as the contract shows it; None for one that is not (a file cut short)."""
    try:
        kept = json.loads(row)
        at = dt.datetime.fromtimestamp(float(kept["ts"]), dt.UTC)
        side = kept["side"] if kept.get("side") in SIDES else "benchmark"
        arm = kept.get("arm")
        return {
            "ts": at.isoformat(),
            "side": side,
            "machine_name": str(kept.get("machine_name") or "") or None,
            "arm": arm if isinstance(arm, int) and not isinstance(arm, bool) else None,
            "line": str(kept.get("line", "")),
        }
    except (ValueError, KeyError, TypeError, OverflowError):
        return None


def _written_at(key: str) -> float:
    """When a log file was written: its name starts with the nanoseconds (the worker's `_keep_printed`)."""
    stamp = key.removeprefix(LOGS).split("-", 1)[0]
    return int(stamp) / NANOSECONDS if stamp.isdigit() else 0.0


def _utc(at: dt.datetime) -> dt.datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


def _episode_line(episode: RunEpisode) -> str:
    line = f"episode {episode.index} ({episode.benchmark_task}, seed {episode.seed}): "
    line += eval_report.outcome(episode) + (f": {episode.error}" if episode.error else "")
    recording = (episode.result or {}).get("recording_error")
    if recording:  # one line a part that failed: said on the eval's one line, each part after a "; "
        line += "; its recording: " + "; ".join(str(recording).splitlines())
    return line
