"""The built-in benchmarks and policies, and how a benchmark or policy reference is resolved to its class.

A benchmark reference is an alias ("mt10", "libero_spatial", "pusht", "aloha/transfer-cube", ...),
"gym:<Gymnasium id>", or "package.module:Class" / "path/to/file.py:Class"; a policy reference is an alias
("expert", "random") or one of the latter two. A policy alias means what the benchmark of the run makes of
it: a benchmark that plays at one rate declares its own built-in policies (`BUILTIN_POLICIES`: LIBERO's
"random" plays at 20 Hz, ALOHA's "expert" is its scripted one); others take POLICIES.
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
from yardstick.sdk.suggest import did_you_mean

BENCHMARKS: dict[str, str] = {
    "mt10": "yardstick.catalog.metaworld:MT10",
    "mt50": "yardstick.catalog.metaworld:MT50",
    "libero_spatial": "yardstick.catalog.libero:LiberoSpatial",
    "libero_object": "yardstick.catalog.libero:LiberoObject",
    "libero_goal": "yardstick.catalog.libero:LiberoGoal",
    "libero_10": "yardstick.catalog.libero:Libero10",
    "libero_90": "yardstick.catalog.libero:Libero90",
    "pusht": "yardstick.catalog.pusht:PushT",
    "aloha": "yardstick.catalog.aloha:Aloha",
    "aloha/insertion": "yardstick.catalog.aloha:AlohaInsertion",
    "aloha/transfer-cube": "yardstick.catalog.aloha:AlohaTransferCube",
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
    "policy_aliases",
    "resolve",
    "resolve_benchmark",
    "resolve_policy",
    "resolve_to_play",
]


def resolve(kind: Literal["benchmark", "policy"], ref: str, benchmark: str | None = None) -> type:
    """`resolve_benchmark` or `resolve_policy` by `kind`, for reading declarations. A policy is resolved for
    the run's `benchmark` when it is given (see `policy_aliases`)."""
    if kind == "benchmark":
        return resolve_benchmark(ref)
    if kind == "policy":
        return resolve_policy(ref, benchmark)
    raise ValueError(f"kind: a reference names a 'benchmark' or a 'policy', not {kind!r}")


def resolve_to_play(kind: Literal["benchmark", "policy"], ref: str, benchmark: str | None = None) -> type:
    """`resolve`, for a class about to be built: refused (extras.MissingExtra, an AuthoringError) when it
    needs a simulator this install lacks. The engine's resolver (`Work.resolver`) and the policy server's."""
    found = resolve(kind, ref, benchmark)
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


def resolve_policy(ref: str, benchmark: str | None = None) -> type:
    """The policy class `ref` names, on `benchmark` when given (its aliases are that benchmark's). Raises
    LoadError for a reference that names nothing, SpecError for one that names something other than a class
    decorated with @policy."""
    aliases = policy_aliases(benchmark)
    owner = "" if aliases is POLICIES or benchmark is None else f" of {benchmark}"
    _check(ref, "policy", aliases, "", owner)
    found = _load(ref, aliases, "policy", "@policy(hz=...)")
    policy_spec(found)
    return found


def policy_aliases(benchmark: str | None) -> dict[str, str]:
    """The policy aliases a run on `benchmark` may name: the benchmark class's own `BUILTIN_POLICIES` where it
    declares them, else POLICIES. A benchmark that cannot be resolved gets POLICIES: its own refusal comes
    when the run resolves it."""
    if benchmark is None or (isinstance(benchmark, str) and benchmark.startswith(GYM_PREFIX)):
        return POLICIES
    try:
        cls = resolve_benchmark(benchmark)
    except (LoadError, SpecError, ValueError):
        return POLICIES
    own = getattr(cls, "BUILTIN_POLICIES", None)
    return dict(own) if isinstance(own, dict) else POLICIES


def _check(ref: object, kind: str, aliases: dict[str, str], extra: str, owner: str = "") -> None:
    if not isinstance(ref, str) or not ref.strip():
        raise LoadError(f"{kind}: a {kind} reference is a non-empty string, not {ref!r}")
    # An alias has no colon; anything else without one is neither a reference nor an alias.
    if ":" not in ref and ref.lower() not in aliases:
        raise LoadError(
            f"{ref!r}: not a built-in {kind}{owner}{did_you_mean(ref, aliases)} ({', '.join(aliases)}); "
            f"a {kind} is one of those, "
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
