"""The built-in benchmarks and policies, and how a benchmark or policy reference is resolved to its class.

A benchmark reference is an alias ("mt10", "mt50"), "gym:<Gymnasium id>", or "package.module:Class" /
"path/to/file.py:Class"; a policy reference is an alias ("expert", "random") or one of the latter two.
Nothing here imports a simulator: that happens when a resolved class is built and played. `resolve` reads
declarations, which need no simulator (but Gymnasium's); `resolve_to_play`, the engine's resolver, also
refuses a built-in whose simulator is not installed, naming the extra that installs it (see `extras`).
"""

from __future__ import annotations

from typing import Literal

from yardstick.catalog.extras import require_for
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.errors import LoadError, SpecError
from yardstick.sdk.load import REFERENCE_RULE, load_object

BENCHMARKS: dict[str, str] = {
    "mt10": "yardstick.catalog.metaworld:MT10",
    "mt50": "yardstick.catalog.metaworld:MT50",
}
POLICIES: dict[str, str] = {
    "expert": "yardstick.catalog.metaworld:ScriptedExpert",
    "random": "yardstick.catalog.random_policy:RandomPolicy",
}
GYM_PREFIX = "gym:"

__all__ = [
    "BENCHMARKS",
    "GYM_PREFIX",
    "POLICIES",
    "resolve",
    "resolve_benchmark",
    "resolve_policy",
    "resolve_to_play",
]


def resolve(kind: Literal["benchmark", "policy"], ref: str) -> type:
    """`resolve_benchmark` or `resolve_policy` by `kind`: the engine's resolver (`Work.resolver`)."""
    if kind == "benchmark":
        return resolve_benchmark(ref)
    if kind == "policy":
        return resolve_policy(ref)
    raise ValueError(f"kind: a reference names a 'benchmark' or a 'policy', not {kind!r}")


def resolve_to_play(kind: Literal["benchmark", "policy"], ref: str) -> type:
    """`resolve`, for a class about to be built: refused (extras.MissingExtra, an AuthoringError) when it
    needs a simulator this install lacks. The engine's resolver (`Work.resolver`) and the policy server's."""
    found = resolve(kind, ref)
    require_for(found, f"the {kind} {ref}")
    return found


def resolve_benchmark(ref: str) -> type:
    """The benchmark class `ref` names. Raises LoadError for a reference that names nothing, SpecError for
    one that names something other than a class decorated with @benchmark, ValueError for an unknown
    Gymnasium id."""
    _check(ref, "benchmark", BENCHMARKS, f'"{GYM_PREFIX}<Gymnasium id>", ')
    if ref.startswith(GYM_PREFIX):
        from yardstick.catalog.gym import gym_benchmark

        return gym_benchmark(ref[len(GYM_PREFIX) :])
    found = _load(ref, BENCHMARKS, "benchmark", "@benchmark(...)")
    benchmark_spec(found)
    return found


def resolve_policy(ref: str) -> type:
    """The policy class `ref` names. Raises LoadError for a reference that names nothing, SpecError for one
    that names something other than a class decorated with @policy."""
    _check(ref, "policy", POLICIES, "")
    found = _load(ref, POLICIES, "policy", "@policy(hz=...)")
    policy_spec(found)
    return found


def _check(ref: object, kind: str, aliases: dict[str, str], extra: str) -> None:
    if not isinstance(ref, str) or not ref.strip():
        raise LoadError(f"{kind}: a {kind} reference is a non-empty string, not {ref!r}")
    # An alias has no colon; anything else without one is neither a reference nor an alias.
    if ":" not in ref and ref.lower() not in aliases:
        raise LoadError(
            f"{ref!r}: not a built-in {kind} ({', '.join(aliases)}); a {kind} is one of those, "
            f"{extra}or {REFERENCE_RULE}"
        )


def _load(ref: str, aliases: dict[str, str], kind: str, decorator: str) -> type:
    found = load_object(aliases.get(ref.lower(), ref))
    if not isinstance(found, type):
        raise SpecError(
            f"{kind} {ref}",
            "reference",
            f"names a {type(found).__name__}; a {kind} is a class decorated with {decorator}",
        )
    return found
