"""Which benchmark → policy pairs an adapter converts between: the rules, written once, that the adapter's
decorator in a box, its registration and an eval's filing all read, so what an eval may name is what runs.

An adapter declares its pairs in its code (`@seq.adapter(pairs=[(benchmark, policy), ...])`), each side an
org's name, `template:<name>` (anything made from that template) or `*` (any one); or `pairs="any"`. An
eval's pair is matched by name, never by version: a benchmark's or a policy's inputs seldom change with its
version. The most specific matching pair wins (`rank`), which is also the order a refusal lists the adapters
that would fit.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

ANY: Final = "any"
WILDCARD: Final = "*"
TEMPLATE: Final = "template:"
MAX_PAIRS: Final = 64

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# An adapter's own name (what `@seq.adapter(name=)` and a registration take).
ADAPTER_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,63}")
_TEMPLATE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
EXAMPLE: Final = 'pairs=[("my-benchmark", "my-policy"), ("template:gym-benchmark", "*")], or pairs="any"'


@dataclass(frozen=True)
class Pair:
    benchmark: str
    policy: str

    def as_json(self) -> dict[str, str]:
        return {"benchmark": self.benchmark, "policy": self.policy}


Pairs = str | tuple[Pair, ...]  # ANY, or the pairs in their order, each once


def _side(value: Any, which: str, position: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"pair {position}: its {which} is {value!r}, not a name")
    side = value.strip()
    if side == WILDCARD:
        return side
    if side.startswith(TEMPLATE):
        if not _TEMPLATE_NAME.fullmatch(side[len(TEMPLATE) :]):
            raise ValueError(
                f"pair {position}: {which} {value!r}: a template is template:<name>, lowercase letters, "
                "digits or '-'"
            )
        return side
    if not _NAME.fullmatch(side):
        raise ValueError(
            f"pair {position}: {which} {value!r} is no name: 1-64 letters, digits, '.', '_' or '-', starting "
            "with a letter or digit; or template:<name>, or *"
        )
    return side


def parse(value: Any) -> Pairs:
    """`"any"`, or [(benchmark, policy), ...] / [{"benchmark", "policy"}, ...] → ANY or the pairs. Raises
    ValueError naming the pair and the side that is wrong; none at all is wrong too."""
    if isinstance(value, str):
        if value == ANY:
            return ANY
        raise ValueError(f"pairs is {value!r}: name the (benchmark, policy) pairs, {EXAMPLE}")
    if value is None:
        raise ValueError(f"the adapter declares no pairs: {EXAMPLE}")
    try:
        items = list(value)
    except TypeError:
        raise ValueError(f"pairs is {value!r}, not a list of (benchmark, policy) pairs: {EXAMPLE}") from None
    if not items:
        raise ValueError(f"pairs is empty: name at least one (benchmark, policy) pair: {EXAMPLE}")
    found: list[Pair] = []
    for position, item in enumerate(items, 1):
        if isinstance(item, dict) and set(item) == {"benchmark", "policy"}:
            bench, policy = item["benchmark"], item["policy"]
        elif isinstance(item, list | tuple) and len(item) == 2:
            bench, policy = item
        else:
            raise ValueError(f"pair {position} is {item!r}: a pair is (benchmark, policy)")
        pair = Pair(_side(bench, "benchmark", position), _side(policy, "policy", position))
        if pair not in found:
            found.append(pair)
    if len(found) > MAX_PAIRS:
        raise ValueError(f"{len(found)} pairs; at most {MAX_PAIRS} (template:<name> or * names many at once)")
    return tuple(found)


def as_json(pairs: Pairs) -> str | list[dict[str, str]]:
    return pairs if isinstance(pairs, str) else [pair.as_json() for pair in pairs]


def _matches(side: str, name: str, templates: Iterable[str]) -> bool:
    if side == WILDCARD:
        return True
    if side.startswith(TEMPLATE):
        return side[len(TEMPLATE) :] in set(templates)
    return side == name


def _rank_side(side: str) -> int:
    return 3 if side == WILDCARD else 1 if side.startswith(TEMPLATE) else 0


def rank(hit: Pair | str) -> int:
    """How specific a matching pair is, the most specific lowest: "any" is the least."""
    return 7 if isinstance(hit, str) else _rank_side(hit.benchmark) + _rank_side(hit.policy)


def match(
    pairs: Pairs, benchmark: tuple[str, Iterable[str]], policy: tuple[str, Iterable[str]]
) -> Pair | str | None:
    """The most specific pair of `pairs` letting `benchmark` and `policy` (each its name and the templates it
    was made from) run with the adapter; ANY for an adapter open to every pair; None when none does."""
    if isinstance(pairs, str):
        return ANY
    (bench_name, bench_templates), (policy_name, policy_templates) = benchmark, policy
    hits = [
        pair
        for pair in pairs
        if _matches(pair.benchmark, bench_name, bench_templates)
        and _matches(pair.policy, policy_name, policy_templates)
    ]
    return min(hits, key=rank) if hits else None


def describe(pairs: Pairs) -> str:
    """The pairs as a person reads them: "any", or "a → b, c → d"."""
    return pairs if isinstance(pairs, str) else ", ".join(f"{p.benchmark} → {p.policy}" for p in pairs)
