"""What the sequential stopping rules cost and guarantee, on simulated Bernoulli policies (no simulator).

Three rules, each simulated exactly as the engine plays them (looks only at `checkpoints(max_trials)`, the
confidence sequence's running intersection over every episode):

- `eval compare --until decided`: the type-I error at p_A = p_B (target ≤ α, with its Clopper–Pearson
  interval), the power and the expected pairs used at (0.5, 0.7) and (0.8, 0.9), against the pairs a fixed-n
  exact paired test (McNemar's) needs for the same power: the saving is the figure to read.
- `eval run --until width<=W`: the coverage of the interval where it stopped (target ≥ 1 − α) and the
  episodes used, against the fixed n whose Clopper–Pearson interval is that narrow at the same rate.
- `eval run --gate success>=G --until decided`: how often the gate is decided wrongly (target ≤ α), left
  undecided at the cap, and the episodes used.

Run with `python bench/sequential.py` (about a minute; `--sequences` trades time for precision).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import numpy.typing as npt

from yardstick.scoring.compare import PAIRED_PRIOR, fixed_n_for_power
from yardstick.scoring.rates import clopper_pearson
from yardstick.scoring.sequential import ALPHA, PRIOR, checkpoints, confidence_sequence

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


def _lgamma(values: Floats) -> Floats:
    return np.array([math.lgamma(v) for v in values.ravel()]).reshape(values.shape)


def paired_rejects(most: int, alpha: float, prior: tuple[float, float]) -> npt.NDArray[np.bool_]:
    """rejects[w, l]: whether w pairs won by A alone and l by B alone carry evidence past 1/α."""
    a, b = prior
    k = np.arange(most + 1, dtype=np.float64)
    log_a, log_b = _lgamma(a + k), _lgamma(b + k)
    log_ab = _lgamma(a + b + np.arange(2 * most + 1, dtype=np.float64))
    won, lost = np.meshgrid(np.arange(most + 1), np.arange(most + 1), indexing="ij")
    base = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    evidence = log_a[won] + log_b[lost] - log_ab[won + lost] - base + (won + lost) * math.log(2.0)
    return np.asarray(evidence >= math.log(1.0 / alpha))


def simulate_compare(
    p_a: float,
    p_b: float,
    most: int,
    sequences: int,
    alpha: float,
    prior: tuple[float, float],
    rng: np.random.Generator,
) -> tuple[float, float, float]:
    """(share decided, share decided the wrong way round, mean pairs used)."""
    rejects = paired_rejects(most, alpha, prior)
    a = rng.random((sequences, most)) < p_a
    b = rng.random((sequences, most)) < p_b
    wins, losses = np.cumsum(a & ~b, axis=1), np.cumsum(b & ~a, axis=1)
    looks = np.array(checkpoints(most)) - 1
    decided_at = np.full(sequences, -1)
    for look in looks:
        fresh = (decided_at < 0) & rejects[wins[:, look], losses[:, look]]
        decided_at[fresh] = look
    decided = decided_at >= 0
    used = np.where(decided, decided_at + 1, most)
    at = np.where(decided, decided_at, most - 1)
    a_won = wins[np.arange(sequences), at] > losses[np.arange(sequences), at]
    wrong = decided & (a_won != (p_a > p_b)) if p_a != p_b else decided
    return float(decided.mean()), float(wrong.mean()), float(used.mean())


def cs_table(most: int, alpha: float, prior: tuple[float, float]) -> tuple[Floats, Floats]:
    """low[n, s] and high[n, s] of the confidence sequence for every n ≤ most, s ≤ n (vectorized bisection of
    the same rule as `confidence_sequence`, which a sample checks it against)."""
    a, b = prior
    n, s = np.meshgrid(np.arange(most + 1), np.arange(most + 1), indexing="ij")
    valid = s <= n
    s, n = np.where(valid, s, 0), np.where(valid, n, 0)
    f = n - s
    k = np.arange(most + 1, dtype=np.float64)
    lg_a, lg_b, lg_ab = _lgamma(a + k), _lgamma(b + k), _lgamma(a + b + k)
    base = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    bet = lg_a[s] + lg_b[f] - lg_ab[n] - base - math.log(1.0 / alpha)

    def rejected(p: Floats) -> npt.NDArray[np.bool_]:
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(s > 0, s * np.log(p), 0.0) + np.where(f > 0, f * np.log1p(-p), 0.0)
        return np.asarray(bet - loss >= 0.0)

    middle = np.where(n > 0, s / np.maximum(n, 1), 0.5)
    bounds = []
    for outside_value in (0.0, 1.0):
        outside = np.full(n.shape, outside_value)
        inside = middle.copy()
        for _ in range(60):
            between = (outside + inside) / 2.0
            hit = rejected(between)
            outside, inside = np.where(hit, between, outside), np.where(hit, inside, between)
        edge_open = ~rejected(np.full(n.shape, np.clip(outside_value, 1e-300, 1 - 1e-16)))
        bounds.append(np.where(edge_open | (n == 0), outside_value, inside))
    low, high = bounds
    rng = np.random.default_rng(0)
    for _ in range(20):
        nn = int(rng.integers(1, most + 1))
        ss = int(rng.integers(0, nn + 1))
        exact = confidence_sequence(ss, nn, alpha, prior)
        assert abs(exact[0] - low[nn, ss]) < 1e-6 and abs(exact[1] - high[nn, ss]) < 1e-6, (nn, ss, exact)
    return low, high


def running(low: Floats, high: Floats, outcomes: npt.NDArray[np.bool_]) -> tuple[Floats, Floats]:
    """Each sequence's running-intersection bounds after every episode."""
    successes = np.cumsum(outcomes, axis=1)
    n = np.arange(1, outcomes.shape[1] + 1)[None, :]
    return (
        np.maximum.accumulate(low[n, successes], axis=1),
        np.minimum.accumulate(high[n, successes], axis=1),
    )


