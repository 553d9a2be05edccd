"""A ranking from head-to-head episodes: two policies played the same task at the same seed in one run, and
one succeeded where the other did not (a win), or both did or neither (a tie).

The model is Bradley–Terry (P(i beats j) = π_i / (π_i + π_j)), fitted by Newton's method on log π, our own
(a few lines; `choix` would add a dependency for the same fit). Ties count half a win to each side, as
in chess ratings: a tie says the two are alike here, which pulls their strengths together. Each policy also
plays one virtual game, drawn, against a reference of strength 1: without it a policy that won every game
would have an infinite strength (no maximum-likelihood estimate exists), and with it the strengths shrink a
little toward the reference, more for the policies that played less.

Intervals are percentile intervals of a bootstrap that resamples the *trials* (a task at a seed in a run,
with every game played on it), since the games of one trial share its difficulty. What would narrow the
ranking most is said as RoboArena's scheduler says it: the pairs whose intervals overlap most, fewest games
played first.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

BOOTSTRAPS = 200
_ITERATIONS = 100
_TOLERANCE = 1e-7
# Strengths closer than this are one strength: far below what any number of games can tell apart, above the
# fit's own tolerance, so a tie is not split by where Newton's method stopped.
_SAME_STRENGTH = 1e-6


@dataclass(frozen=True)
class Game:
    """One trial's head-to-head between `a` and `b`: `score` 1 a won, 0 b won, ½ a tie. `trial` groups the
    games played on one trial (for the bootstrap)."""

    a: str
    b: str
    score: float
    trial: Hashable


@dataclass(frozen=True)
class Standing:
    player: str
    rank: int
    strength: float  # log π, the reference at 0
    chance: float  # the chance it beats the reference: π / (π + 1)
    low: float  # the chance's bootstrap interval
    high: float
    rank_low: int  # the rank's bootstrap interval (best, worst)
    rank_high: int
    games: int


@dataclass(frozen=True)
class HeadToHead:
    a: str
    b: str
    wins: int  # a's
    ties: int
    losses: int


@dataclass(frozen=True)
class Ranking:
    standings: list[Standing]
    head_to_head: list[HeadToHead]
    next_pairs: list[tuple[str, str]] = field(default_factory=list)
    games: int = 0
    method: str = (
        "Bradley–Terry (maximum likelihood; ties half a win; one drawn game against a reference of "
        "strength 1), "
        f"{BOOTSTRAPS} bootstrap resamples of trials"
    )


def fit(games: Sequence[Game], players: Sequence[str]) -> dict[str, float]:
    """log π for each player."""
    index = {p: i for i, p in enumerate(players)}
    strength = _fit(_wins(games, index, len(players)))
    return {p: float(strength[index[p]]) for p in players}


def _wins(games: Iterable[Game], index: Mapping[str, int], n: int) -> npt.NDArray[np.float64]:
    """wins[i, j]: the games i won against j, a tie half to each."""
    wins = np.zeros((n, n))
    for game in games:
        i, j = index[game.a], index[game.b]
        wins[i, j] += game.score
        wins[j, i] += 1.0 - game.score
    return wins


def _fit(wins: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """log π from a wins matrix: Newton's method on the log-likelihood, which the drawn game against the
    reference makes strictly concave (so a few steps converge, where MM iterations crawl)."""
    met = wins + wins.T
    won = wins.sum(axis=1) + 0.5
    theta = np.zeros(len(wins))
    for _ in range(_ITERATIONS):
        beats = 1.0 / (1.0 + np.exp(theta[None, :] - theta[:, None]))  # P(i beats j)
        reference = 1.0 / (1.0 + np.exp(-theta))
        gradient = won - (met * beats).sum(axis=1) - reference
        spread = met * beats * (1.0 - beats)
        hessian = spread - np.diag(spread.sum(axis=1) + reference * (1.0 - reference))
        step = np.linalg.solve(hessian, gradient)
        theta = theta - step
        if float(np.max(np.abs(step))) < _TOLERANCE:
            break
    return theta


def rank(games: Sequence[Game], *, bootstraps: int = BOOTSTRAPS, seed: int = 0) -> Ranking:
    """Every player that met another, ranked with intervals; the head-to-head table; what to play next."""
    players = sorted({g.a for g in games} | {g.b for g in games})
    if not players:
        return Ranking([], [])
    index = {p: i for i, p in enumerate(players)}
    point = _fit(_wins(games, index, len(players)))
    by_trial: dict[Hashable, list[Game]] = {}
    for game in games:
        by_trial.setdefault(game.trial, []).append(game)
    per_trial = np.stack([_wins(trial, index, len(players)) for trial in by_trial.values()])
    draws = np.random.default_rng(seed)
    chances = np.empty((bootstraps, len(players)))
    best = np.empty((bootstraps, len(players)))
    worst = np.empty((bootstraps, len(players)))
    for b in range(bootstraps):
        counts = np.bincount(draws.integers(0, len(per_trial), len(per_trial)), minlength=len(per_trial))
        fitted = _fit(np.tensordot(counts.astype(np.float64), per_trial, axes=1))
        chances[b] = _chance(fitted)
        best[b], worst[b] = _places(fitted)
    played = {p: 0 for p in players}
    for game in games:
        played[game.a] += 1
        played[game.b] += 1
    standings = []
    for place, i in enumerate(np.argsort(-point), start=1):
        chance = float(_chance(point[i]))
        has = bootstraps > 0
        standings.append(
            Standing(
                player=players[i],
                rank=place,
                strength=float(point[i]),
                chance=chance,
                low=float(np.quantile(chances[:, i], 0.025)) if has else chance,
                high=float(np.quantile(chances[:, i], 0.975)) if has else chance,
                rank_low=int(np.floor(np.quantile(best[:, i], 0.025))) if has else place,
                rank_high=int(np.ceil(np.quantile(worst[:, i], 0.975))) if has else place,
                games=played[players[i]],
            )
        )
    table = head_to_head(games)
    return Ranking(standings, table, next_pairs(standings, table), len(games))


def _places(strengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each player's best and worst place in one fit: players of the same strength share their places (a
    sort would order a tie by the last bits of the fit's arithmetic, and call one of them first each time)."""
    above = strengths[None, :] > strengths[:, None] + _SAME_STRENGTH
    level = np.abs(strengths[None, :] - strengths[:, None]) <= _SAME_STRENGTH
    return 1 + above.sum(axis=1), above.sum(axis=1) + level.sum(axis=1)


