"""Many comparisons as one family: two policies' per-task differences, each an exact paired test, with their
p-values adjusted for the number of tasks.

Ten tasks each tested at 5% call at least one of them "different" about 40% of the time when none is (if the
tasks are independent). Holm's step-down (the default) keeps that family-wise error at α whatever the tasks'
dependence, and rejects everything Bonferroni does and more. Benjamini–Hochberg (`bh`) bounds instead the
false discovery rate (the expected share of wrong calls among the tasks called different) at α, for
independent or positively dependent tests: more power over many tasks, no family-wise bound. Both are a few
lines over the sorted p-values, written here rather than adding statsmodels (whose `multipletests` gives the
same numbers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from yardstick.scoring.compare import exact_paired_p

Adjustment = Literal["holm", "bh", "none"]
ADJUSTMENTS: Final[dict[str, Adjustment]] = {"holm": "holm", "bh": "bh", "none": "none"}
DEFAULT_ADJUSTMENT: Final[Adjustment] = "holm"

METHOD: Final[dict[Adjustment, str]] = {
    "holm": "Holm step-down",
    "bh": "Benjamini–Hochberg",
    "none": "unadjusted",
}


def parse_adjustment(text: str) -> Adjustment:
    """`holm`, `bh` or `none`, case-insensitive; anything else is refused naming the choices."""
    found = ADJUSTMENTS.get(text.strip().lower())
    if found is not None:
        return found
    raise ValueError(f"{text!r} is not a multiplicity adjustment: choose one of {', '.join(ADJUSTMENTS)}")


def adjust(p_values: Sequence[float], method: Adjustment = DEFAULT_ADJUSTMENT) -> list[float]:
    """Each p-value adjusted for the family of all of them, in their given order: a test is rejected at α
    exactly when its adjusted p-value is ≤ α."""
    for p in p_values:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"a p-value must lie in 0..1, not {p!r}")
    if method == "none":
        return list(p_values)
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    if method == "holm":
        # The k-th smallest (from 0) is tested at α / (m − k); a step stops at the first it keeps, so each
        # adjusted value is the running maximum.
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * p_values[i]))
            adjusted[i] = running
        return adjusted
    # Benjamini–Hochberg: the k-th smallest (from 1) is compared with kα/m; stepping up from the largest,
    # each adjusted value is the running minimum.
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, m * p_values[i] / rank)
        adjusted[i] = running
    return adjusted


def family_error(method: Adjustment, alpha: float, tasks: int) -> str:
    """What the family's error is, in words, for the output beside the table."""
    if method == "holm":
        return (
            f"family-wise error ≤ {alpha:g}: the chance of calling any of the {tasks} tasks different when "
            "none is"
        )
    if method == "bh":
        return (
            f"false discovery rate ≤ {alpha:g} (the expected share of wrong calls among tasks called "
            f"different); the chance of any wrong call among {tasks} tasks is not bounded at {alpha:g}"
        )
    independent = 1.0 - (1.0 - alpha) ** tasks
    return (
        f"each task at {alpha:g}, none adjusted: over {tasks} tasks the chance of calling any different when "
        f"none is reaches {independent:.2f} (independent tasks)"
    )


@dataclass(frozen=True)
class TaskTest:
    """One task's exact paired test (McNemar's) between A and B, and its p-value adjusted for the family."""

    task: str
    pairs: int
    a_only: int
    b_only: int
    p: float
    p_adjusted: float
    differs: bool  # p_adjusted ≤ α

    @property
    def better(self) -> Literal["a", "b"] | None:
        if not self.differs:
            return None
        return "a" if self.a_only > self.b_only else "b"


def task_tests(
    a: Mapping[tuple[str, int], bool],
    b: Mapping[tuple[str, int], bool],
    alpha: float,
    method: Adjustment = DEFAULT_ADJUSTMENT,
) -> list[TaskTest]:
    """Per task, over the (task, trial) keys both sides played, the exact paired test; the family is every
    task either side played (a task with no common pair tests at p = 1, and still counts in the family)."""
    counts: dict[str, tuple[int, int, int]] = {task: (0, 0, 0) for task, _ in sorted(set(a) | set(b))}
    for key in set(a) & set(b):
        pairs, a_only, b_only = counts[key[0]]
        counts[key[0]] = (pairs + 1, a_only + int(a[key] and not b[key]), b_only + int(b[key] and not a[key]))
    raw = [exact_paired_p(a_only, b_only) for _, a_only, b_only in counts.values()]
    adjusted = adjust(raw, method)
    return [
        TaskTest(task, pairs, a_only, b_only, p, q, differs=q <= alpha)
        for (task, (pairs, a_only, b_only)), p, q in zip(counts.items(), raw, adjusted, strict=True)
    ]
