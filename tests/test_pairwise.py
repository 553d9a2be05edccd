"""The pairwise ranking's arithmetic: Bradley–Terry fitted to head-to-head trials, its intervals, the
head-to-head table and the pairs it asks to play next (the board and its page: test_pages.py)."""

from __future__ import annotations

import math
import random

import pytest

from yardstick.scoring.pairwise import Game, fit, games_of, head_to_head, rank


def trials(rates: dict[str, float], count: int, seed: int = 0) -> dict[int, dict[str, bool]]:
    draws = random.Random(seed)
    return {t: {p: draws.random() < rate for p, rate in rates.items()} for t in range(count)}


def test_the_fit_solves_the_likelihood_equations() -> None:
    """At the maximum, each player's expected wins (its drawn game against the reference included) equal the
    wins it had, a tie counted half."""
    games = games_of(trials({"a": 0.9, "b": 0.6, "c": 0.3, "d": 0.6}, 80))
    players = ["a", "b", "c", "d"]
    strength = fit(games, players)
    for player in players:
        won = 0.5 + sum(g.score if g.a == player else 1 - g.score for g in games if player in (g.a, g.b))
        expected = 1 / (1 + math.exp(-strength[player]))
        for g in games:
            if player in (g.a, g.b):
                other = g.b if g.a == player else g.a
                expected += 1 / (1 + math.exp(strength[other] - strength[player]))
        assert expected == pytest.approx(won, abs=1e-5)


def test_policies_are_ranked_in_the_order_of_their_success_with_intervals_that_hold_it() -> None:
    ranking = rank(games_of(trials({"best": 0.95, "good": 0.7, "fair": 0.4, "poor": 0.1}, 150)))
    assert [s.player for s in ranking.standings] == ["best", "good", "fair", "poor"]
    for standing in ranking.standings:
        assert standing.low <= standing.chance <= standing.high
        assert standing.rank_low <= standing.rank <= standing.rank_high
        assert standing.games == 3 * 150
    assert ranking.games == 6 * 150
    # Well apart: every rank settled, nothing to play next.
    assert all(s.rank_low == s.rank_high == s.rank for s in ranking.standings)
    assert ranking.next_pairs == []


def test_two_alike_share_an_uncertain_rank_and_are_the_pair_to_play_next() -> None:
    ranking = rank(games_of(trials({"x": 0.6, "y": 0.6, "z": 0.05}, 40, seed=3)))
    by_name = {s.player: s for s in ranking.standings}
    assert by_name["z"].rank == 3
    assert {by_name["x"].rank_low, by_name["x"].rank_high} == {1, 2}
    assert ranking.next_pairs[0] == ("x", "y")


def test_a_policy_that_won_every_game_has_a_finite_score() -> None:
    games = [Game("a", "b", 1.0, t) for t in range(10)]
    strength = fit(games, ["a", "b"])
    assert math.isfinite(strength["a"]) and strength["a"] > 0 > strength["b"]


def test_the_head_to_head_table_counts_each_pair_from_the_first_named() -> None:
    games = [Game("b", "a", 1.0, 0), Game("a", "b", 1.0, 1), Game("a", "b", 0.5, 2), Game("b", "a", 0.0, 3)]
    assert [(h.a, h.b, h.wins, h.ties, h.losses) for h in head_to_head(games)] == [("a", "b", 2, 1, 1)]


def test_swapping_sides_changes_nothing() -> None:
    games = games_of(trials({"a": 0.8, "b": 0.5}, 30))
    swapped = [Game(g.b, g.a, 1 - g.score, g.trial) for g in games]
    assert fit(games, ["a", "b"]) == pytest.approx(fit(swapped, ["a", "b"]))


def test_two_policies_that_tie_on_every_trial_share_their_ranks_whatever_their_names() -> None:
    """As the pages' blind sample: two policies succeed everywhere, a third on half the trials. The two are
    one strength in every resample, so each may be first or second: neither is called first by the last
    bits of the fit's arithmetic."""
    for first, second in (("rows", "slow"), ("slow", "rows"), ("a" * 30, "b")):
        outcomes = {t: {first: True, second: True, "sampler": t % 2 == 0} for t in range(40)}
        ranking = rank(games_of(outcomes))
        places = {s.player: (s.rank_low, s.rank_high) for s in ranking.standings}
        assert places == {first: (1, 2), second: (1, 2), "sampler": (3, 3)}, places