def head_to_head(games: Iterable[Game]) -> list[HeadToHead]:
    """Each pair that met, the alphabetically first as `a`."""
    tally: dict[tuple[str, str], list[int]] = {}
    for game in games:
        a, b, score = (game.a, game.b, game.score) if game.a < game.b else (game.b, game.a, 1.0 - game.score)
        counts = tally.setdefault((a, b), [0, 0, 0])
        counts[0 if score == 1.0 else 2 if score == 0.0 else 1] += 1
    return [HeadToHead(a, b, *counts) for (a, b), counts in sorted(tally.items())]


def next_pairs(
    standings: Sequence[Standing], table: Sequence[HeadToHead], most: int = 3
) -> list[tuple[str, str]]:
    """The pairs to play next: those whose intervals overlap (their order is not settled), the most overlap
    per game already played between them first."""
    games = {(h.a, h.b): h.wins + h.ties + h.losses for h in table}
    scored = []
    for i, first in enumerate(standings):
        for second in standings[i + 1 :]:
            overlap = min(first.high, second.high) - max(first.low, second.low)
            if overlap <= 0:
                continue
            pair = tuple(sorted((first.player, second.player)))
            scored.append((overlap / math.sqrt(1 + games.get((pair[0], pair[1]), 0)), pair[0], pair[1]))
    scored.sort(reverse=True)
    return [(a, b) for _, a, b in scored[:most]]


def games_of(outcomes: Mapping[Hashable, Mapping[str, bool]]) -> list[Game]:
    """The games of trials: for each trial, every pair of the players that played it."""
    games = []
    for trial, by_player in outcomes.items():
        names = sorted(by_player)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                won_a, won_b = by_player[a], by_player[b]
                games.append(Game(a, b, 0.5 if won_a == won_b else 1.0 if won_a else 0.0, trial))
    return games


def _chance(log_strength: Any) -> Any:
    """The chance of beating the reference: π / (π + 1)."""
    return 1.0 / (1.0 + np.exp(-log_strength))
