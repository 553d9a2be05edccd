"""Aggregate finished episodes into per-task and overall scores with intervals.

Rows are plain mappings (task, metrics, steps, robot_seconds, error) so that scoring depends on nothing else
of ours: the engine, the store and a re-read report.json can all feed it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yardstick.scoring.intervals import bootstrap_mean, stratified_bootstrap_mean_of_means, stratified_rate
from yardstick.scoring.rates import DEFAULT_INTERVAL, rate_interval

SUCCESS = "success"
SUCCESS_POOLED = "success_pooled"
MEAN_OF_TASK_MEANS = "mean of task means"
POOLED = "pooled"


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate, its interval, and how both were made. `method` is set on overall estimates only,
    where two ways of averaging (mean of task means, pooled) sit side by side."""

    value: float
    low: float
    high: float
    n: int
    interval: str
    method: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "low": self.low, "high": self.high, "n": self.n}
        if self.method is not None:
            out["method"] = self.method
        out["interval"] = self.interval
        return out


@dataclass(frozen=True, slots=True)
class TaskSummary:
    description: str
    episodes: int
    errors: int
    metrics: dict[str, Estimate] = field(default_factory=dict)
    mean_steps: float | None = None
    mean_robot_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "episodes": self.episodes,
            "errors": self.errors,
            "metrics": {name: est.to_dict() for name, est in self.metrics.items()},
            "mean_steps": self.mean_steps,
            "mean_robot_seconds": self.mean_robot_seconds,
        }


@dataclass(frozen=True, slots=True)
class Summary:
    overall: dict[str, Estimate]
    tasks: dict[str, TaskSummary]

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall": {name: est.to_dict() for name, est in self.overall.items()},
            "tasks": {name: task.to_dict() for name, task in self.tasks.items()},
        }


@dataclass(slots=True)
class _TaskRows:
    errors: int = 0
    steps: list[float] = field(default_factory=list)
    robot_seconds: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)


def _number(value: Any, task: str, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"task {task!r}: metric {name!r} must be a number, not {value!r}") from None


def _collect(rows: Sequence[Mapping[str, Any]], task_descriptions: Mapping[str, str]) -> dict[str, _TaskRows]:
    by_task = {task: _TaskRows() for task in task_descriptions}
    for row in rows:
        task = str(row["task"])
        # A task the descriptions do not name still gets scored (after the named ones): hiding episodes
        # that ran would be worse than an entry without a description.
        bucket = by_task.setdefault(task, _TaskRows())
        if row.get("error") is not None:
            bucket.errors += 1
            continue
        bucket.steps.append(float(row.get("steps") or 0))
        bucket.robot_seconds.append(float(row.get("robot_seconds") or 0.0))
        metrics = dict(row.get("metrics") or {})
        # An EpisodeResult.to_dict() carries success beside its metrics too; take it when metrics omit it.
        if SUCCESS not in metrics and SUCCESS in row:
            metrics[SUCCESS] = row[SUCCESS]
        for name, raw in metrics.items():
            value = _number(raw, task, str(name))
            # A metric an episode could not compute (NaN) says nothing about the policy; counting it would
            # poison every mean of its task and make the report invalid JSON.
            if math.isfinite(value):
                bucket.metrics.setdefault(str(name), []).append(value)
    return by_task


def _ordered(names: set[str]) -> list[str]:
    return ([SUCCESS] if SUCCESS in names else []) + sorted(names - {SUCCESS})


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def summarize(
    rows: Sequence[Mapping[str, Any]],
    task_descriptions: Mapping[str, str],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    interval: str = DEFAULT_INTERVAL,
) -> Summary:
    """Score the finished rows (error None) per task and overall; errored rows are only counted.

    Per task, a 0/1 "success" gets the rate interval `interval` names (`rates.INTERVALS`) and every other
    metric a bootstrap one. Overall, each metric is the mean of task means (each task weighs the same,
    however many episodes it ran) with a stratified interval (`interval` at the effective sample size for a
    0/1 "success", bootstrap otherwise); "success_pooled" adds the pooled rate over all episodes beside it.
    Each estimate names its interval ("jeffreys 95%", "stratified jeffreys 95%").
    """
    rate = rate_interval(interval)
    by_task = _collect(rows, task_descriptions)
    pct = f"{confidence * 100:g}%"
    success_values = [v for bucket in by_task.values() for v in bucket.metrics.get(SUCCESS, [])]
    binary_success = all(v in (0.0, 1.0) for v in success_values)

    def estimate(name: str, values: list[float], method: str | None = None) -> Estimate:
        value = math.fsum(values) / len(values)
        if name == SUCCESS and binary_success:
            low, high = rate(round(math.fsum(values)), len(values), confidence)
            kind = f"{interval} {pct}"
        else:
            low, high = bootstrap_mean(values, confidence, resamples, seed)
            kind = f"bootstrap {pct}"
        return Estimate(value, low, high, len(values), kind, method)

    tasks: dict[str, TaskSummary] = {}
    for task, bucket in by_task.items():
        tasks[task] = TaskSummary(
            description=task_descriptions.get(task, ""),
            episodes=len(bucket.steps),
            errors=bucket.errors,
            metrics={name: estimate(name, bucket.metrics[name]) for name in _ordered(set(bucket.metrics))},
            mean_steps=_mean(bucket.steps),
            mean_robot_seconds=_mean(bucket.robot_seconds),
        )

    overall: dict[str, Estimate] = {}
    for name in _ordered({name for bucket in by_task.values() for name in bucket.metrics}):
        groups = [bucket.metrics[name] for bucket in by_task.values() if bucket.metrics.get(name)]
        if name == SUCCESS and binary_success:
            low, high = stratified_rate(groups, rate, confidence)
            kind = f"stratified {interval} {pct}"
        else:
            low, high = stratified_bootstrap_mean_of_means(groups, confidence, resamples, seed)
            kind = f"stratified bootstrap {pct}"
        value = math.fsum(math.fsum(g) / len(g) for g in groups) / len(groups)
        overall[name] = Estimate(value, low, high, sum(map(len, groups)), kind, MEAN_OF_TASK_MEANS)
        if name == SUCCESS:
            overall[SUCCESS_POOLED] = estimate(SUCCESS, success_values, POOLED)
    return Summary(overall=overall, tasks=tasks)