def simulate_width(
    p: float, width: float, most: int, sequences: int, table: tuple[Floats, Floats], rng: np.random.Generator
) -> tuple[float, float, float]:
    """(coverage of the interval where it stopped, share stopped by width, mean episodes used)."""
    low, high = running(*table, rng.random((sequences, most)) < p)
    looks = np.array(checkpoints(most)) - 1
    narrow = (high[:, looks] - low[:, looks]) <= width
    first = np.where(narrow.any(axis=1), narrow.argmax(axis=1), len(looks) - 1)
    at = looks[first]
    rows = np.arange(sequences)
    covered = (low[rows, at] <= p) & (p <= high[rows, at])
    return float(covered.mean()), float(narrow.any(axis=1).mean()), float((at + 1).mean())


def simulate_gate(
    p: float,
    threshold: float,
    most: int,
    sequences: int,
    table: tuple[Floats, Floats],
    rng: np.random.Generator,
) -> tuple[float, float, float]:
    """(share decided wrongly, share undecided at the cap, mean episodes used) for success>=threshold."""
    low, high = running(*table, rng.random((sequences, most)) < p)
    looks = np.array(checkpoints(most)) - 1
    met, missed = low[:, looks] >= threshold, high[:, looks] < threshold
    decided = met | missed
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), len(looks) - 1)
    rows = np.arange(sequences)
    said_met = met[rows, first]
    said_missed = missed[rows, first]
    wrong = (said_met & (p < threshold)) | (said_missed & (p >= threshold))
    return float(wrong.mean()), float((~decided.any(axis=1)).mean()), float((looks[first] + 1).mean())


def fixed_width_n(p: float, width: float, alpha: float) -> int:
    """The fewest episodes whose Clopper–Pearson interval at the expected count is `width` wide."""
    n = 1
    while True:
        low, high = clopper_pearson(round(p * n), n, 1.0 - alpha)
        if high - low <= width:
            return n
        n = max(n + 1, int(n * 1.05))


def _interval(share: float, sequences: int) -> str:
    low, high = clopper_pearson(round(share * sequences), sequences, 0.95)
    return f"{share:.4f} [{low:.4f}, {high:.4f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sequences", type=int, default=10_000)
    parser.add_argument("--alpha", type=float, default=ALPHA)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    n_seq, alpha = args.sequences, args.alpha

    print(f"eval compare --until decided (alpha {alpha}, prior Beta{PAIRED_PRIOR}, {n_seq} sequences each)")
    print(f"{'p_A = p_B':>10} {'cap':>5} {'type-I error [95% CI]':>30}")
    for p in (0.2, 0.5, 0.8, 0.95):
        _, wrong, _ = simulate_compare(p, p, 400, n_seq, alpha, PAIRED_PRIOR, rng)
        print(f"{p:>10} {400:>5} {_interval(wrong, n_seq):>30}")
    print(
        f"{'p_A':>5} {'p_B':>5} {'cap':>5} {'power':>7} {'wrong way':>9} {'mean pairs':>10} "
        f"{'fixed-n pairs':>13} {'saving':>7}"
    )
    for p_a, p_b, cap in ((0.5, 0.7, 400), (0.8, 0.9, 800), (0.5, 0.7, 200), (0.8, 0.9, 400)):
        power, wrong, used = simulate_compare(p_a, p_b, cap, n_seq, alpha, PAIRED_PRIOR, rng)
        fixed = fixed_n_for_power(power, p_a * (1 - p_b), p_b * (1 - p_a), alpha)
        saving = f"{1 - used / fixed:.0%}" if fixed else "-"
        print(
            f"{p_a:>5} {p_b:>5} {cap:>5} {power:>7.3f} {wrong:>9.4f} {used:>10.1f} {fixed!s:>13} {saving:>7}"
        )

    print(
        f"\neval run --until width<=W (alpha {alpha}, prior Beta{PRIOR}, cap 1000, "
        f"{n_seq // 4} sequences each)"
    )
    table = cs_table(1000, alpha, PRIOR)
    print(f"{'p':>5} {'W':>5} {'coverage':>9} {'stopped by W':>12} {'mean episodes':>13} {'fixed-n CP':>10}")
    for width in (0.2, 0.1):
        for p in (0.5, 0.8, 0.9, 0.95, 0.99):
            covered, by_width, used = simulate_width(p, width, 1000, n_seq // 4, table, rng)
            fixed = fixed_width_n(p, width, alpha)
            print(f"{p:>5} {width:>5} {covered:>9.4f} {by_width:>12.3f} {used:>13.1f} {fixed:>10}")

    print(f"\neval run --gate success>=G --until decided (cap 1000, {n_seq // 4} sequences each)")
    print(f"{'G':>5} {'p':>5} {'decided wrongly':>15} {'undecided':>9} {'mean episodes':>13}")
    for threshold in (0.8, 0.9):
        for p in (threshold - 0.1, threshold - 0.05, threshold, threshold + 0.05):
            if p >= 1.0:
                continue
            wrong, undecided, used = simulate_gate(p, threshold, 1000, n_seq // 4, table, rng)
            print(f"{threshold:>5} {p:>5.2f} {wrong:>15.4f} {undecided:>9.3f} {used:>13.1f}")
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
