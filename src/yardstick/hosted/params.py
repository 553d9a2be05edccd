"""The parameters an eval may set on hosted code, read from how the code is written.

A benchmark's are its constructor's keyword arguments with a default that `init=` leaves unfilled
(`def __init__(self, worlds, *, noise_std: float = 0.02)` with `init={"worlds": "{num_worlds}"}` declares
`noise_std`); a policy's are its infer's keyword arguments beside the observation and what the engine hands
it (`seed`, `episode`). Each has a type — int, float, bool or str, from its annotation, else its default's —
a default, and optionally bounds: `Annotated[int, Range(1, 10)]`, `Annotated[str, OneOf("a", "b")]`. These
are the Sequences contract's rules (its `InferParam`), written here so that Yardstick's own `seq` and the
build check read them the same way.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

TYPES: Final[dict[str, type]] = {"int": int, "float": float, "bool": bool, "str": str}
MAX_PARAMS: Final = 32
MAX_CHOICES: Final = 64
# What the engine hands a policy's infer itself: never a parameter an eval sets.
INFER_PLATFORM: Final = frozenset({"seed", "episode"})


class Range:
    """`Annotated[int, Range(1, 10)]`: a number parameter's bounds, inclusive (None: open on that side)."""

    def __init__(self, min: float | None = None, max: float | None = None) -> None:
        self.min, self.max = min, max


class OneOf:
    """`Annotated[str, OneOf("fast", "careful")]`: the only values a parameter may take."""

    def __init__(self, *values: Any) -> None:
        self.values = list(values)


@dataclass(frozen=True)
class Param:
    """One settable parameter: its type, its default, and what values it allows."""

    type: str
    default: Any = None
    min: float | None = None
    max: float | None = None
    choices: list[Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The contract's InferParam shape: the bounds left out where there are none."""
        out: dict[str, Any] = {"type": self.type, "default": self.default}
        for key in ("min", "max", "choices"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


class ParamError(ValueError):
    """A parameter that breaks the rules: `field` names it, the message says the rule."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


def keyword_params(
    fn: Callable[..., Any],
    where: str,
    *,
    skip: Iterable[str] = (),
    skip_first: bool = False,
    loose: bool = False,
) -> dict[str, Param]:
    """The parameters of `fn` (after `self`) an eval may set. `skip` names what is handed otherwise,
    `skip_first` leaves out the first positional one (a policy's observation). `loose` is for a class's own
    constructor, written for itself: an argument of no settable type, or without a default, is simply not
    a parameter there, where elsewhere it is refused."""
    skipped = set(skip)
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return {}
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # annotations that do not evaluate: read each one as it is written
        hints = {}
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    first = next((p for p in params if p.kind in positional), None) if skip_first else None
    found: dict[str, Param] = {}
    for p in params:
        if p is first or p.name in skipped or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        field = f"{where}: parameter {p.name!r}"
        if p.kind is p.POSITIONAL_ONLY:
            if loose:
                continue
            raise ParamError(field, "is positional-only; a parameter is set by name")
        if p.default is p.empty:
            if loose:
                continue
            raise ParamError(field, "has no default; a parameter needs one")
        hint, marks = hints.get(p.name, p.annotation), ()
        if typing.get_origin(hint) is typing.Annotated:
            hint, marks = typing.get_args(hint)[0], tuple(hint.__metadata__)
        kind = param_type(hint, p.default)
        if kind is None:
            if loose:
                continue
            raise ParamError(field, "annotate it as int, float, bool or str")
        default = p.default
        if default is not None:
            if kind == "float" and type(default) is int:
                default = float(default)
            elif type(default) is not TYPES[kind]:
                if loose:
                    continue
                raise ParamError(field, f"its default {default!r} is not a {kind}")
        found[p.name] = checked(field, _bounded(kind, default, marks))
    return found


def constructor_params(
    cls: type, args: Sequence[Any], kwargs: Mapping[str, Any], owner: str
) -> dict[str, Param]:
    """The keyword arguments with a default of `cls`'s own constructor that init= (`args` by position,
    `kwargs` by name) leaves for an eval to set; {} for a class with no constructor of its own."""
    init = getattr(cls, "__init__", object.__init__)
    if init is object.__init__ or not inspect.isfunction(init):
        return {}
    given = set(kwargs)
    if args:
        positional = [
            p.name
            for p in list(inspect.signature(init).parameters.values())[1:]
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        given |= set(positional[: len(args)])
    found = keyword_params(init, f"{cls.__name__}.__init__", skip=given, loose=True)
    check_names(found, owner)
    return found


def checked(field: str, param: Param) -> Param:
    """`param`, when its bounds fit its type and its default is among what it allows."""
    numeric = param.type in ("int", "float")
    if (param.min is not None or param.max is not None) and not numeric:
        raise ParamError(field, f"Range bounds a number; a {param.type} parameter takes OneOf choices")
    if param.min is not None and param.max is not None and param.min > param.max:
        raise ParamError(field, f"its Range has min {param.min} above max {param.max}")
    if param.choices is not None and not 1 <= len(param.choices) <= MAX_CHOICES:
        raise ParamError(field, f"OneOf lists 1 to {MAX_CHOICES} choices")
    if param.default is not None and not allows(param, param.default):
        raise ParamError(field, f"its default {param.default!r} is outside what it allows ({says(param)})")
    return param


def check_names(params: dict[str, Param], owner: str) -> None:
    """At most MAX_PARAMS parameters, each a public Python identifier (the contract's rule)."""
    if len(params) > MAX_PARAMS:
        raise ParamError(f"{owner}: params", f"at most {MAX_PARAMS} parameters, not {len(params)}")
    for name in params:
        if not name.isidentifier() or name.startswith("_"):
            raise ParamError(f"{owner}: params[{name!r}]", "a parameter's name is a public Python identifier")


def allows(param: Param, value: Any) -> bool:
    if param.choices is not None and value not in param.choices:
        return False
    if param.min is not None and value < param.min:
        return False
    return not (param.max is not None and value > param.max)


def says(param: Param) -> str:
    """What a parameter allows, in words."""
    if param.choices is not None:
        return "one of " + ", ".join(repr(c) for c in param.choices)
    if param.min is not None and param.max is not None:
        return f"from {param.min} to {param.max}"
    if param.min is not None:
        return f"at least {param.min}"
    if param.max is not None:
        return f"at most {param.max}"
    return f"any {param.type}"


def param_type(annotation: Any, default: Any) -> str | None:
    """int / float / bool / str from an annotation (`int`, `"int"`, `int | None`, `Optional[int]`), else from
    the default's own type; None when it is none of those."""
    if annotation is not inspect.Parameter.empty and annotation is not None:
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
        if not isinstance(annotation, str | type):
            text = str(annotation)
        text = text.replace("typing.", "").replace("Optional[", "").rstrip("]").strip().strip("'\"")
        parts = {part.strip().strip("'\"") for part in text.split("|")} - {"None", "NoneType"}
        return next(iter(parts)) if len(parts) == 1 and next(iter(parts)) in TYPES else None
    for kind, cls in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if type(default) is cls:
            return kind
    return None


def _bounded(kind: str, default: Any, marks: tuple[Any, ...]) -> Param:
    low = high = None
    choices = None
    for mark in marks:
        if isinstance(mark, Range):
            low, high = mark.min, mark.max
        elif isinstance(mark, OneOf):
            choices = list(mark.values)
    return Param(type=kind, default=default, min=low, max=high, choices=choices)
