"""Anytime-valid inference for success rates: an eval may be looked at after every episode and stopped the
moment it looks decided, and its error stays at α.

Two tools, both from one idea: a test martingale (a bet against a hypothesis that cannot, by Ville's
inequality, ever reach 1/α with probability above α while the hypothesis holds).

- A **confidence sequence** for a rate p (Howard et al. 2021, the beta-binomial mixture): after S successes
  in n episodes, the rates p whose mixture martingale

      M_n(p) = B(a + S, b + n − S) / B(a, b) / (p^S (1 − p)^(n−S))

  is still below 1/α. With probability ≥ 1 − α the true rate lies in *every* interval of the sequence at once,
  so an interval read at a stopping time of one's choosing (width small enough, a gate decided) covers as
  promised. It holds for any outcome in [0, 1], not only a success bit (a bounded outcome is sub-Bernoulli).
  The intervals kept are the running intersection: still valid, and they never widen, so a decision once made
  is never unmade.
- A **paired sequential test** of two policies on the same trials (`scoring.compare.PairedTest`): the same
  mixture, against p = ½ on the discordant pairs, decides which is better at any look.

Why a mixture and not Wald's SPRT: the SPRT needs the alternative named in advance and loses its power away
from it; the mixture bets on every alternative at once, at a price of a few episodes (bench/sequential.py
measures it against fixed-n tests of the same power).

What is not promised: episodes must be counted in the order they were planned (a run's trials, in order),
not in the order they finish — a failing episode that runs to its time limit finishes late, and counting by
finish time would count successes first. The engine plays in rounds and looks only between them, each
round's outcomes fed in trial order (`engine/rounds.py`); `checkpoints` is where it looks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from yardstick.scoring.gate import Gate

ALPHA: Final = 0.05
ANYTIME: Final = "confidence-sequence"  # the interval's name in a report
# The mixing prior on the rate. Beta(½, ½) puts weight near 0 and 1, where robot policies sit; measured
# against Beta(1, 1) in bench/sequential.py (a few percent narrower there, the same in the middle).
PRIOR: Final = (0.5, 0.5)
_BISECTIONS: Final = 60

UNTIL_GRAMMAR: Final = (
    '--until takes "width<=W" (W in (0, 1]: each task plays until its interval is that narrow) '
    'or "decided" (until every --gate is decided either way)'
)


ROUND: Final = 10
# The most trials a task plays by default in an eval that stops by a rule.
MAX_TRIALS: Final = 200


def checkpoints(max_trials: int, first: int = ROUND) -> list[int]:
    """The trial counts after which a sequential eval looks: `first`, then rounds of at least `first` that
    grow by a quarter of what was played (10, 20, 30, 40, 50, 62, 77, 96, 120, ...), so a long eval looks
    O(log n) times and pays a round's start-up as often; always ending at `max_trials`. (Rounds growing by
    half saved 5-10 points fewer episodes in bench/sequential.py.)"""
    if max_trials < 1 or first < 1:
        raise ValueError(f"max_trials and first must be at least 1, not {max_trials} and {first}")
    ends: list[int] = []
    played = 0
    while played < max_trials:
        played = min(max_trials, played + max(first, played // 4))
        ends.append(played)
    return ends


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def log_wealth(successes: float, n: float, p: float, prior: tuple[float, float] = PRIOR) -> float:
    """log M_n(p): how much a bettor against "the rate is p" has won, starting from 1."""
    a, b = prior
    failures = n - successes
    if (p <= 0.0 and successes > 0) or (p >= 1.0 and failures > 0):
        return math.inf
    bet = _log_beta(a + successes, b + failures) - _log_beta(a, b)
    return (
        bet
        - (successes * math.log(p) if successes else 0.0)
        - (failures * math.log1p(-p) if failures else 0.0)
    )


def confidence_sequence(
    successes: float, n: float, alpha: float = ALPHA, prior: tuple[float, float] = PRIOR
) -> tuple[float, float]:
    """The rates not yet rejected after `successes` in `n`: {p : M_n(p) < 1/α}. An interval, as log M_n is
    convex in p with its least value (≤ 0) at p = successes / n."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"successes must lie in 0..n, not {successes} of {n}")
    if n == 0:
        return (0.0, 1.0)
    limit = math.log(1.0 / alpha)
    middle = successes / n

    def rejected(p: float) -> bool:
        return log_wealth(successes, n, p, prior) >= limit

    low = 0.0 if not rejected(0.0) else _edge(rejected, 0.0, middle)
    high = 1.0 if not rejected(1.0) else _edge(rejected, 1.0, middle)
    return (low, high)


