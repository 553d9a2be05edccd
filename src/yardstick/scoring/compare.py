"""Two policies on the same tasks and seeds, paired episode by episode.

Pairing is what makes a small run informative: each pair shares its task and its seed, so the variation
between seeds falls out of the difference. Here: the difference in success (per task, the mean of paired
differences with a bootstrap interval; overall, the mean of task means with a stratified bootstrap
interval); McNemar's exact test on the discordant pairs (one succeeded, the other did not), the only pairs
that say which is better; and its sequential form (`PairedTest`): if the two succeed alike at every seed,
each discordant pair is a fair coin, and a bettor against that coin (the mixture of `scoring.sequential`)
passes 1/α with probability at most α at any look. What a fixed-n test of the same power would need is
computed beside it (`fixed_n_for_power`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from yardstick.scoring.intervals import bootstrap_mean, stratified_bootstrap_mean_of_means
from yardstick.scoring.sequential import ALPHA, log_wealth

# The mixing prior on a discordant pair's chance of going A's way: leaning to ½, where differences worth
# finding sit (a 10-20 point gap in success moves it to 0.3-0.4). bench/sequential.py chose it among
# Beta(1..32): Beta(4, 4) used the fewest pairs at both (0.5, 0.7) and (0.8, 0.9).
PAIRED_PRIOR: Final = (4.0, 4.0)


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


def exact_paired_p(a_only: int, b_only: int) -> float:
    """McNemar's exact test: the two-sided p-value of `a_only` pairs won by A alone against `b_only` by B
    alone, if each such pair were a fair coin (a binomial test on the discordant pairs; 1 with none). Exact:
    the tail is counted in integers and divided once (Python divides big integers to the nearest float, so
    thousands of pairs neither overflow nor lose the last digit)."""
    discordant = a_only + b_only
    if discordant == 0:
        return 1.0
    tail = sum(math.comb(discordant, k) for k in range(min(a_only, b_only) + 1))
    return min(1.0, float(2 * tail / 2**discordant))


Winner = Literal["a", "b"]


@dataclass
class PairedTest:
    """A sequential test of "A and B succeed alike" from paired outcomes, on the discordant pairs."""

    alpha: float = ALPHA
    prior: tuple[float, float] = PAIRED_PRIOR
    pairs: int = 0
    a_only: int = 0  # pairs A succeeded and B did not
    b_only: int = 0
    decided_at: int | None = None
    winner: Winner | None = None

    def add(self, a: bool, b: bool) -> None:
        self.pairs += 1
        self.a_only += int(a and not b)
        self.b_only += int(b and not a)
        if self.winner is None and self.log_evidence >= math.log(1.0 / self.alpha):
            self.decided_at = self.pairs
            self.winner = "a" if self.a_only > self.b_only else "b"

    @property
    def log_evidence(self) -> float:
        """log of the bettor's wealth against "each discordant pair is a fair coin"."""
        return log_wealth(self.a_only, self.a_only + self.b_only, 0.5, self.prior)

    @property
    def decided(self) -> bool:
        return self.winner is not None


def sequential_power(
    a_only: float,
    b_only: float,
    looks: Sequence[int],
    alpha: float = ALPHA,
    prior: tuple[float, float] = PAIRED_PRIOR,
    sequences: int = 4000,
    seed: int = 0,
) -> tuple[float, float]:
    """(power, mean pairs used) of `PairedTest` looking after each count in `looks` (the last its cap), when
    a pair goes A's way alone with chance `a_only` and B's with `b_only`: simulated, `sequences` times."""
    import numpy as np  # only here: the rest of scoring is plain Python

    rng = np.random.default_rng(seed)
    cap = looks[-1]
    draws = rng.random((sequences, cap))
    wins = np.cumsum(draws < a_only, axis=1)
    losses = np.cumsum((draws >= a_only) & (draws < a_only + b_only), axis=1)
    a, b = prior
    limit = math.log(1.0 / alpha)
    decided = np.zeros(sequences, dtype=bool)
    used = np.full(sequences, cap)
    for look in looks:
        won, lost = wins[:, look - 1].tolist(), losses[:, look - 1].tolist()
        evidence = np.array([log_wealth(x, x + y, 0.5, (a, b)) for x, y in zip(won, lost, strict=True)])
        fresh = ~decided & (evidence >= limit)
        used[fresh] = look
        decided |= fresh
    return float(decided.mean()), float(used.mean())


def fixed_n_power(n: int, a_only: float, b_only: float, alpha: float = ALPHA) -> float:
    """The power of the exact two-sided paired test (McNemar's, as a binomial test on the discordant pairs)
    with n pairs, when a pair goes A's way alone with chance `a_only` and B's with `b_only`."""
    discordant = a_only + b_only
    if discordant <= 0.0 or n <= 0:
        return 0.0
    theta = a_only / discordant
    power = 0.0
    for d in range(1, n + 1):
        weight = _binomial_pmf(d, n, discordant)
        if weight < 1e-14:
            continue
        cut = _critical(d, alpha)
        if cut < 0:
            continue
        # P(W ≤ cut) + P(W ≥ d − cut), the second as P(d − W ≤ cut) with d − W ~ Bin(d, 1 − θ)
        power += weight * (_binomial_cdf(cut, d, theta) + _binomial_cdf(cut, d, 1.0 - theta))
    return power


def fixed_n_for_power(
    power: float, a_only: float, b_only: float, alpha: float = ALPHA, most: int = 5000
) -> int | None:
    """The fewest pairs a fixed-n exact paired test needs for `power`, or None past `most`."""
    if power <= 0.0:
        return 0
    low, high = 1, most
    if fixed_n_power(high, a_only, b_only, alpha) < power:
        return None
    while low < high:  # the power grows with n, up to the wobble of a discrete test; bisection is close
        middle = (low + high) // 2
        if fixed_n_power(middle, a_only, b_only, alpha) >= power:
            high = middle
        else:
            low = middle + 1
    return low


@functools.lru_cache(maxsize=4096)
def _critical(d: int, alpha: float) -> int:
    """The largest c < d/2 whose split c : d − c the exact paired test (`exact_paired_p`) rejects at α, or
    −1 if none: its lower tail summed once, c by c, where asking `exact_paired_p` for each c would sum it
    again every time."""
    cut, tail = -1, 0.0
    for c in range((d + 1) // 2):
        tail += _binomial_pmf(c, d, 0.5)
        if 2.0 * tail > alpha:
            break
        cut = c
    return cut


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _binomial_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 1.0 if k == 0 else 0.0
    if p >= 1.0:
        return 1.0 if k == n else 0.0
    return math.exp(_log_choose(n, k) + k * math.log(p) + (n - k) * math.log1p(-p))


def _binomial_cdf(k: int, n: int, p: float) -> float:
    if k < 0:
        return 0.0
    return min(1.0, math.fsum(_binomial_pmf(i, n, p) for i in range(min(k, n) + 1)))
