"""Checkpoint curves' rules: the name that carries a checkpoint, their order, and the exact paired test that
flags a regression (the page and `eval status`: test_pages.py)."""

from __future__ import annotations

import datetime as dt
import math
from itertools import product

import pytest

from yardstick.core.checkpoints import Point, _ordered, flag_regressions, split_checkpoint
from yardstick.scoring.compare import exact_paired_p

WHEN = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def point(checkpoint: str, outcomes: list[bool], minutes: int = 0) -> Point:
    trials = {(("left", "right")[i % 2], i, i): won for i, won in enumerate(outcomes)}
    value = sum(outcomes) / len(outcomes)
    return Point(
        checkpoint,
        1,
        f"pol@{checkpoint}",
        WHEN + dt.timedelta(minutes=minutes),
        None,
        value,
        None,
        None,
        len(outcomes),
        trials,
    )


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("pi0@20000", ("pi0", "20000")),
        ("a@b@final", ("a@b", "final")),
        ("plain", ("plain", None)),
        ("@5", ("@5", None)),
        ("pi0@", ("pi0@", None)),
    ],
)
def test_a_checkpoint_is_the_part_of_an_endpoints_name_after_its_last_at(
    name: str, split: tuple[str, str | None]
) -> None:
    assert split_checkpoint(name) == split


def test_checkpoints_are_ordered_by_step_where_all_are_steps_else_by_filing() -> None:
    steps = [point("20k", [True], 0), point("5000", [True], 1), point("7_500", [True], 2)]
    assert [p.checkpoint for p in _ordered(steps)] == ["5000", "7_500", "20k"]
    labels = [point("final", [True], 2), point("5000", [True], 0), point("best", [True], 1)]
    assert [p.checkpoint for p in _ordered(labels)] == ["5000", "best", "final"]


def test_the_exact_paired_p_is_the_binomial_tests_enumerated() -> None:
    for a_only, b_only in product(range(7), repeat=2):
        d = a_only + b_only
        if d == 0:
            assert exact_paired_p(0, 0) == 1.0
            continue
        extreme = min(a_only, b_only)
        p = sum(math.comb(d, k) for k in range(d + 1) if min(k, d - k) <= extreme) / 2**d
        assert exact_paired_p(a_only, b_only) == pytest.approx(min(1.0, p))


def test_a_checkpoint_worse_than_the_best_earlier_on_the_same_trials_is_flagged() -> None:
    best = point("1000", [True] * 12)
    fine = point("2000", [True] * 10 + [False] * 2, 1)  # 2 trials lost: p = 0.5, not a regression
    worse = point("3000", [True] * 5 + [False] * 7, 2)  # 7 lost, none gained: p = 2/128
    curve = [best, fine, worse]
    flag_regressions(curve)
    assert best.regression is None and fine.regression is None
    assert worse.regression is not None
    assert (worse.regression.against, worse.regression.a_only, worse.regression.b_only) == ("1000", 7, 0)
    assert worse.regression.p_value == pytest.approx(2 / 2**7)


def test_a_drop_on_other_trials_is_not_a_regression() -> None:
    """The later checkpoint played none of the earlier one's trials: nothing to pair, nothing flagged."""
    early = point("1", [True] * 10)
    late = point("2", [False] * 10, 1)
    late.outcomes = {("left", 100 + k, k): False for k in range(10)}
    flag_regressions([early, late])
    assert late.regression is None


def test_the_exact_paired_p_holds_for_thousands_of_pairs() -> None:
    """A long eval's checkpoints differ on thousands of trials: the binomial's terms are far past a float."""
    assert 0.0 < exact_paired_p(1500, 1700) < 0.001
    assert exact_paired_p(2000, 2000) == pytest.approx(1.0)
