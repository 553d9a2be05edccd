"""An eval's run as the Sequences contract reports it: its status, each metric overall (the share, or the
mean, over every episode scored: the contract's `overall`) and per task with its count, per arm, its
errors, cost, timing and page; beside them, under `yardstick`, what the contract has no field for: each
metric's mean of task means (each task weighing the same) with a 95% interval, and each task's interval."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from yardstick.billing.terms import credits_value
from yardstick.core.boards import page_url
from yardstick.engine.failures import FailureKind
from yardstick.scoring import summarize
from yardstick.scoring.aggregate import MEAN_OF_TASK_MEANS, SUCCESS_POOLED
from yardstick.sequences import paths
from yardstick.sequences.models import (
    ArmParams,
    ArmReport,
    EvalReport,
    EvalTiming,
    MetricAgg,
    StopReason,
    TaskAgg,
)
from yardstick.store.models import Reservation, Run, RunEpisode
from yardstick.store.states import EpisodeState, RunStatus

STATUS = {
    RunStatus.PENDING: "pending",
    RunStatus.RUNNING: "running",
    RunStatus.FINISHED: "completed",
    RunStatus.ERRORED: "failed",
    RunStatus.CANCELLED: "canceled",
}
# The reasons a run that failed this way stopped, as the contract names them (others name none).
STOPS: dict[FailureKind, StopReason] = {FailureKind.SESSION_REFUSED: "refused"}


def eval_id(run_id: int) -> str:
    return f"ev-{run_id:x}"


def run_id_of(text: str) -> int | None:
    """The run an eval id names (`ev-<hex>`), or None for text that is no eval id."""
    head, _, tail = text.partition("-")
    if head != "ev" or not tail or len(tail) > 16 or any(c not in "0123456789abcdef" for c in tail):
        return None
    value = int(tail, 16)
    return value if 0 < value < 1 << 63 else None


def scored(episode: RunEpisode) -> bool:
    return episode.state == EpisodeState.DONE and episode.result is not None


def succeeded(episode: RunEpisode) -> bool:
    return scored(episode) and bool((episode.result or {}).get("success"))


def outcome(episode: RunEpisode) -> str:
    """How an episode ended, as the contract's filters and logs name it."""
    if episode.state == EpisodeState.FAILED:
        return "error"
    if not scored(episode):
        return "pending"
    return "success" if succeeded(episode) else "failure"


def metrics_of(
    episodes: Sequence[RunEpisode], tasks: Sequence[str]
) -> tuple[dict[str, MetricAgg], dict[str, Any]]:
    """The contract's aggregates of the scored episodes, and ours beside them (mean of task means,
    intervals)."""
    rows = [
        {
            "task": e.benchmark_task,
            "metrics": (e.result or {}).get("metrics", {}),
            "steps": (e.result or {}).get("steps", 0),
            "robot_seconds": (e.result or {}).get("robot_seconds", 0.0),
            "error": None,
        }
        for e in episodes
        if scored(e)
    ]
    summary = summarize(rows, dict.fromkeys(tasks, ""))
    contract: dict[str, MetricAgg] = {}
    ours: dict[str, Any] = {}
    for name, estimate in summary.overall.items():
        if name == SUCCESS_POOLED:
            continue
        per_task = [
            (task, part.metrics[name]) for task, part in summary.tasks.items() if name in part.metrics
        ]
        n = sum(e.n for _, e in per_task)
        pooled = math.fsum(e.value * e.n for _, e in per_task) / n if n else 0.0
        contract[name] = MetricAgg(
            overall=pooled, per_task=[TaskAgg(task=t, value=e.value, n=e.n) for t, e in per_task], n=n
        )
        ours[name] = {
            MEAN_OF_TASK_MEANS: {"value": estimate.value, "low": estimate.low, "high": estimate.high},
            "interval": estimate.interval,
            "per_task": {t: {"low": e.low, "high": e.high, "interval": e.interval} for t, e in per_task},
        }
    return contract, ours


