"""The exact coverage of each interval for a success rate, and its width: Wilson, Clopper–Pearson, Jeffreys.

For n episodes and a true rate p the coverage of an interval is exact: the sum over k = 0..n of
P(k successes | n, p) for the k whose interval holds p. Printed for n in {10, 20, 50, 100, 200} over a grid of
p in (0, 1) (minimum, mean), at p in {0.9, 0.95, 0.99} where robot policies sit, and the mean expected
width over the grid; at 95%. Nothing is sampled: the figures are the same on every run and every machine.
Run with `python bench/coverage.py` (or `make bench`).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import numpy.typing as npt

from yardstick.scoring.rates import INTERVALS, rate_interval

SIZES = (10, 20, 50, 100, 200)
WHERE = (0.9, 0.95, 0.99)


def bounds(method: str, n: int, confidence: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    interval = rate_interval(method)
    pairs = [interval(k, n, confidence) for k in range(n + 1)]
    return np.array([low for low, _ in pairs]), np.array([high for _, high in pairs])


def binomial(n: int, p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """P(k | n, p) for every k (rows) and p (columns), in logs for large n."""
    k = np.arange(n + 1)[:, None]
    log_choose = np.array(
        [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in range(n + 1)]
    )
    weights: npt.NDArray[np.float64] = np.exp(
        log_choose[:, None] + k * np.log(p)[None, :] + (n - k) * np.log1p(-p)[None, :]
    )
    return weights


def coverage(
    method: str, n: int, p: npt.NDArray[np.float64], confidence: float
) -> tuple[npt.NDArray[np.float64], float]:
    """(coverage at each p, mean expected width over p)."""
    low, high = bounds(method, n, confidence)
    weights = binomial(n, p)
    held = (low[:, None] <= p[None, :]) & (p[None, :] <= high[:, None])
    widths = (weights * (high - low)[:, None]).sum(axis=0)
    return (weights * held).sum(axis=0), float(widths.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--grid", type=int, default=2000, help="points of p in (0, 1)")
    args = parser.parse_args()
    grid = (np.arange(args.grid) + 0.5) / args.grid
    print(f"exact coverage at {args.confidence:.0%} over {args.grid} values of p; width: mean expected width")
    print(
        f"{'n':>4}  {'interval':<16} {'min':>6} {'mean':>6}  "
        + "  ".join(f"p={p:<5}" for p in WHERE)
        + "   width"
    )
    for n in SIZES:
        for method in INTERVALS:
            covered, width = coverage(method, n, grid, args.confidence)
            at, _ = coverage(method, n, np.array(WHERE), args.confidence)
            shown = "  ".join(f"{c:.3f}  " for c in at)
            print(f"{n:>4}  {method:<16} {covered.min():.3f} {covered.mean():.3f}  {shown}  {width:.3f}")


if __name__ == "__main__":
    main()
