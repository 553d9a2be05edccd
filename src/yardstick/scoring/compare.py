"""Two policies on the same tasks and seeds: the difference in success, paired episode by episode.

Pairing is what makes a small run informative: each pair shares its task and its seed, so the variation
between seeds falls out of the difference. Per task, the mean of paired differences with a bootstrap
interval; overall, the mean of task means with a stratified bootstrap interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from yardstick.scoring.intervals import bootstrap_mean, stratified_bootstrap_mean_of_means


@dataclass(frozen=True)
class Difference:
    """`a − b` in success over `pairs` paired episodes, with its interval."""

    value: float
    low: float
    high: float
    pairs: int


def paired_difference(
    a: Mapping[tuple[str, int], float], b: Mapping[tuple[str, int], float], confidence: float = 0.95
) -> tuple[dict[str, Difference], Difference | None]:
    """Per task and overall, the difference `a − b` over the (task, trial) keys both have."""
    by_task: dict[str, list[float]] = {}
    for key in sorted(set(a) & set(b)):
        by_task.setdefault(key[0], []).append(a[key] - b[key])
    tasks = {task: _difference(diffs, confidence) for task, diffs in by_task.items()}
    if not by_task:
        return tasks, None
    groups: Sequence[Sequence[float]] = list(by_task.values())
    value = math.fsum(math.fsum(g) / len(g) for g in groups) / len(groups)
    low, high = stratified_bootstrap_mean_of_means(groups, confidence)
    return tasks, Difference(value, low, high, sum(len(g) for g in groups))


def _difference(diffs: Sequence[float], confidence: float) -> Difference:
    low, high = bootstrap_mean(diffs, confidence)
    return Difference(math.fsum(diffs) / len(diffs), low, high, len(diffs))
