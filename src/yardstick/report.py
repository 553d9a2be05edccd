"""The report of a run: what was asked, what came of it per task and overall, what failed, and where the
time went. A plain dict, the same one `report.json` holds and `--json` prints."""

from __future__ import annotations

import datetime as dt
from typing import Any

from yardstick import __version__
from yardstick.engine.recording import VIDEO_SUFFIX
from yardstick.engine.results import Timing
from yardstick.engine.run import RunOutcome
from yardstick.replay3d.format import SUFFIX as REPLAY_SUFFIX
from yardstick.scoring import summarize
from yardstick.scoring.rates import DEFAULT_INTERVAL
from yardstick.scoring.sequential import ANYTIME, SequentialEval, anytime_summary


def build_report(
    outcome: RunOutcome, *, interval: str = DEFAULT_INTERVAL, stopping: SequentialEval | None = None
) -> dict[str, Any]:
    """`interval`: the confidence interval of a success rate (`scoring.rates.INTERVALS`), named in the
    report beside every estimate and in its config. A run that stopped by a rule (`stopping`) reports its
    confidence sequence's intervals instead: a fixed-n interval read at a time the data chose is not valid."""
    request = outcome.request
    work = request.work
    finished = [r for r in outcome.results if r.finished]
    failed = [r for r in outcome.results if not r.finished]
    not_run = len(outcome.planned) - len(outcome.results)
    tasks = list(dict.fromkeys(e.task for e in outcome.planned))
    summary = summarize(
        [
            {
                "task": r.task,
                "metrics": r.metrics,
                "steps": r.steps,
                "robot_seconds": r.robot_seconds,
                "error": r.error,
            }
            for r in outcome.results
        ],
        {task: outcome.benchmark.tasks[task] for task in tasks},
        interval=interval,
    ).to_dict()
    if stopping is not None:
        anytime_summary(summary, stopping.to_dict())
        interval = ANYTIME
    policy = outcome.policy
    report: dict[str, Any] = {
        "yardstick": __version__,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "status": "complete" if outcome.complete else "incomplete",
        "interrupted": outcome.interrupted,
        "benchmark": {
            "ref": work.benchmark.ref,
            "name": outcome.benchmark.name,
            "params": work.benchmark.params,
        },
        "policy": {
            "ref": work.policy.ref,
            "name": policy.name,
            "params": work.policy.params,
            "hz": policy.hz,
            "action_chunk_len": policy.action_chunk_len,
            "action_chunk_exec_len": policy.replan_every,
            "batch_sizes": list(policy.batch_sizes) if policy.batch_sizes else None,
        },
        "config": {
            "tasks": tasks,
            "trials": request.trials,
            "seeds": list(request.seeds or []) or None,
            "episodes": len(outcome.planned),
            "interval": interval,
            "executor": outcome.executor,
            "workers": outcome.workers,
            "charge_inference": work.playback.charge_inference,
            "latency_ms": work.playback.latency_ms,
            "call_timeout_s": work.call_timeout_s,
        },
        **({"recording": _recording(outcome)} if _records(outcome) else {}),
        "episodes": {
            "planned": len(outcome.planned),
            "finished": len(finished),
            "failed": len(failed),
            "not_run": not_run,
            "repeats": sum(1 for e in outcome.planned if e.repeat),
        },
        "summary": summary,
        "errors": [
            {
                "index": r.index,
                "task": r.task,
                "trial": r.trial,
                "seed": r.seed,
                "error": r.error,
                "failure": r.failure,
            }
            for r in failed
        ],
        "timing": _timing(outcome),
    }
    if stopping is not None:
        report["stopping"] = stopping.to_dict()
    return report


def _records(outcome: RunOutcome) -> bool:
    recording = outcome.request.work.recording
    return recording is not None and recording.active


def _recording(outcome: RunOutcome) -> dict[str, Any]:
    """What was recorded and where: files are named relative to `folder`; each distinct problem once, with
    the episodes it touched."""
    recording = outcome.request.work.recording
    assert recording is not None
    problems: dict[str, list[int]] = {}
    for result in outcome.results:
        for problem in (result.recording_error or "").splitlines():
            if problem:
                problems.setdefault(problem, []).append(result.index)
    return {
        "folder": recording.folder,
        "video": recording.video,
        "trajectory": recording.trajectory,
        "replay": recording.replay,
        "fps": recording.fps,
        "files": sum(len(r.artifacts) for r in outcome.results),
        "videos": sum(1 for r in outcome.results for a in r.artifacts if a.endswith(VIDEO_SUFFIX)),
        "replays": sum(1 for r in outcome.results for a in r.artifacts if a.endswith(REPLAY_SUFFIX)),
        "problems": [{"problem": text, "episodes": indices} for text, indices in problems.items()],
    }


def _timing(outcome: RunOutcome) -> dict[str, Any]:
    spent = Timing()
    for result in outcome.results:
        spent.add(result.timing)
    steps = sum(r.steps for r in outcome.results)
    # Recording's share is listed when the run recorded; `overhead` is what is left of the wall time.
    parts = ("simulation", "rendering", "policy", "recording", "overhead")
    per_step = {
        name: round(1000 * getattr(spent, name) / steps, 4) if steps else None
        for name in parts
        if name != "recording" or _records(outcome)
    }
    return {
        "wall_s": round(outcome.wall_s, 3),
        "cold_start_s": round(max(outcome.cold_starts), 3) if outcome.cold_starts else None,
        "steps": steps,
        "steps_per_s": round(steps / outcome.wall_s, 1) if outcome.wall_s else None,
        "per_step_ms": per_step,
    }
