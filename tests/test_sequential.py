"""Evals that stop when decided: the guarantees computed exactly, then each rule through `yardstick eval run`
and `yardstick eval compare` on Coins (a coin fixed per seed: every policy's rate is known before it plays),
and Meta-World's expert against random."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import toy
from toys import coin
from yardstick.cli.main import app
from yardstick.scoring.compare import PairedTest, exact_paired_p, fixed_n_power
from yardstick.scoring.sequential import checkpoints, confidence_sequence, log_wealth, parse_until

runner = CliRunner()
ALPHA = 0.05


def yardstick(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def rate(skill: float, task: str, trials: int) -> float:
    return sum(coin(task, seed) < skill for seed in range(trials)) / trials


# --- the guarantees, exactly (no sampling) ----------------------------------------------------------------


def _binomial(n: int, k: int, p: float) -> float:
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.97])
def test_a_confidence_sequence_misses_the_rate_at_any_look_at_most_alpha_of_the_time(p: float) -> None:
    """P(some n ≤ 80 has p outside the interval), by dynamic programming over the paths not yet missed."""
    alive = {0: 1.0}  # successes -> probability of being here with every interval so far holding p
    missed = 0.0
    for n in range(1, 81):
        step: dict[int, float] = {}
        for s, mass in alive.items():
            for k, weight in ((s + 1, p), (s, 1 - p)):
                step[k] = step.get(k, 0.0) + mass * weight
        alive = {}
        for s, mass in step.items():
            low, high = confidence_sequence(s, n, ALPHA)
            if low <= p <= high:
                alive[s] = mass
            else:
                missed += mass
    assert missed <= ALPHA


def test_the_paired_test_says_a_difference_where_there_is_none_at_most_alpha_of_the_time() -> None:
    """Discordant pairs as fair coins, 120 looks: the chance the evidence ever reaches 1/α."""
    limit = math.log(1 / ALPHA)
    alive = {0: 1.0}  # A's wins among the discordant pairs so far -> probability, not yet decided
    rejected = 0.0
    for d in range(1, 121):
        step: dict[int, float] = {}
        for w, mass in alive.items():
            for k in (w, w + 1):
                step[k] = step.get(k, 0.0) + mass / 2
        alive = {}
        for w, mass in step.items():
            if log_wealth(w, d, 0.5, PairedTest().prior) >= limit:
                rejected += mass
            else:
                alive[w] = mass
    assert 0 < rejected <= ALPHA


def test_a_confidence_sequence_narrows_and_costs_width_against_a_fixed_n_interval() -> None:
    from yardstick.scoring.rates import clopper_pearson

    widths = [
        confidence_sequence(round(0.8 * n), n)[1] - confidence_sequence(round(0.8 * n), n)[0]
        for n in (20, 80, 320)
    ]
    assert widths[0] > widths[1] > widths[2]
    anytime, fixed = confidence_sequence(80, 100), clopper_pearson(80, 100)
    assert anytime[0] < fixed[0] and fixed[1] < anytime[1]  # the price of looking as often as one likes


def test_the_fixed_n_power_is_the_binomial_tests_power_enumerated() -> None:
    """McNemar's exact test with 12 pairs, enumerated over every outcome of every pair."""
    n, a_only, b_only = 12, 0.3, 0.1
    from itertools import product

    # The test's own rule: reject where its p-value is at most α (asked once for each split).
    rejects = {(w, d): exact_paired_p(w, d - w) <= ALPHA for d in range(n + 1) for w in range(d + 1)}
    power = 0.0
    for outcome in product((0, 1, 2), repeat=n):  # 0 concordant, 1 A alone, 2 B alone
        weight = math.prod((1 - a_only - b_only, a_only, b_only)[o] for o in outcome)
        w, d = outcome.count(1), outcome.count(1) + outcome.count(2)
        if rejects[(w, d)]:
            power += weight
    assert fixed_n_power(n, a_only, b_only, ALPHA) == pytest.approx(power, abs=1e-9)


def test_looks_grow_by_rounds_and_end_at_the_cap() -> None:
    assert checkpoints(100) == [10, 20, 30, 40, 50, 62, 77, 96, 100]
    assert checkpoints(7) == [7]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("width<0.1", "not a stopping rule"),
        ("width<=0", "outside (0, 1]"),
        ("width<=2", "outside"),
        ("soon", "not"),
    ],
)
def test_a_stopping_rule_is_refused_naming_the_rule(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match="--until takes") as caught:
        parse_until(text)
    assert problem in str(caught.value)


# --- through the CLI --------------------------------------------------------------------------------------


def coins(tmp_path: Path, *extra: str, policy: str = "Skill") -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / "run"
    code, output = yardstick(
        "eval",
        "run",
        "-b",
        toy("Coins"),
        "-p",
        toy(policy),
        "--in-process",
        "--out",
        str(out),
        "--overwrite",
        *extra,
    )
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return code, output, report


