"""Filling in a constructor's arguments, then calling it.

A class says how it is built with a `Constructor`: positional and keyword arguments, and optionally a factory
(`make`). Before the call the arguments are prepared in two steps:

1. A config value, `{"$config": "conf.yaml", "$set": {...}}` (see `config`), is replaced by that file's
   contents, read relative to the folder of the class's file, with `$set` laid over its top-level keys.
2. Forms inside strings are filled in: `{weights}` and `{weights.<part>}` (where the policy's weights are),
   `{num_worlds}` (how many worlds a vectorized benchmark builds) and `{policy.<field>}` (what the evaluated
   policy declares). A string that is one form and nothing else becomes the value itself, keeping its type;
   a form inside longer text is replaced by the value as text.

Every refusal raises `ConstructError`, naming the offending path, form, part or field and the rule it breaks.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeAlias

import yaml

from yardstick.sdk.errors import ConstructError
from yardstick.sdk.specs import POLICY_FIELDS, Constructor

CONFIG_KEY = "$config"
SET_KEY = "$set"
CONFIG_SUFFIXES = (".json", ".yml", ".yaml")

FORMS = re.compile(
    r"\{(?:"
    r"weights(?:\.(?P<part>[A-Za-z_][A-Za-z0-9_-]*))?"
    r"|(?P<worlds>num_worlds)"
    r"|policy\.(?P<field>[A-Za-z_][A-Za-z0-9_]*)"
    r")\}"
)

Directory: TypeAlias = str | os.PathLike[str]
# One directory, or named parts ({"encoder": dir, "decoder": dir}), or None for a policy without weights.
Weights: TypeAlias = Directory | Mapping[str, Directory] | None


def config(path: str, **overrides: Any) -> dict[str, Any]:
    """A config value: the file at `path` (relative to the folder of the class's file) with `overrides`
    replacing its top-level keys. It is read when the class is built, not here."""
    if not isinstance(path, str) or not path:
        raise ConstructError(
            f"config({path!r}): a config file is named by a non-empty path string, "
            "relative to the folder of the class's file"
        )
    # The class may be built on another machine or in another folder; only a relative path travels with it.
    if os.path.isabs(path):
        raise ConstructError(
            f"config({path!r}): the path is absolute; give it relative to the folder of the class's file"
        )
    return {CONFIG_KEY: path, SET_KEY: dict(overrides)}


def is_config(value: object) -> bool:
    """Whether `value` is a config value as `config` makes it."""
    return (
        isinstance(value, dict) and set(value) == {CONFIG_KEY, SET_KEY} and isinstance(value[CONFIG_KEY], str)
    )


def read_config(path: Directory) -> Any:
    """The contents of a .json, .yml or .yaml file."""
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in CONFIG_SUFFIXES:
        raise ConstructError(
            f"{file}: a config file ends in .json, .yml or .yaml, not {suffix or 'nothing'!r}"
        )
    if not file.is_file():
        raise ConstructError(
            f"{file}: no such config file (a config path is relative to the folder of the class's file)"
        )
    kind = "JSON" if suffix == ".json" else "YAML"
    try:
        text = file.read_text(encoding="utf-8")
        return json.loads(text) if kind == "JSON" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConstructError(f"{file}: cannot be read as UTF-8 {kind}: {exc}") from exc


def expand(
    value: Any,
    *,
    base_dir: Directory,
    weights: Weights = None,
    worlds: int | None = None,
    policy: object = None,
) -> Any:
    """`value` with its config values read (relative to `base_dir`) and its forms filled in, at any depth.

    `weights` fills `{weights}` / `{weights.<part>}`; `worlds` fills `{num_worlds}`; `policy` (a mapping or an
    object with the fields of `POLICY_FIELDS`, or None when no policy is evaluated) fills `{policy.<field>}`.
    Tuples come back as lists; dict keys are left as they are.
    """

    def fill(item: Any) -> Any:
        if is_config(item):
            # The file may itself hold forms (and config values), so its contents are filled in too.
            return fill(_load(item, base_dir))
        if isinstance(item, dict):
            return {key: fill(inner) for key, inner in item.items()}
        if isinstance(item, (list, tuple)):
            return [fill(inner) for inner in item]
        if isinstance(item, str):
            return _fill_string(item, weights, worlds, policy)
        return item

    return fill(value)


def build(
    cls: type,
    constructor: Constructor,
    *,
    base_dir: Directory,
    weights: Weights = None,
    worlds: int | None = None,
    policy: object = None,
    params: Mapping[str, Any] | None = None,
) -> Any:
    """An instance of `cls`, made by `constructor` with its arguments expanded (see `expand`) and `params`
    replacing or adding keyword arguments (they are not expanded)."""

    def fill(value: Any) -> Any:
        return expand(value, base_dir=base_dir, weights=weights, worlds=worlds, policy=policy)

    args = fill(list(constructor.args))
    kwargs: dict[str, Any] = {}
    for name, raw in constructor.kwargs.items():
        value = fill(raw)
        # A policy that leaves a field undeclared (or no policy at all, as when a benchmark is checked on its
        # own) should not force None on the constructor: leaving the keyword out lets its own default hold.
        if value is None and _is_policy_form(raw):
            continue
        kwargs[name] = value
    kwargs.update(params or {})
    return maker(cls, constructor.make)(*args, **kwargs)


def maker(cls: type, make: str | None) -> Callable[..., Any]:
    """What is called to build an instance: `cls` itself for no `make`, its classmethod or staticmethod
    `make`, or for make="package.module:function" that module's function (the module is imported here)."""
    if not make:
        return cls
    module_name, colon, name = make.rpartition(":")
    if not colon:
        return _factory_method(cls, make)
    return _module_function(make, module_name, name)


def _load(value: dict[str, Any], base_dir: Directory) -> Any:
    path, overrides = value[CONFIG_KEY], value[SET_KEY]
    if not isinstance(overrides, Mapping):
        raise ConstructError(
            f"{path}: {SET_KEY} maps top-level keys to the values that replace them, "
            f"not a {type(overrides).__name__}"
        )
    loaded = read_config(Path(base_dir) / path)
    if not overrides:
        return loaded
    if not isinstance(loaded, dict):
        raise ConstructError(
            f"{path}: the file holds a {type(loaded).__name__}, not a mapping, so {SET_KEY} "
            f"has no keys to replace ({', '.join(map(str, overrides))})"
        )
    return {**loaded, **overrides}


def _fill_string(text: str, weights: Weights, worlds: int | None, policy: object) -> Any:
    alone = FORMS.fullmatch(text)
    if alone:
        # Alone, the form keeps its value's type: "{num_worlds}" hands the constructor 8, not "8".
        return _value_of(alone, weights, worlds, policy)
    return FORMS.sub(lambda form: str(_value_of(form, weights, worlds, policy)), text)


def _value_of(form: re.Match[str], weights: Weights, worlds: int | None, policy: object) -> Any:
    if form.group("worlds") is not None:
        if worlds is None:
            raise ConstructError(
                "{num_worlds}: no number of worlds is handed here; only a vectorized "
                "benchmark, which builds several worlds in its constructor, is given one"
            )
        return worlds
    field = form.group("field")
    if field is not None:
        return _policy_field(field, policy)
    return _weights_dir(form.group(0), form.group("part"), weights)


def _policy_field(field: str, policy: object) -> Any:
    if field not in POLICY_FIELDS:
        raise ConstructError(
            f"{{policy.{field}}}: a policy has no field {field!r}; the fields are {', '.join(POLICY_FIELDS)}"
        )
    if policy is None:
        return None
    if isinstance(policy, Mapping):
        return policy.get(field)
    return getattr(policy, field, None)


def _weights_dir(form: str, part: str | None, weights: Weights) -> str:
    if weights is None:
        raise ConstructError(f"{form}: there are no weights to fill it in; the policy declares no weights=")
    if isinstance(weights, Mapping):
        parts = ", ".join(sorted(weights))
        if part is None:
            raise ConstructError(
                f"{form}: the weights come in named parts ({parts}); name one as {{weights.<part>}}"
            )
        if part not in weights:
            raise ConstructError(f"{form}: the weights have no part {part!r}; the parts are {parts}")
        return str(weights[part])
    if part is not None:
        raise ConstructError(f"{form}: the weights are one directory, not named parts; write {{weights}}")
    return str(weights)


def _is_policy_form(raw: object) -> bool:
    alone = FORMS.fullmatch(raw) if isinstance(raw, str) else None
    return alone is not None and alone.group("field") is not None


def _factory_method(cls: type, make: str) -> Callable[..., Any]:
    try:
        found: Callable[..., Any] = getattr(cls, make)
    except AttributeError:
        raise ConstructError(
            f"make={make!r}: {cls.__name__} has no attribute {make!r}; a make= without ':' "
            "names a classmethod or staticmethod of the class"
        ) from None
    if not callable(found):
        raise ConstructError(
            f"make={make!r}: {cls.__name__}.{make} is a {type(found).__name__}, "
            "not callable; make= names a classmethod or staticmethod"
        )
    return found


def _module_function(make: str, module_name: str, name: str) -> Callable[..., Any]:
    # Checked first so a malformed name is refused plainly instead of by importlib's ValueError or TypeError.
    if not all(piece.isidentifier() for piece in module_name.split(".")):
        raise ConstructError(
            f"make={make!r}: {module_name!r} is not a module name; write make='package.module:function'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConstructError(f"make={make!r}: module {module_name} cannot be imported ({exc})") from exc
    try:
        found: Callable[..., Any] = getattr(module, name)
    except AttributeError:
        raise ConstructError(f"make={make!r}: module {module_name} has no function {name!r}") from None
    if not callable(found):
        raise ConstructError(f"make={make!r}: {module_name}.{name} is a {type(found).__name__}, not callable")
    return found
