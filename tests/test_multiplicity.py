"""Many comparisons as one family: Holm and Benjamini–Hochberg as defined, their error over simulated families
of identical policies, and `yardstick eval compare` over twelve tasks naming the adjustment it made."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
from typer.testing import CliRunner

from conftest import toy
from yardstick.cli.main import app
from yardstick.scoring.compare import exact_paired_p
from yardstick.scoring.multiplicity import Adjustment, adjust, parse_adjustment, task_tests

ALPHA = 0.05
runner = CliRunner()


def test_holm_steps_down_and_keeps_each_adjusted_value_at_least_the_one_before() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running max 0.06.
    assert adjust([0.01, 0.04, 0.03, 0.005], "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust([0.5, 0.9], "holm") == [1.0, 1.0]  # capped at 1


def test_benjamini_hochberg_matches_scipys() -> None:
    p = [0.01, 0.04, 0.03, 0.005, 0.2, 0.6, 0.0001, 0.049, 0.5, 0.02]
    assert adjust(p, "bh") == pytest.approx(list(scipy.stats.false_discovery_control(p, method="bh")))
    assert adjust(p, "none") == p


def test_task_tests_count_the_pairs_of_each_task_and_adjust_over_all_of_them() -> None:
    a = {("t1", i): i < 12 for i in range(12)} | {("t2", i): i % 2 == 0 for i in range(10)}
    b = {("t1", i): False for i in range(12)} | {("t2", i): i % 2 == 1 for i in range(10)}
    first, second = task_tests(a, b, ALPHA, "holm")
    assert (first.task, first.pairs, first.a_only, first.b_only) == ("t1", 12, 12, 0)
    assert first.p == exact_paired_p(12, 0) and first.p_adjusted == 2 * first.p
    assert first.differs and first.better == "a"
    assert (second.a_only, second.b_only, second.p_adjusted, second.differs) == (5, 5, 1.0, False)


@pytest.mark.parametrize(("text", "expected"), [("holm", "holm"), (" BH ", "bh"), ("none", "none")])
def test_an_adjustment_is_read_by_name(text: str, expected: str) -> None:
    assert parse_adjustment(text) == expected


def test_an_unknown_adjustment_or_a_p_value_outside_0_1_is_refused_naming_the_rule() -> None:
    with pytest.raises(ValueError, match="choose one of holm, bh, none"):
        parse_adjustment("bonferroni")
    with pytest.raises(ValueError, match=r"p-value must lie in 0\.\.1"):
        adjust([0.2, 1.5])


# --- the family's error, simulated ------------------------------------------------------------------------

FAMILIES = 2000
TASKS = 10
PAIRS = 40


@cache
def _p(a_only: int, b_only: int) -> float:
    return exact_paired_p(a_only, b_only)


def _any_called_different(method: Adjustment) -> float:
    """The share of families of ten tasks, two identical policies on each (a rate per task, the same for
    both), in which at least one task is called different at α after `method`."""
    rng = np.random.default_rng(52)
    rates = rng.uniform(0.1, 0.9, size=(FAMILIES, TASKS, 1))
    a = rng.random((FAMILIES, TASKS, PAIRS)) < rates
    b = rng.random((FAMILIES, TASKS, PAIRS)) < rates
    a_only = (a & ~b).sum(axis=2).tolist()
    b_only = (b & ~a).sum(axis=2).tolist()
    called = 0
    for wins, losses in zip(a_only, b_only, strict=True):
        raw = [_p(x, y) for x, y in zip(wins, losses, strict=True)]
        called += any(q <= ALPHA for q in adjust(raw, method))
    return called / FAMILIES


# Three binomial standard errors of a share α over the families: an adjustment that held its error at α
# lands above this with chance about 0.1%.
MARGIN = 3 * math.sqrt(ALPHA * (1 - ALPHA) / FAMILIES)


@pytest.mark.parametrize("method", ["holm", "bh"])
def test_ten_tasks_of_identical_policies_are_called_different_in_fewer_than_alpha_of_families(
    method: Adjustment,
) -> None:
    assert _any_called_different(method) < ALPHA + MARGIN


def test_without_adjusting_ten_tasks_of_identical_policies_are_called_different_far_too_often() -> None:
    share = _any_called_different("none")
    assert share > ALPHA + 3 * MARGIN, share


# --- through `yardstick eval compare` ---------------------------------------------------------------------


def compare(tmp_path: Path, *extra: str) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / "cmp"
    policies = ["-p", toy("Skill"), "-p", toy("Steady")]
    args = ["eval", "compare", "-b", toy("ManyCoins"), *policies, "--in-process", "--out", str(out), *extra]
    result = runner.invoke(app, args)
    found = out / "comparison.json"
    return result.exit_code, result.output, json.loads(found.read_text()) if found.exists() else {}


def _said(output: str) -> str:
    return " ".join(output.replace("│", " ").split())


def test_compare_over_twelve_tasks_prints_holm_adjusted_p_values_beside_the_raw_ones(tmp_path: Path) -> None:
    code, output, comparison = compare(tmp_path, "--max-trials", "30")
    assert code == 0, output
    tasks = comparison["tasks"]
    assert tasks["adjust"] == "holm" and tasks["family"] == 12 == len(tasks["rows"])
    assert "Holm" in tasks["method"] and "family-wise error ≤ 0.05" in tasks["error"]
    rows = tasks["rows"]
    assert [r["p_adjusted"] for r in rows] == adjust([r["p"] for r in rows], "holm")
    assert all(r["p_adjusted"] >= r["p"] for r in rows) and all(r["pairs"] == 30 for r in rows)
    assert any(r["differs"] for r in rows)
    assert all(r["better"] == toy("Steady") for r in rows if r["differs"])
    said = _said(output)
    assert "Holm step-down over 12 tasks" in said and "family-wise error ≤ 0.05" in said
    for row in rows:
        assert f"{row['p']:.3g}" in said and f"{row['p_adjusted']:.3g}" in said


def test_compare_with_bh_or_none_says_which_and_what_error_it_holds(tmp_path: Path) -> None:
    code, output, comparison = compare(tmp_path, "--max-trials", "10", "--adjust", "bh", "--json")
    assert code in (0, 9), output
    tasks = comparison["tasks"]
    assert tasks["adjust"] == "bh" and "Benjamini–Hochberg" in tasks["method"]
    assert "false discovery rate" in tasks["error"]
    raw = [r["p"] for r in tasks["rows"]]
    assert [r["p_adjusted"] for r in tasks["rows"]] == adjust(raw, "bh")
    assert json.loads(output[output.index("{") :])["comparison"]["tasks"] == tasks

    code, output, comparison = compare(tmp_path, "--max-trials", "10", "--adjust", "none")
    tasks = comparison["tasks"]
    assert [r["p_adjusted"] for r in tasks["rows"]] == [r["p"] for r in tasks["rows"]]
    # 1 − 0.95^12: what twelve unadjusted tests at 5% risk together.
    assert "reaches 0.46" in tasks["error"] and "reaches 0.46" in _said(output)


def test_compare_with_an_unknown_adjustment_is_refused_before_anything_plays(tmp_path: Path) -> None:
    code, output, comparison = compare(tmp_path, "--adjust", "bonferroni")
    assert code == 2 and "--adjust" in output and "holm, bh, none" in _said(output)
    assert not comparison