def played(report: dict[str, Any], tmp_path: Path) -> dict[str, list[tuple[int, int, bool]]]:
    """Each task's (trial, seed, success) from the run folder's episodes.csv."""
    import csv

    by_task: dict[str, list[tuple[int, int, bool]]] = {}
    with (tmp_path / "run" / "episodes.csv").open() as rows:
        for row in csv.DictReader(rows):
            by_task.setdefault(row["task"], []).append(
                (int(row["trial"]), int(row["seed"]), row["success"] == "True")
            )
    return {task: sorted(rows) for task, rows in by_task.items()}


def test_a_gate_met_is_decided_early_on_a_prefix_of_the_fixed_trials(tmp_path: Path) -> None:
    code, output, report = coins(
        tmp_path,
        "--param",
        "policy.skill=0.97",
        "--gate",
        "success>=0.8",
        "--until",
        "decided",
        "--max-trials",
        "200",
    )
    assert code == 0, output
    assert "gate met" in output and "anytime-valid" in output
    stopping = report["stopping"]
    assert stopping["gates"] == [{"gate": "success>=0.8", "decision": "met"}]
    for task, rows in played(report, tmp_path).items():
        n = len(rows)
        assert 10 <= n < 200 and stopping["tasks"][task]["stopped_at"] is not None
        # Trials 0..n-1 at the fixed-n eval's seeds, each succeeding exactly where its coin says.
        assert rows == [(k, k, coin(task, k) < 0.97) for k in range(n)]
        success = report["summary"]["tasks"][task]["metrics"]["success"]
        assert success["interval"] == "confidence-sequence"
        assert (success["low"], success["high"]) == (
            stopping["tasks"][task]["low"],
            stopping["tasks"][task]["high"],
        )
    low = report["summary"]["overall"]["success"]["low"]
    assert low >= 0.8 and report["config"]["interval"] == "confidence-sequence"
    assert "success_pooled" not in report["summary"]["overall"]


def test_a_gate_missed_exits_8_and_one_undecided_at_the_cap_exits_9(tmp_path: Path) -> None:
    code, output, report = coins(
        tmp_path, "--param", "policy.skill=0.5", "--gate", "success>=0.8", "--until", "decided"
    )
    assert code == 8, output
    assert report["stopping"]["gates"][0]["decision"] == "missed"
    assert report["episodes"]["planned"] < 400
    # A rate right at the threshold cannot be told apart from it in 20 trials.
    code, output, report = coins(
        tmp_path,
        "--param",
        "policy.skill=0.8",
        "--gate",
        "success>=0.8",
        "--until",
        "decided",
        "--max-trials",
        "20",
    )
    assert code == 9, output
    assert "undecided" in output
    assert report["stopping"]["gates"][0]["decision"] is None and report["episodes"]["planned"] == 40


def test_a_task_gate_decides_its_task_alone(tmp_path: Path) -> None:
    code, output, report = coins(
        tmp_path, "--param", "policy.skill=0.97", "--gate", "success[heads]>=0.7", "--until", "decided"
    )
    assert code == 0, output
    tasks = report["stopping"]["tasks"]
    assert tasks["tails"]["episodes"] == 10  # a first round, then nothing asks more of it
    assert tasks["heads"]["episodes"] >= 10


def test_until_width_plays_each_task_until_its_interval_is_that_narrow(tmp_path: Path) -> None:
    code, output, report = coins(tmp_path, "--param", "policy.skill=0.9", "--until", "width<=0.25")
    assert code == 0, output
    for task, trace in report["stopping"]["tasks"].items():
        assert trace["high"] - trace["low"] <= 0.25 and trace["stopped_at"] == trace["episodes"]
        assert trace["rate"] == pytest.approx(rate(0.9, task, trace["episodes"]))
        # The interval narrowed look by look, and not before the look that stopped it was it that narrow.
        widths = [high - low for _, low, high in trace["looks"]]
        assert widths == sorted(widths, reverse=True)
        earlier = [look for look in checkpoints(200) if look < trace["episodes"]]
        if earlier:
            assert widths[earlier[-1] - 1] > 0.25
    assert "until width<=0.25" in output


