"""Scoring: intervals against hand-computed values, aggregation rules, and gates."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from yardstick.scoring import (
    Gate,
    Summary,
    bootstrap_mean,
    parse_gate,
    stratified_bootstrap_mean_of_means,
    summarize,
    wilson,
)
from yardstick.scoring.rates import clopper_pearson, jeffreys

# --- intervals -------------------------------------------------------------------------------------------

Z95 = 1.959963984540054


def _wilson_by_hand(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    p = k / n
    denominator = 1 + z * z / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return ((centre - half) / denominator, (centre + half) / denominator)


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        (0, 10, (0.0, 0.277533)),
        (10, 10, (0.722467, 1.0)),
        (5, 10, (0.236593, 0.763407)),
        (1, 20, (0.008881, 0.236131)),
        (42, 50, (0.714850, 0.916634)),
    ],
)
def test_wilson_matches_known_values(k: int, n: int, expected: tuple[float, float]) -> None:
    low, high = wilson(k, n)
    assert low == pytest.approx(expected[0], abs=1e-4)
    assert high == pytest.approx(expected[1], abs=1e-4)
    by_hand = _wilson_by_hand(k, n)
    assert low == pytest.approx(max(0.0, by_hand[0]), abs=1e-12)
    assert high == pytest.approx(min(1.0, by_hand[1]), abs=1e-12)


def test_wilson_edges() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(0, 10)[0] == 0.0  # exactly, not a rounding error above it
    assert wilson(10, 10)[1] == 1.0
    narrow, wide = wilson(5, 10, confidence=0.5), wilson(5, 10, confidence=0.99)
    assert wide[0] < narrow[0] < 0.5 < narrow[1] < wide[1]
    for bad in [(-1, 10), (11, 10), (1, -1)]:
        with pytest.raises(ValueError, match="successes"):
            wilson(*bad)
    with pytest.raises(ValueError, match="confidence"):
        wilson(1, 2, confidence=1.0)


def test_bootstrap_is_deterministic_and_contains_the_mean() -> None:
    values = [0.1, 3.0, 2.5, 7.25, 0.0, 4.4, 9.1, 1.0]
    first = bootstrap_mean(values, seed=7)
    assert first == bootstrap_mean(values, seed=7)
    assert first != bootstrap_mean(values, seed=8)
    mean = sum(values) / len(values)
    assert first[0] < mean < first[1]
    assert min(values) <= first[0] and first[1] <= max(values)
    wider = bootstrap_mean(values, confidence=0.99, seed=7)
    assert wider[0] <= first[0] and first[1] <= wider[1]


def test_bootstrap_degenerate_samples() -> None:
    assert bootstrap_mean([0.1] * 5) == (0.1, 0.1)  # rounding in the resamples must not exclude the mean
    assert bootstrap_mean([3.0]) == (3.0, 3.0)
    with pytest.raises(ValueError, match="at least one value"):
        bootstrap_mean([])
    with pytest.raises(ValueError, match="finite"):
        bootstrap_mean([1.0, math.nan])
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_mean([1.0], resamples=0)


def test_bootstrap_handles_long_samples_in_chunks() -> None:
    values = [float(i % 2) for i in range(20_001)]
    low, high = bootstrap_mean(values, resamples=300)
    assert low < sum(values) / len(values) < high
    assert high - low < 0.03


def test_stratified_bootstrap_resamples_within_groups() -> None:
    groups = [[1.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]
    low, high = stratified_bootstrap_mean_of_means(groups, seed=3)
    assert (low, high) == stratified_bootstrap_mean_of_means(groups, seed=3)
    point = (0.75 + 0.125) / 2
    assert low < point < high
    # A group that never varies adds no width: the interval is the other group's, halved and shifted.
    constant = stratified_bootstrap_mean_of_means([[0.5] * 6, [1.0, 0.0, 1.0, 0.0]], seed=1)
    alone = bootstrap_mean([1.0, 0.0, 1.0, 0.0], seed=1)
    assert constant == pytest.approx(((0.5 + alone[0]) / 2, (0.5 + alone[1]) / 2))
    with pytest.raises(ValueError, match="at least one group"):
        stratified_bootstrap_mean_of_means([])
    with pytest.raises(ValueError, match="group 1"):
        stratified_bootstrap_mean_of_means([[1.0], []])


# --- aggregation -----------------------------------------------------------------------------------------


def _row(
    task: str, success: float | None = None, error: str | None = None, steps: int = 10, **metrics: float
) -> dict[str, Any]:
    values = dict(metrics)
    if success is not None:
        values["success"] = success
    return {"task": task, "metrics": values, "steps": steps, "robot_seconds": steps * 0.05, "error": error}


def _unbalanced_rows() -> list[dict[str, Any]]:
    # "easy" ran 20 episodes and always succeeded; "hard" ran 4 and succeeded once.
    return [_row("easy", 1.0) for _ in range(20)] + [_row("hard", float(i == 0)) for i in range(4)]


def test_mean_of_task_means_differs_from_pooled_on_unbalanced_tasks() -> None:
    summary = summarize(_unbalanced_rows(), {"easy": "always works", "hard": "rarely works"})
    overall = summary.overall
    assert overall["success"].value == pytest.approx((1.0 + 0.25) / 2)
    assert overall["success"].method == "mean of task means"
    assert overall["success"].interval == "stratified clopper-pearson 95%"
    assert overall["success"].n == 24
    assert overall["success_pooled"].value == pytest.approx(21 / 24)
    assert overall["success_pooled"].method == "pooled"
    assert overall["success_pooled"].interval == "clopper-pearson 95%"
    pooled = (overall["success_pooled"].low, overall["success_pooled"].high)
    assert pooled == pytest.approx(clopper_pearson(21, 24))
    hard = summary.tasks["hard"].metrics["success"]
    assert (hard.value, hard.n, hard.interval, hard.method) == (0.25, 4, "clopper-pearson 95%", None)
    assert (hard.low, hard.high) == pytest.approx(clopper_pearson(1, 4))
    # Named, another rate interval is used and named everywhere a rate is.
    named = summarize(_unbalanced_rows(), {}, interval="wilson")
    assert named.overall["success"].interval == "stratified wilson 95%"
    assert (named.tasks["hard"].metrics["success"].low, named.tasks["hard"].metrics["success"].high) == (
        pytest.approx(wilson(1, 4))
    )
    with pytest.raises(
        ValueError, match="interval: 'agresti' is not one of wilson, clopper-pearson, jeffreys"
    ):
        summarize(_unbalanced_rows(), {}, interval="agresti")


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (46, 50), (49, 50), (1, 4), (199, 200)])
def test_clopper_pearson_and_jeffreys_are_the_beta_quantiles(k: int, n: int) -> None:
    beta = pytest.importorskip(
        "scipy.stats"
    ).beta  # SciPy comes with the simulators; the platform has its own
    tail = 0.025
    exact = (beta.ppf(tail, k, n - k + 1) if k else 0.0, beta.ppf(1 - tail, k + 1, n - k) if k < n else 1.0)
    assert clopper_pearson(k, n) == pytest.approx(exact, abs=1e-10)
    a, b = k + 0.5, n - k + 0.5
    bayes = (beta.ppf(tail, a, b) if k else 0.0, beta.ppf(1 - tail, a, b) if k < n else 1.0)
    assert jeffreys(k, n) == pytest.approx(bayes, abs=1e-10)
    # Jeffreys' is the exact one's Bayesian neighbour: inside it.
    low, high = clopper_pearson(k, n)
    assert low <= jeffreys(k, n)[0] + 1e-12 and jeffreys(k, n)[1] <= high + 1e-12


def test_errored_episodes_are_counted_not_scored() -> None:
    rows = [_row("a", 1.0), _row("a", 0.0), _row("a", error="policy crashed", steps=3), _row("b", error="x")]
    summary = summarize(rows, {"a": "A", "b": "B"})
    a, b = summary.tasks["a"], summary.tasks["b"]
    assert (a.episodes, a.errors, a.metrics["success"].value, a.mean_steps) == (2, 1, 0.5, 10.0)
    assert a.mean_robot_seconds == pytest.approx(0.5)
    assert (b.episodes, b.errors, b.metrics, b.mean_steps, b.mean_robot_seconds) == (0, 1, {}, None, None)
    assert summary.overall["success"].value == 0.5  # b has no success: the mean runs over tasks that have it
    assert summary.overall["success"].n == 2


def test_task_order_follows_the_descriptions() -> None:
    rows = [_row("c", 1.0), _row("stray", 1.0), _row("a", 0.0), _row("b", 1.0)]
    summary = summarize(rows, {"b": "", "a": "", "c": ""})
    assert list(summary.tasks) == ["b", "a", "c", "stray"]
    assert summary.tasks["stray"].description == ""


def test_continuous_metrics_use_the_bootstrap() -> None:
    rows = [_row("a", 1.0, episode_return=r) for r in (10.0, 12.0, 11.0, 15.0)]
    rows += [_row("b", 0.0, episode_return=r, grip=1.0) for r in (1.0, 2.0)]
    summary = summarize(rows, {"a": "", "b": ""})
    a_return = summary.tasks["a"].metrics["episode_return"]
    assert a_return.interval == "bootstrap 95%"
    assert (a_return.low, a_return.high) == bootstrap_mean([10.0, 12.0, 11.0, 15.0])
    assert "grip" not in summary.tasks["a"].metrics  # a metric a task never reported is absent from it
    assert list(summary.tasks["b"].metrics) == ["success", "episode_return", "grip"]
    overall = summary.overall
    assert list(overall) == ["success", "success_pooled", "episode_return", "grip"]
    assert overall["episode_return"].value == pytest.approx((12.0 + 1.5) / 2)
    assert overall["episode_return"].interval == "stratified bootstrap 95%"
    assert overall["grip"].value == 1.0 and overall["grip"].n == 2


def test_a_fractional_success_is_continuous() -> None:
    summary = summarize([_row("a", 0.5), _row("a", 1.0), _row("b", 0.0)], {"a": "", "b": ""})
    assert summary.tasks["a"].metrics["success"].interval == "bootstrap 95%"
    assert summary.tasks["b"].metrics["success"].interval == "bootstrap 95%"  # binary here, not everywhere
    assert summary.overall["success_pooled"].interval == "bootstrap 95%"
    assert summary.overall["success_pooled"].value == pytest.approx(0.5)


def test_non_finite_metric_values_are_left_out() -> None:
    summary = summarize([_row("a", 1.0, dist=math.nan), _row("a", 1.0, dist=2.0)], {"a": ""})
    assert summary.tasks["a"].metrics["dist"].n == 1
    json.dumps(summary.to_dict(), allow_nan=False)


def test_success_falls_back_to_the_row_flag() -> None:
    row = {"task": "a", "success": True, "metrics": {}, "steps": 5, "robot_seconds": 1.0, "error": None}
    assert summarize([row], {"a": ""}).tasks["a"].metrics["success"].value == 1.0


def test_a_metric_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="task 'a': metric 'dist' must be a number"):
        summarize([_row("a", 1.0, dist="far")], {"a": ""})  # type: ignore[arg-type]


def test_summary_to_dict_has_the_documented_shape() -> None:
    rows = [*_unbalanced_rows(), _row("hard", error="timeout")]
    data = summarize(rows, {"easy": "always works", "hard": "rarely works", "idle": "never ran"}).to_dict()
    json.dumps(data, allow_nan=False)
    assert set(data) == {"overall", "tasks"}
    assert set(data["overall"]["success"]) == {"value", "low", "high", "n", "method", "interval"}
    hard = data["tasks"]["hard"]
    assert set(hard) == {"description", "episodes", "errors", "metrics", "mean_steps", "mean_robot_seconds"}
    assert (hard["description"], hard["episodes"], hard["errors"]) == ("rarely works", 4, 1)
    assert set(hard["metrics"]["success"]) == {"value", "low", "high", "n", "interval"}
    assert data["tasks"]["idle"] == {
        "description": "never ran",
        "episodes": 0,
        "errors": 0,
        "metrics": {},
        "mean_steps": None,
        "mean_robot_seconds": None,
    }


def test_summarize_with_nothing_finished() -> None:
    summary = summarize([_row("a", error="boom")], {"a": ""})
    assert summary.overall == {}
    assert summary.tasks["a"].errors == 1


# --- gates -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("success>=0.9", Gate("success", ">=", 0.9)),
        ("success.low>=0.8", Gate("success", ">=", 0.8, bound="low")),
        ("success.high<0.5", Gate("success", "<", 0.5, bound="high")),
        ("success[reach-v3]>0.5", Gate("success", ">", 0.5, task="reach-v3")),
        ("success.low[pick place]<=1e-1", Gate("success", "<=", 0.1, bound="low", task="pick place")),
        ("return>=10", Gate("return", ">=", 10.0)),
        ("  episode_return == -2.5 ", Gate("episode_return", "==", -2.5)),
        ("success[a>b]>0.5", Gate("success", ">", 0.5, task="a>b")),  # an operator inside [] is the task's
    ],
)
def test_parse_valid_gates(text: str, expected: Gate) -> None:
    assert parse_gate(text) == expected


def test_gate_text_round_trips() -> None:
    for text in ["success>=0.9", "success.low[reach-v3]>0.5", "return<=10"]:
        assert str(parse_gate(text)) == text


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "is empty"),
        ("success", "has no comparison operator"),
        ("success=0.9", "'=' is not an operator"),
        ("success!=0.9", "'!=' is not an operator"),
        ("success=>0.9", "'=>' is not an operator"),
        (">=0.9", "has no metric before the operator"),
        ("9lives>=1", "'9lives' does not start with a metric name"),
        ("success.lo>=0.9", "'.lo' is not a bound: use .low or .high"),
        ("success.>=0.9", "'.' is not a bound"),
        ("succ ess>=0.9", "'ess' after 'succ' is neither"),
        ("success[a]b>=0.9", "'[a]b' after 'success' is neither"),
        ("success[reach>=0.9", "has a [ without its ]"),
        ("success[]>=0.9", "names an empty task"),
        ("success>=", "has no number after the operator"),
        ("success>=high", "'high' is not a number"),
        ("success>=0.9.1", "'0.9.1' is not a number"),
        ("success>=nan", "'nan' is not a finite number"),
        ("success>=>0.9", "'>0.9' is not a number"),
    ],
)
def test_malformed_gates_are_refused_with_the_wrong_part_and_the_grammar(text: str, complaint: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_gate(text)
    message = str(caught.value)
    assert complaint in message
    assert "METRIC[.low|.high][[TASK]] OP NUMBER" in message


@pytest.fixture()
def summary() -> Summary:
    rows = [_row("reach-v3", 1.0, ret=5.0) for _ in range(14)] + [_row("reach-v3", 0.0, ret=1.0)]
    rows += [_row("push-v3", float(i < 3)) for i in range(10)]
    return summarize(rows, {"reach-v3": "reach", "push-v3": "push"})


def test_gates_check_overall_task_and_bounds(summary: Summary) -> None:
    overall = summary.overall["success"]
    assert parse_gate("success>=0.6").check(summary) == (True, f"success = {overall.value:.4g} >= 0.6: met")
    met, why = parse_gate("success>=0.9").check(summary)
    assert not met and why.endswith(">= 0.9: not met")
    assert parse_gate("success[reach-v3]>0.9").check(summary) == (
        True,
        "success[reach-v3] = 0.9333 > 0.9: met",
    )
    assert parse_gate("success[push-v3]>0.5").check(summary) == (
        False,
        "success[push-v3] = 0.3 > 0.5: not met",
    )
    low = summary.tasks["reach-v3"].metrics["success"].low
    met, why = parse_gate("success.low[reach-v3]>=0.8").check(summary)
    assert met == (low >= 0.8) and why.startswith(f"success.low[reach-v3] = {low:.4g} >= 0.8")
    assert parse_gate("success_pooled==0.68").check(summary)[0]
    assert parse_gate("ret<=4").check(summary)[0] is False


def test_gates_accept_the_dict_form(summary: Summary) -> None:
    data = json.loads(json.dumps(summary.to_dict()))
    assert parse_gate("success[reach-v3]>0.9").check(data) == parse_gate("success[reach-v3]>0.9").check(
        summary
    )


def test_gates_on_unknown_names_are_not_met(summary: Summary) -> None:
    met, why = parse_gate("return>=10").check(summary)
    assert not met and "no metric 'return' in the overall scores" in why and "success_pooled" in why
    met, why = parse_gate("success[fly-v3]>=0.5").check(summary)
    assert not met and "no task 'fly-v3'" in why
    met, why = parse_gate("ret[push-v3]>=0").check(summary)
    assert not met and "no metric 'ret' in task 'push-v3'" in why
    met, why = parse_gate("success>=0.5").check(summarize([_row("a", error="boom")], {"a": ""}))
    assert not met and "no finished episodes" in why


def test_gate_explanations_do_not_round_a_miss_into_a_tie() -> None:
    data = {"overall": {"success": {"value": 0.89999999, "low": 0.8, "high": 0.95, "n": 10}}, "tasks": {}}
    met, why = parse_gate("success>=0.9").check(data)
    assert not met and "0.89999999 >= 0.9" in why


def test_stratified_wilson_does_not_collapse_when_every_task_is_all_or_nothing() -> None:
    from yardstick.scoring import stratified_wilson

    perfect = [[1.0] * 10 for _ in range(10)]
    low, high = stratified_wilson(perfect)
    assert high == 1.0 and low == pytest.approx(wilson(100, 100)[0]) and low < 0.97
    assert stratified_wilson([[1.0, 0.0, 1.0, 1.0]]) == pytest.approx(wilson(3, 4))  # one task: plain Wilson
    mixed = [[1.0] * 9 + [0.0], [0.0] * 8 + [1.0] * 2]
    low, high = stratified_wilson(mixed)
    assert low < (0.9 + 0.2) / 2 < high
    # Wider than the pooled interval of the same episodes would be with twice as many.
    assert high - low > wilson(22, 40)[1] - wilson(22, 40)[0]
