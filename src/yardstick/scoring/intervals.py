"""Confidence intervals for a success rate and for means: plain numbers in, (low, high) out."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

# Resampled values held at once by a bootstrap: bounds memory for long runs (10k episodes x 2000 resamples
# would otherwise be 160 MB of indices) without slowing the common small case.
_CHUNK_ELEMENTS = 2_000_000


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, not {confidence!r}")


def _z(confidence: float) -> float:
    """The two-sided standard normal quantile: 1.959964 for 0.95."""
    _check_confidence(confidence)
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a success rate. Unlike the normal approximation it stays inside [0, 1]
    and does not collapse to a point at 0/n or n/n, which is where robot policies often sit."""
    return wilson_of_counts(successes, n, confidence)


def wilson_of_counts(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's interval of possibly fractional counts (an effective sample size)."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"successes must lie in 0..n, not {successes} of {n}")
    if n == 0:
        _check_confidence(confidence)
        return (0.0, 1.0)
    return _wilson_of(successes / n, n, confidence)


def stratified_rate(
    groups: Sequence[Sequence[float]],
    interval: Callable[[float, float, float], tuple[float, float]],
    confidence: float = 0.95,
) -> tuple[float, float]:
    """`interval` (f(successes, n, confidence)) for the mean of per-group success rates, each group one
    task weighing the same, taken at the estimate's effective sample size as `stratified_wilson` is."""
    rates = [(math.fsum(g) / len(g), len(g)) for g in groups if len(g)]
    if not rates:
        raise ValueError("a stratified interval needs at least one group with values")
    total = sum(n for _, n in rates)
    p = math.fsum(rate for rate, _ in rates) / len(rates)
    variance = math.fsum(rate * (1 - rate) / n for rate, n in rates) / len(rates) ** 2
    effective = min(max(p * (1 - p) / variance if variance > 0 else float(total), 1.0), float(total))
    return interval(p * effective, effective, confidence)


def stratified_wilson(groups: Sequence[Sequence[float]], confidence: float = 0.95) -> tuple[float, float]:
    """A Wilson interval for the mean of per-group success rates (each group one task, weighing the same).

    The Wilson interval is taken at the estimate's effective sample size, p(1-p) / Var, where Var is the
    variance of the mean of group rates (Kish). A bootstrap of 0/1 outcomes collapses to a point when every
    task is all success or all failure; this does not, so 10 tasks at 10/10 read 100% with a lower bound
    below it, as a researcher expects. With no variance to measure, every episode counts once."""
    return stratified_rate(groups, wilson_of_counts, confidence)


def _wilson_of(p: float, n: float, confidence: float) -> tuple[float, float]:
    z = _z(confidence)
    z2n = z * z / n
    centre = (p + z2n / 2.0) / (1.0 + z2n)
    half = z * math.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n)) / (1.0 + z2n)
    # At a rate of 0 or 1 the bound is exactly 0 or 1 in theory; do not let rounding print 2.8e-17.
    low = 0.0 if p == 0 else max(0.0, centre - half)
    high = 1.0 if p == 1 else min(1.0, centre + half)
    return (low, high)


def _as_values(values: Sequence[float], what: str) -> npt.NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{what} needs at least one value")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} needs finite values (got NaN or infinity)")
    return array


def _fmean(array: npt.NDArray[np.float64]) -> float:
    # fsum, as the aggregation computes its point estimates, so the two agree to the last bit.
    return math.fsum(array.tolist()) / array.size


def _resampled_means(
    rng: np.random.Generator, values: npt.NDArray[np.float64], resamples: int
) -> npt.NDArray[np.float64]:
    n = values.size
    per_chunk = max(1, _CHUNK_ELEMENTS // n)
    means = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, per_chunk):
        stop = min(resamples, start + per_chunk)
        picks = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[picks].mean(axis=1)
    return means


def _percentile_interval(
    estimates: npt.NDArray[np.float64], point: float, confidence: float
) -> tuple[float, float]:
    alpha = 1.0 - confidence
    low, high = np.quantile(estimates, [alpha / 2.0, 1.0 - alpha / 2.0])
    # Summation order differs between the point and the resamples, so a constant sample can land a rounding
    # error outside its own interval; an interval that excludes its estimate would read as a bug.
    return (min(float(low), point), max(float(high), point))


def _check_bootstrap(confidence: float, resamples: int) -> None:
    _check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")


def bootstrap_mean(
    values: Sequence[float], confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean: the same values and seed give the same interval."""
    _check_bootstrap(confidence, resamples)
    array = _as_values(values, "bootstrap_mean")
    rng = np.random.default_rng(seed)
    return _percentile_interval(_resampled_means(rng, array, resamples), _fmean(array), confidence)


def stratified_bootstrap_mean_of_means(
    groups: Sequence[Sequence[float]], confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of group means, resampling within each group so that
    every group (task) keeps its own size and weight in each resample."""
    _check_bootstrap(confidence, resamples)
    if not groups:
        raise ValueError("stratified_bootstrap_mean_of_means needs at least one group")
    arrays = [_as_values(group, f"group {i}") for i, group in enumerate(groups)]
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples, dtype=np.float64)
    for array in arrays:
        total += _resampled_means(rng, array, resamples)
    point = math.fsum(_fmean(array) for array in arrays) / len(arrays)
    return _percentile_interval(total / len(arrays), point, confidence)