@pytest.mark.parametrize(
    ("extra", "hint", "words"),
    [
        (["--until", "later"], "--until", "not a stopping rule"),
        (["--until", "decided", "--trials", "5"], "--trials", "--until grows them"),
        (["--max-trials", "5"], "--max-trials", "give --until too"),
        (["--alpha", "0.1"], "--alpha", "give --until too"),
        (["--until", "decided"], "--gate", "at least one --gate"),
        (["--until", "decided", "--gate", "steps>=3"], "--gate", "success rates only"),
        (["--until", "decided", "--gate", "success.low>=0.8"], "--gate", "true rate"),
        (["--until", "decided", "--gate", "success[nope]>=0.8"], "--gate", "not a task"),
    ],
)
def test_a_stopping_rule_misused_is_refused_before_anything_plays(
    tmp_path: Path, extra: list[str], hint: str, words: str
) -> None:
    code, output, _ = coins(tmp_path, *extra)
    assert code == 2, output
    assert hint in output and words in " ".join(output.replace("│", " ").split())
    assert not (tmp_path / "run").exists()


def compare(tmp_path: Path, a: str, b: str, *extra: str) -> tuple[int, str, dict[str, Any]]:
    out = tmp_path / "cmp"
    code, output = yardstick(
        "eval",
        "compare",
        "-b",
        toy("Coins"),
        "-p",
        toy(a),
        "-p",
        toy(b),
        "--in-process",
        "--out",
        str(out),
        *extra,
    )
    found = out / "comparison.json"
    return code, output, json.loads(found.read_text()) if found.exists() else {}


def test_compare_until_decided_names_the_better_policy_in_fewer_pairs_than_the_cap(tmp_path: Path) -> None:
    code, output, comparison = compare(
        tmp_path, "Skill", "Steady", "--until", "decided", "--max-trials", "100"
    )
    assert code == 0, output
    assert comparison["better"] == toy("Steady") and comparison["decided"]
    assert comparison["pairs"] < comparison["max_pairs"] == 200
    # Coins couples the two: Steady succeeds wherever Skill does, so every discordant pair is Steady's.
    assert comparison["a_only"] == 0 and comparison["b_only"] > 0
    planning = comparison["planning"]
    assert planning["power"] > 0.9 and planning["fixed_n_pairs"] > 0 and planning["mean_pairs"] >= 10
    for side in ("a", "b"):
        report = json.loads((tmp_path / "cmp" / side / "report.json").read_text())
        assert report["episodes"]["planned"] == comparison["pairs"]
    assert "is better" in output and "fixed-n exact paired test" in output


def test_compare_of_equals_stays_undecided_to_the_cap_and_exits_9(tmp_path: Path) -> None:
    code, output, comparison = compare(
        tmp_path, "Skill", "Skill", "--until", "decided", "--max-trials", "30", "--json"
    )
    assert code == 9, output
    assert comparison["pairs"] == 60 and not comparison["decided"] and comparison["better"] is None
    printed = json.loads(output[output.index("{") :])
    assert printed["comparison"] == comparison and printed["a"]["episodes"]["planned"] == 60


def test_compare_with_too_few_trials_says_so_and_what_would_decide(tmp_path: Path) -> None:
    code, output, comparison = compare(tmp_path, "Skill", "Steady", "--max-trials", "2")
    assert code == 9, output
    planning = comparison["planning"]
    assert planning["power"] < 0.8 and planning["fixed_n_power"] == 0.8 and planning["fixed_n_pairs"] > 4
    said = " ".join(output.split())
    assert "too few to decide" in said and f"needs {planning['fixed_n_pairs']} pairs for power 0.80" in said


def test_compare_without_a_rule_plays_its_fixed_trials_and_reads_the_test_once(tmp_path: Path) -> None:
    code, output, comparison = compare(tmp_path, "Steady", "Skill", "--max-trials", "40")
    assert code == 0, output
    assert (
        comparison["rule"] == "fixed" and comparison["pairs"] == 80 and comparison["better"] == toy("Steady")
    )


@pytest.mark.parametrize(
    ("policies", "extra", "hint"),
    [
        (["Skill"], [], "--policy"),
        (["Skill", "Skill", "Steady"], [], "--policy"),
        (["Skill", "Steady"], ["--until", "width<=0.1"], "--until"),
    ],
)
def test_compare_misused_is_refused(tmp_path: Path, policies: list[str], extra: list[str], hint: str) -> None:
    args = [arg for p in policies for arg in ("-p", toy(p))]
    code, output = yardstick("eval", "compare", "-b", toy("Coins"), *args, "--in-process", *extra)
    assert code == 2 and hint in output


@pytest.mark.slow
def test_metaworlds_expert_beats_random_on_mt10_in_far_fewer_than_the_fixed_episodes(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    code, output = yardstick(
        "eval",
        "compare",
        "-b",
        "mt10",
        "-p",
        "random",
        "-p",
        "expert",
        "--tasks",
        "reach-v3,button-press-topdown-v3",
        "--until",
        "decided",
        "--max-trials",
        "50",
        "--workers",
        "2",
        "--out",
        str(out),
    )
    assert code == 0, output
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["better"] == "expert"
    assert comparison["pairs"] <= 40 < comparison["max_pairs"] == 100