def _edge(rejected: Any, outside: float, inside: float) -> float:
    """Bisection for the boundary between a rejected rate and an accepted one, on the accepted side."""
    for _ in range(_BISECTIONS):
        between = (outside + inside) / 2.0
        if rejected(between):
            outside = between
        else:
            inside = between
    return inside


@dataclass
class RateSequence:
    """One rate's confidence sequence, observed episode by episode in planned order; the running
    intersection, so its bounds only ever narrow."""

    alpha: float = ALPHA
    successes: float = 0.0
    n: int = 0
    low: float = 0.0
    high: float = 1.0

    def add(self, outcome: float) -> None:
        if not 0.0 <= outcome <= 1.0:
            raise ValueError(f"an outcome lies in [0, 1], not {outcome!r}")
        self.successes += outcome
        self.n += 1
        low, high = confidence_sequence(self.successes, self.n, self.alpha)
        self.low, self.high = max(self.low, low), min(self.high, high)
        if self.low > self.high:  # rounding at a bisection's last digit: the two bounds met
            self.low = self.high = (self.low + self.high) / 2.0

    @property
    def width(self) -> float:
        return self.high - self.low

    @property
    def rate(self) -> float:
        return self.successes / self.n if self.n else 0.0


# ---------------------------------------------------------------------------------------------------------
# Stopping rules


@dataclass(frozen=True)
class Until:
    """When a sequential eval stops: every task's interval at most `width` wide, or every gate decided."""

    kind: Literal["width", "decided"]
    width: float = 0.0

    def __str__(self) -> str:
        return f"width<={self.width:g}" if self.kind == "width" else "decided"


def parse_until(text: str) -> Until:
    source = text.strip().replace(" ", "")
    if source == "decided":
        return Until("decided")
    match = re.fullmatch(r"width<=([0-9.eE+-]+)", source)
    if match is None:
        raise ValueError(f"{text!r} is not a stopping rule; {UNTIL_GRAMMAR}")
    try:
        width = float(match.group(1))
    except ValueError:
        raise ValueError(f"{match.group(1)!r} is not a number; {UNTIL_GRAMMAR}") from None
    if not 0.0 < width <= 1.0:
        raise ValueError(f"a width of {width:g} is outside (0, 1]; {UNTIL_GRAMMAR}")
    return Until("width", width)


def check_decidable(gates: Sequence[Gate], tasks: Sequence[str]) -> None:
    """Refuse, naming the gate and the rule, a gate a confidence sequence for a rate cannot decide."""
    if not gates:
        raise ValueError('--until decided needs at least one --gate to decide (e.g. --gate "success>=0.8")')
    for gate in gates:
        if gate.metric != "success":
            raise ValueError(
                f"gate {gate}: --until decided decides success rates only "
                f"({gate.metric!r} is not a rate in [0, 1])"
            )
        if gate.bound != "value":
            raise ValueError(
                f"gate {gate}: with --until decided the gate speaks of the true rate; write "
                f"success{'' if gate.task is None else f'[{gate.task}]'}{gate.op}{gate.threshold:g} "
                "(the confidence sequence plays the part of .low and .high)"
            )
        if gate.op == "==":
            raise ValueError(f"gate {gate}: == cannot be decided by an interval; use >=, >, <= or <")
        if gate.task is not None and gate.task not in tasks:
            raise ValueError(f"gate {gate}: {gate.task!r} is not a task of this run ({', '.join(tasks)})")


Decision = Literal["met", "missed"]


def decide(gate: Gate, low: float, high: float) -> Decision | None:
    """A gate on the true rate, decided once the interval lies wholly on one side of its threshold."""
    above = gate.op in (">=", ">")
    if low >= gate.threshold if gate.op in (">=", "<") else low > gate.threshold:
        return "met" if above else "missed"
    if high < gate.threshold if gate.op in (">=", "<") else high <= gate.threshold:
        return "missed" if above else "met"
    return None


@dataclass
class TaskTrace:
    """One task's sequence: its own (at α) and the simultaneous one (at α / tasks, so that all tasks' hold
    together and their mean bounds the overall rate), and each look's bounds."""

    own: RateSequence
    joint: RateSequence
    looks: list[tuple[int, float, float]] = field(default_factory=list)
    stopped_at: int | None = None