def build(
    run: Run,
    episodes: Sequence[RunEpisode],
    *,
    base_url: str,
    reservation: Reservation | None,
) -> EvalReport:
    answer = run.resolved or {}
    tasks = [t["task"] for t in answer.get("layout", {}).get("selection", {}).get("tasks", [])]
    arms = answer.get("arms", [{"arm": 0, "endpoint": "arm-0", "params": {}}])
    model = str(answer.get("model", ""))
    by_arm = {str(a["endpoint"]): [e for e in episodes if e.endpoint == a["endpoint"]] for a in arms}
    arm_reports = []
    arm_ours: dict[str, Any] = {}
    for arm in arms:
        played = by_arm.get(str(arm["endpoint"]), [])
        metrics, arm_ours[str(arm["arm"])] = metrics_of(played, tasks)
        arm_reports.append(
            ArmReport(
                arm=int(arm["arm"]),
                model=model,
                params=dict(arm.get("params", {})),
                metrics=metrics,
                episodes=sum(1 for e in played if scored(e)),
                failed=sum(1 for e in played if e.state == EpisodeState.FAILED),
                not_run=sum(1 for e in played if e.state == EpisodeState.CANCELLED),
                budget_stopped=bool(answer.get("spend_cap_cut")),
            )
        )
    # The contract compares a sweep's arms side by side and never pools them: its top-level metrics are an
    # eval's of one arm, and a sweep's are none (each arm's are in `arms`), not the first arm's passed off
    # as the eval's.
    swept = len(arm_reports) > 1
    top = {} if swept else arm_reports[0].metrics
    ours = {} if swept else arm_ours[str(arms[0]["arm"])]
    status = STATUS[RunStatus(run.status)]
    ended = run.status in (RunStatus.FINISHED, RunStatus.ERRORED, RunStatus.CANCELLED)
    incomplete = ended and (
        sum(1 for e in episodes if scored(e)) < run.episodes_total or bool(answer.get("spend_cap_cut"))
    )
    errors = [run.reason] if run.reason else []
    # A run that failed for an episode's error names it in its reason already: the CLI prints each entry,
    # so that episode's line again would say the one error twice.
    errors += [
        f"episode {e.index} ({e.benchmark_task}, seed {e.seed}): {e.error}"
        for e in episodes
        if e.error and not (run.reason and e.error in run.reason)
    ]
    stop: StopReason | None = None
    if run.status == RunStatus.CANCELLED:
        stop = "canceled"
    elif run.failure is not None:
        stop = STOPS.get(FailureKind(run.failure))
    elif answer.get("spend_cap_cut"):
        stop = "spend_cap"
    page = page_url(base_url, run.replay_token or "")
    return EvalReport(
        status=status,  # type: ignore[arg-type]
        metrics=top,
        cost_usd=cost_of(reservation),
        dashboard_url=page,
        videos=_videos(run, episodes, base_url),
        incomplete=incomplete,
        errors=errors[:50],
        arms=arm_reports if swept else None,
        timing=_timing(episodes),
        stop_reason=stop,
        arm_params=[ArmParams.model_validate(a) for a in answer["arm_params"]]
        if "arm_params" in answer
        else None,
        yardstick={
            "metrics": ours,
            **({"arms": arm_ours} if swept else {}),
            "overall": "the contract's overall pools every scored episode; the mean of task means weighs each"
            " task the same",
            "run": f"{run.id:x}",
            "page": page,
        },
    )


def cost_of(reservation: Reservation | None) -> float:
    """What the run cost in credits (Yardstick prices in credits; the contract's `_usd` fields carry them)."""
    if reservation is None:
        return 0.0
    units = reservation.charged_units if reservation.charged_units is not None else reservation.reserved_units
    return credits_value(units)


def _videos(run: Run, episodes: Sequence[RunEpisode], base_url: str) -> list[str]:
    root = base_url.rstrip("/")
    return [
        root + paths.EVAL_VIDEO.format(eval_id=eval_id(run.id), name=f"{e.index}.mp4")
        for e in episodes
        if (e.result or {}).get("videos")
    ][:200]


def _timing(episodes: Sequence[RunEpisode]) -> EvalTiming:
    steps = 0
    spent: dict[str, float] = {}
    for e in episodes:
        result = e.result or {}
        steps += int(result.get("steps", 0))
        for part, seconds in (result.get("timing") or {}).items():
            spent[part] = spent.get(part, 0.0) + float(seconds)
    per_step = {part: 1000 * seconds / steps for part, seconds in spent.items()} if steps else {}
    return EvalTiming(step_ms=per_step, steps=steps)


def progress(run: Run, episodes: Sequence[RunEpisode]) -> dict[str, Any]:
    """The contract's counts. `done` is every episode that ended, a failed one too (the CLI scores `done -
    failed` of them); the rest say what the others are doing."""
    counts = {state: 0 for state in EpisodeState}
    for e in episodes:
        counts[EpisodeState(e.state)] += 1
    return {
        "done": counts[EpisodeState.DONE] + counts[EpisodeState.FAILED],
        "failed": counts[EpisodeState.FAILED],
        "total": run.episodes_total,
        "running": counts[EpisodeState.LEASED],
        "pending": counts[EpisodeState.QUEUED],
        "not_run": counts[EpisodeState.CANCELLED],
    }


def means(episodes: Sequence[RunEpisode]) -> Mapping[str, dict[str, float]]:
    """Each metric's mean over the scored episodes, and how many."""
    totals: dict[str, list[float]] = {}
    for e in episodes:
        if scored(e):
            for name, value in (e.result or {}).get("metrics", {}).items():
                totals.setdefault(name, []).append(float(value))
    return {name: {"mean": math.fsum(v) / len(v), "n": len(v)} for name, v in totals.items()}
