"""`@seq.planner(members=[...])` and `@seq.plan(every_s=...)`: a planner, made a Yardstick policy that plans.

A planner answers no robot's act: the platform calls its one `@seq.plan` method on its own clock, handed
the group it plans for. Yardstick serves it as it serves any policy — built in its box by its constructor,
reached over our wire — whose one "act" is a round: the observation it is asked with is the round as the
platform gathered it (`Round` below: its members, each policy's robots with their episodes, each planner
member's handed-up state, and its own record), and its answer is what the plan returned, {robot id or
planner member id: value}, with its own state as the plan left it (which the platform keeps for its next
round, and hands up to a planner above as that member's `m.state`).

`group.state` is the planner's own record: what it kept there last round, `seq.observations` (what was
observed into it since its last plan, `sequence_ai.planner(name).observe(data)`) and `seq.plans` (what the
planner above wrote for it since then). Those two are the platform's, handed fresh each round; every other
key is the planner's and comes back next round as it left it.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import yardstick.sdk.decorators as ys
from yardstick.hosted.seq_api import forms
from yardstick.hosted.seq_api.benchmark import NAME as NAME_PATTERN
from yardstick.hosted.seq_api.errors import PolicyDefinitionError
from yardstick.hosted.seq_api.marks import MARKS, SAMPLE, SHUTDOWN, bindings, method
from yardstick.hosted.seq_api.policy import DEPLOYMENT, SEQ, default_name, keep_declaration, weights_dirs
from yardstick.sdk.errors import SpecError

_C = TypeVar("_C", bound=type)
_F = TypeVar("_F")
OWNER: Final = "@seq.planner"
PLAN: Final = "plan"
WAKE_ON: Final = "__seq_plan_wake_on__"
EVERY_S: Final = "__seq_plan_every_s__"
# The platform's keys of group.state, handed fresh each round; every other key is the planner's own.
OBSERVATIONS: Final = "seq.observations"
PLANS: Final = "seq.plans"
PLATFORM_KEYS: Final = (OBSERVATIONS, PLANS)
MOST_MEMBERS: Final = 64
# An act's arguments: a planner answers no act, so it takes none of them.
NO_ACT: Final = ("hz", "action_chunk_valid_len", "action_chunk_replan_at", "tensors", "io")
ALLOWED: Final = frozenset({"name", "init", "members", *DEPLOYMENT}) - frozenset(NO_ACT)
HOW: Final = (
    '@seq.planner(members=["a_policy", "a_planner"], gpu="cpu") on a class with one '
    "@seq.plan(every_s=SECONDS) method, def plan(self, group)"
)


def plan(fn: Any = None, *, every_s: Any = None, wake_on: Any = None) -> Callable[[_F], _F]:
    """`@seq.plan(every_s=SECONDS, wake_on=[KEY, ...])`: a planner's one method, `def plan(self, group)`,
    called every `every_s` from one plan's start to the next, and at once when an observation arrives
    holding one of the `wake_on` keys at its top level."""
    if fn is not None:
        raise PolicyDefinitionError("@seq.plan", "every_s", "is needed: @seq.plan(every_s=SECONDS)")
    if isinstance(every_s, bool) or not isinstance(every_s, int | float) or not 0.05 <= every_s <= 86_400:
        raise PolicyDefinitionError(
            "@seq.plan",
            "every_s",
            f"is the seconds from one plan's start to the next, 0.05 to 86400, not {every_s!r}",
        )
    keys: list[str] = []
    if wake_on is not None:
        if not isinstance(wake_on, list | tuple) or not all(isinstance(k, str) and k for k in wake_on):
            raise PolicyDefinitionError(
                "@seq.plan",
                "wake_on",
                f"lists the top-level keys whose arrival plans at once, not {wake_on!r}",
            )
        keys = list(wake_on)

    def mark(target: _F) -> _F:
        if not callable(target):
            raise PolicyDefinitionError("@seq.plan", type(target).__name__, "goes on a method")
        setattr(target, MARKS, frozenset({*getattr(target, MARKS, ()), PLAN}))
        setattr(target, EVERY_S, float(every_s))
        setattr(target, WAKE_ON, keys)
        return target

    return mark


@dataclass
class RobotView:
    """A robot connected now to a policy member: `id` (what a plan's answer is keyed by), `name`, and
    `state`, its episode as its worker holds it (its newest observation, its step, the plans it was
    handed)."""

    id: str
    name: str
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class Member:
    """One member the planner reaches this round: a policy with its robots, or a planner with the state it
    handed up."""

    id: str
    name: str
    kind: str
    robots: list[RobotView] = field(default_factory=list)
    state: dict[str, Any] | None = None


@dataclass
class Group:
    members: list[Member]
    state: dict[str, Any]

    def member(self, name: str) -> Member | None:
        return next((m for m in self.members if m.name == name), None)


def group_of(round_: dict[str, Any]) -> Group:
    """The group a plan is handed, from the round the platform sent."""
    members = [
        Member(
            id=str(m["id"]),
            name=str(m["name"]),
            kind=str(m["kind"]),
            robots=[RobotView(str(r["id"]), str(r["name"]), dict(r.get("state") or {})) for r in m["robots"]],
            state=dict(m["state"]) if isinstance(m.get("state"), dict) else None,
        )
        for m in round_.get("members") or []
    ]
    return Group(members, dict(round_.get("state") or {}))


def planner(*args: Any, **kwargs: Any) -> Callable[[_C], _C]:
    """`@seq.planner(members=[...], name=..., gpu=..., init=...)`: a deployment planning for its members."""
    if args:
        raise PolicyDefinitionError(OWNER, "arguments", f"is called with them: {HOW}")
    for name in kwargs:
        if name in NO_ACT:
            raise PolicyDefinitionError(
                OWNER,
                name,
                "is an act's, and a planner answers no act: a robot connects to its own policy, which the "
                "planner plans for; leave it out",
            )
        if name not in ALLOWED:
            raise PolicyDefinitionError(
                OWNER, name, f"is not an argument; they are {', '.join(sorted(ALLOWED))}"
            )
    members = _members(kwargs.get("members"))

    def decorate(cls: _C) -> _C:
        return _register(cls, dict(kwargs), members)

    return decorate


def _members(value: Any) -> list[str]:
    if value is None:
        raise PolicyDefinitionError(
            OWNER, "members", f"is needed, the policies and planners it plans for: {HOW}"
        )
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise PolicyDefinitionError(OWNER, "members", f"is a list of deployment names, not {value!r}")
    names = list(value)
    for name in names:
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise PolicyDefinitionError(
                OWNER,
                "members",
                f"{name!r} is not a deployment name: 1 to 64 letters, digits, '.', '_' or '-'",
            )
    if len(set(names)) != len(names):
        raise PolicyDefinitionError(OWNER, "members", "names each member once")
    if len(names) > MOST_MEMBERS:
        raise PolicyDefinitionError(OWNER, "members", f"names at most {MOST_MEMBERS}")
    return names


def _register(cls: _C, kw: dict[str, Any], members: list[str]) -> _C:
    if SEQ in cls.__dict__:
        raise PolicyDefinitionError(OWNER, cls.__name__, "is applied once to a class")
    name = kw.get("name") or default_name(cls.__name__)
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise PolicyDefinitionError(OWNER, "name", f"is 1-64 letters, digits, '.', '_' or '-', not {name!r}")
    if name in members:
        raise PolicyDefinitionError(
            OWNER, "members", f"{name!r} is the planner itself: a planner plans for others"
        )
    owner = f"planner {name}"
    bound = bindings(cls, "planner", PolicyDefinitionError)
    for flag, where in bound.items():
        if flag not in (PLAN, SAMPLE, SHUTDOWN):
            raise PolicyDefinitionError(
                owner,
                where,
                f"@seq.{flag} is not a planner's: a planner answers no act; it plans with one @seq.plan"
                " method",
            )
    if PLAN not in bound:
        raise PolicyDefinitionError(owner, "plan", f"a planner plans: give it one {HOW.split(' on ', 1)[1]}")
    plan_fn = method(cls, bound[PLAN])
    _check_plan(plan_fn, bound[PLAN], owner)
    given = "init" in kw and kw["init"] is not None
    args, kwargs = forms.arguments(kw["init"], owner, PolicyDefinitionError) if given else ([], {})
    forms.check_fits(
        cls, args, kwargs, given, owner, PolicyDefinitionError, '"{weights}" its weights\' directory'
    )
    plan_name = bound[PLAN]

    def round_(self: Any, obs: Any) -> dict[str, Any]:
        group = group_of(obs if isinstance(obs, dict) else {})
        planned = getattr(self, plan_name)(group)
        if inspect.isawaitable(planned):
            planned = asyncio.run(_awaited(planned))
        if planned is not None and not isinstance(planned, dict):
            raise TypeError(
                f"{cls.__name__}.{plan_name} returned {type(planned).__name__}: a plan returns "
                "{robot id or planner member id: value}, or None"
            )
        own = {k: v for k, v in group.state.items() if k not in PLATFORM_KEYS}
        return {"plans": dict(planned or {}), "state": own}

    round_.__name__ = "__seq_plan_round__"
    cls.__seq_plan_round__ = ys.infer(round_)  # type: ignore[attr-defined]
    try:
        decorated = ys.policy(
            hz=1.0,
            action_chunk_len=1,
            init=(kwargs if kwargs else args) if given else None,
            name=name,
            weights=weights_dirs(kw.get("weights")),
        )(cls)
    except SpecError as exc:
        raise PolicyDefinitionError(exc.owner, exc.field, exc.rule) from None
    keep_declaration(
        decorated,
        "planner",
        name,
        kw,
        hz=None,
        action_chunk_valid_len=None,
        action_chunk_replan_at=None,
        params={},
        planner={
            "members": members,
            "every_s": getattr(plan_fn, EVERY_S),
            "wake_on": list(getattr(plan_fn, WAKE_ON)),
        },
    )
    return decorated


def _check_plan(fn: Any, name: str, owner: str) -> None:
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise PolicyDefinitionError(
            owner, name, "a plan returns {robot or member id: value} and does not yield"
        )
    every = getattr(fn, EVERY_S, None)
    if not isinstance(every, float) or not math.isfinite(every):
        raise PolicyDefinitionError(owner, name, "is marked @seq.plan(every_s=SECONDS)")
    params = [p for p in inspect.signature(fn).parameters.values()][1:]
    required = [
        p for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(required) != 1:
        raise PolicyDefinitionError(owner, name, "is handed its group alone: def plan(self, group)")


async def _awaited(planned: Any) -> Any:
    return await planned