class SequentialEval:
    """The state of an eval that stops by a rule: fed each task's outcomes in planned trial order, it says
    which tasks are still open and, at the end, what was decided."""

    def __init__(
        self, tasks: Sequence[str], until: Until, gates: Sequence[Gate] = (), alpha: float = ALPHA
    ) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie strictly between 0 and 1, not {alpha!r}")
        if until.kind == "decided":
            check_decidable(gates, tasks)
        self.until, self.alpha, self.gates = until, alpha, list(gates)
        joint_alpha = alpha / len(tasks)
        self.tasks = {task: TaskTrace(RateSequence(alpha), RateSequence(joint_alpha)) for task in tasks}

    def observe(self, task: str, outcome: float) -> None:
        trace = self.tasks[task]
        trace.own.add(outcome)
        trace.joint.add(outcome)
        trace.looks.append((trace.own.n, trace.own.low, trace.own.high))

    def look(self) -> None:
        """After a round: close every task whose rule is met, noting where it stopped (a closed task stays
        closed: it plays no more, so its episodes stop where the rule was met)."""
        for task, trace in self.tasks.items():
            if trace.stopped_at is None and trace.own.n and self._satisfied(task):
                trace.stopped_at = trace.own.n

    def is_open(self, task: str) -> bool:
        """Whether `task` needs more episodes, as of the last `look`."""
        return self.tasks[task].stopped_at is None

    def _satisfied(self, task: str) -> bool:
        if self.until.kind == "width":
            return self.tasks[task].own.width <= self.until.width
        relevant = [g for g in self.gates if g.task in (None, task)]
        return all(self.verdict(g) is not None for g in relevant)

    def overall(self) -> tuple[float, float]:
        """Bounds on the mean of task rates that hold with the tasks' simultaneous sequences."""
        lows = [t.joint.low for t in self.tasks.values()]
        highs = [t.joint.high for t in self.tasks.values()]
        return (math.fsum(lows) / len(lows), math.fsum(highs) / len(highs))

    def bounds(self, gate: Gate) -> tuple[float, float]:
        """What a gate is decided on: its task's simultaneous sequence, or the overall bounds."""
        if gate.task is None:
            return self.overall()
        joint = self.tasks[gate.task].joint
        return joint.low, joint.high

    def verdict(self, gate: Gate) -> Decision | None:
        return decide(gate, *self.bounds(gate))

    def to_dict(self) -> dict[str, Any]:
        low, high = self.overall()
        return {
            "until": str(self.until),
            "alpha": self.alpha,
            "method": "beta-binomial mixture confidence sequence (Howard et al. 2021), running intersection",
            "prior": list(PRIOR),
            "tasks": {
                task: {
                    "episodes": trace.own.n,
                    "successes": trace.own.successes,
                    "rate": trace.own.rate,
                    "low": trace.own.low,
                    "high": trace.own.high,
                    "joint_low": trace.joint.low,
                    "joint_high": trace.joint.high,
                    "stopped_at": trace.stopped_at,
                    "looks": [list(look) for look in trace.looks],
                }
                for task, trace in self.tasks.items()
            },
            "overall": {"low": low, "high": high, "alpha_per_task": self.alpha / len(self.tasks)},
            "gates": [{"gate": str(g), "decision": self.verdict(g)} for g in self.gates],
        }


def anytime_summary(summary: dict[str, Any], state: Mapping[str, Any]) -> None:
    """Lay a stopped eval's intervals (`SequentialEval.to_dict()`) over a summary's success rates, in place:
    a task's from its own sequence, the overall from the tasks' simultaneous ones. A fixed-n interval read at
    a time the data chose is not valid; the pooled rate has no sequence here, so it is left out."""
    for name, trace in (state.get("tasks") or {}).items():
        success = (summary.get("tasks") or {}).get(name, {}).get("metrics", {}).get("success")
        if success is not None:
            success.update(low=trace["low"], high=trace["high"], interval=ANYTIME)
    overall = summary.get("overall") or {}
    overall.pop("success_pooled", None)
    if overall.get("success") is not None:
        bounds = state.get("overall") or {}
        overall["success"].update(low=bounds.get("low"), high=bounds.get("high"), interval=ANYTIME)
