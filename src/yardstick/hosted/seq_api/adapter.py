"""`@seq.adapter`: two conversions between a benchmark and a policy, on a plain class — `@seq.observation`
turns the benchmark's observation into what the policy is sent, `@seq.action` turns the policy's answer into
the actions the benchmark plays, a list, one a step — and the benchmark → policy pairs it is for.

Here it only records what it read (`registration`): the platform runs the class in a box between the two
(`yardstick.hosted.adapting`), and registers its file without importing it."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from yardstick.hosted import adapter_pairs
from yardstick.hosted.adapter_pairs import ADAPTER_NAME as NAME
from yardstick.hosted.seq_api.errors import AdapterDefinitionError
from yardstick.hosted.seq_api.marks import bindings, method
from yardstick.hosted.seq_api.policy import default_name  # an adapter is named as a policy is

_C = TypeVar("_C", bound=type)
ADAPTER: Final = "__seq_adapter__"
# Each method's mark, how it is written, and what it is handed.
METHODS: Final = {
    "observation": ("def to_policy(self, obs)", "the benchmark's observation"),
    "action": ("def to_env(self, answer)", "the policy's answer"),
}


@dataclass(frozen=True)
class Registration:
    name: str
    pairs: adapter_pairs.Pairs
    observation: str  # the method that converts an observation
    action: str  # the method that converts an answer


def adapter(cls: Any = None, *, name: str | None = None, pairs: Any = None) -> Any:
    """`@seq.adapter(name=..., pairs=[(benchmark, policy), ...])` on a class with an `@seq.observation` and an
    `@seq.action` method, each taking the one value it is handed."""
    if cls is None:
        return lambda target: _register(target, name, pairs)
    return _register(cls, name, pairs)


def _register(cls: Any, name: str | None, pairs: Any) -> Any:
    if not isinstance(cls, type):
        raise AdapterDefinitionError("@seq.adapter", "class", "goes on a class with two methods")
    owner = f"adapter {cls.__name__}"
    if name is not None and not NAME.fullmatch(name):
        raise AdapterDefinitionError(
            owner, "name", f"is 1-64 letters, digits, '.', '_' or '-', starting with a letter, not {name!r}"
        )
    try:
        parsed = adapter_pairs.parse(pairs)
    except ValueError as exc:
        raise AdapterDefinitionError(owner, "pairs", str(exc)) from None
    bound = bindings(cls, "adapter", AdapterDefinitionError)
    for flag, where in bound.items():
        if flag not in METHODS:
            raise AdapterDefinitionError(
                owner, where, f"@seq.{flag} is not an adapter's: it marks @seq.observation and @seq.action"
            )
    for flag, (example, handed) in METHODS.items():
        if flag not in bound:
            raise AdapterDefinitionError(
                owner, flag, f"an adapter converts both ways: @seq.{flag} {example}, handed {handed}"
            )
        _check_one_value(cls, bound[flag], flag, owner)
    setattr(
        cls,
        ADAPTER,
        Registration(name or default_name(cls.__name__), parsed, bound["observation"], bound["action"]),
    )
    return cls


def _check_one_value(cls: type, name: str, flag: str, owner: str) -> None:
    example, handed = METHODS[flag]
    try:
        params = list(inspect.signature(method(cls, name)).parameters.values())[1:]
    except (TypeError, ValueError):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = any(p.kind is p.VAR_POSITIONAL for p in params)
    required = [p for p in positional if p.default is p.empty]
    keyword_required = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if (not positional and not star) or len(required) > 1 or keyword_required:
        raise AdapterDefinitionError(owner, name, f"is handed {handed} alone: {example}")


def registration(cls: type) -> Registration:
    """What `@seq.adapter` recorded on `cls`; AdapterDefinitionError for a class it did not decorate."""
    found = cls.__dict__.get(ADAPTER)
    if not isinstance(found, Registration):
        raise AdapterDefinitionError(
            f"adapter {cls.__name__}", "class", "is not a @seq.adapter class: decorate it with @seq.adapter"
        )
    return found
