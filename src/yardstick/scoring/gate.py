"""Gates: a threshold a run's summary must meet, written as text (`success.low>=0.8`) for a CLI flag or CI."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yardstick.scoring.aggregate import Summary

GRAMMAR = (
    "a gate reads METRIC[.low|.high][[TASK]] OP NUMBER with OP one of >= > <= < ==, "
    'e.g. "success>=0.9", "success.low>=0.8", "success[reach-v3]>0.5", "return>=10"'
)

Bound = Literal["value", "low", "high"]

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    # Scores are means of floats: an exact == would fail on 0.1 + 0.2 == 0.3.
    "==": lambda a, b: math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12),
}
# Longest first, so ">=" is not read as ">" followed by "=0.9".
_OP_RE = re.compile(r">=|<=|==|!=|=>|=<|>|<|=")
_METRIC_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")


@dataclass(frozen=True, slots=True)
class Gate:
    metric: str
    op: str
    threshold: float
    bound: Bound = "value"
    task: str | None = None

    @property
    def subject(self) -> str:
        """The left-hand side as written canonically: `success.low[reach-v3]`."""
        bound = "" if self.bound == "value" else f".{self.bound}"
        task = "" if self.task is None else f"[{self.task}]"
        return f"{self.metric}{bound}{task}"

    def __str__(self) -> str:
        return f"{self.subject}{self.op}{self.threshold:g}"

    def check(self, summary: Summary | Mapping[str, Any]) -> tuple[bool, str]:
        """Whether the summary meets the gate, and one line saying why. A metric or task the summary lacks
        does not meet it: a gate that cannot be evaluated must not let a run pass."""
        data = summary.to_dict() if isinstance(summary, Summary) else summary
        if self.task is None:
            scope, metrics = "in the overall scores", data.get("overall") or {}
        else:
            tasks = data.get("tasks") or {}
            if self.task not in tasks:
                return False, f"{self.subject}: no task {self.task!r} in the summary: not met"
            scope, metrics = f"in task {self.task!r}", tasks[self.task].get("metrics") or {}
        if self.metric not in metrics:
            known = ", ".join(metrics) or "none: no finished episodes"
            return False, f"{self.subject}: no metric {self.metric!r} {scope} (it has {known}): not met"
        value = metrics[self.metric].get(self.bound)
        if value is None:
            return False, f"{self.subject}: no {self.bound} {scope}: not met"
        met = _OPERATORS[self.op](float(value), self.threshold)
        verdict = "met" if met else "not met"
        shown = _shown(float(value), self.threshold)
        return met, f"{self.subject} = {shown} {self.op} {self.threshold:g}: {verdict}"


def _shown(value: float, threshold: float) -> str:
    short = f"{value:.4g}"
    # Rounding must not print "0.9 >= 0.9: not met" for 0.8999999.
    return repr(value) if short == f"{threshold:g}" and value != threshold else short


def _refuse(text: str, problem: str) -> ValueError:
    return ValueError(f"gate {text!r}: {problem}; {GRAMMAR}")


def parse_gate(text: str) -> Gate:
    """Read a gate, refusing malformed text with a ValueError that names the wrong part."""
    source = text.strip()
    if not source:
        raise _refuse(text, "is empty")
    # A task name may hold any character but "]", so look for the operator only outside the brackets.
    match = None
    for found in _OP_RE.finditer(source):
        if source.count("[", 0, found.start()) == source.count("]", 0, found.start()):
            match = found
            break
    if match is None:
        if source.count("[") != source.count("]"):
            raise _refuse(text, "has a [ without its ]")
        raise _refuse(text, "has no comparison operator")
    op = match.group()
    if op not in _OPERATORS:
        raise _refuse(text, f"{op!r} is not an operator")
    left, right = source[: match.start()].strip(), source[match.end() :].strip()
    metric, bound, task = _parse_subject(text, left)
    return Gate(metric=metric, op=op, threshold=_parse_number(text, right), bound=bound, task=task)


def _parse_subject(text: str, left: str) -> tuple[str, Bound, str | None]:
    if not left:
        raise _refuse(text, "has no metric before the operator")
    name = _METRIC_RE.match(left)
    if name is None:
        rule = "a letter or _, then letters, digits, _ or -"
        raise _refuse(text, f"{left!r} does not start with a metric name ({rule})")
    metric, rest = name.group(), left[name.end() :]
    bound: Bound = "value"
    if rest.startswith("."):
        word = re.match(r"\.([^\[\s]*)", rest)
        assert word is not None  # the pattern matches any text that starts with "."
        if word.group(1) == "low":
            bound = "low"
        elif word.group(1) == "high":
            bound = "high"
        else:
            raise _refuse(text, f"{word.group()!r} is not a bound: use .low or .high")
        rest = rest[word.end() :]
    rest = rest.strip()
    if not rest:
        return metric, bound, None
    task = re.fullmatch(r"\[([^\[\]]*)\]", rest)
    if task is None:
        raise _refuse(text, f"{rest!r} after {metric!r} is neither .low/.high nor a [TASK]")
    if not task.group(1).strip():
        raise _refuse(text, "names an empty task []")
    return metric, bound, task.group(1).strip()


def _parse_number(text: str, right: str) -> float:
    if not right:
        raise _refuse(text, "has no number after the operator")
    try:
        number = float(right)
    except ValueError:
        raise _refuse(text, f"{right!r} is not a number") from None
    if not math.isfinite(number):
        raise _refuse(text, f"{right!r} is not a finite number")
    return number
