"""A `@seq.*` class's `init=`: held to the Sequences SDK's rules where it is written, then said in Yardstick's
words so that `yardstick.sdk.construct` fills it.

Only the names of the evaluated policy's fields differ: the contract's benchmark writes
`{policy.action_chunk_valid_len}` and `{policy.action_chunk_replan_at}` where Yardstick's writes
`{policy.action_chunk_len}` and `{policy.action_chunk_exec_len}` (the same numbers: the rows of an answer
that play, the step it is asked again at). Forms inside a config file are read when the class is built and
are not renamed, so a config file names Yardstick's fields.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Iterator
from typing import Any, Final

from yardstick.hosted.seq_api.errors import SeqAuthoringError
from yardstick.sdk.construct import CONFIG_KEY, FORMS, SET_KEY, is_config

# The contract's policy fields, and Yardstick's names for them.
SEQ_FIELDS: Final = {
    "hz": "hz",
    "action_chunk_valid_len": "action_chunk_len",
    "action_chunk_replan_at": "action_chunk_exec_len",
}
# The names the SDK retired (contract 0.5.35), refused with their new ones.
RENAMED: Final = {
    "action_chunk_len": "action_chunk_valid_len",
    "action_chunk_exec_len": "action_chunk_replan_at",
}


def arguments(init: Any, owner: str, error: type[SeqAuthoringError]) -> tuple[list[Any], dict[str, Any]]:
    """init= as (args, kwargs): a dict by name, or a list by position."""
    if isinstance(init, dict) and not is_config(init):
        if not all(isinstance(k, str) for k in init):
            raise error(owner, "init", "its keys are the constructor's argument names")
        return [], dict(init)
    if isinstance(init, (list, tuple)):
        return list(init), {}
    raise error(
        owner,
        "init",
        'is the constructor\'s arguments: a dict by name (init={"cfg": ...}) or a list by position, '
        f"not {type(init).__name__}",
    )


def check_benchmark(value: Any, owner: str, worlds: int | None, error: type[SeqAuthoringError]) -> None:
    """A benchmark's forms: "{num_worlds}" only when it is vectorized, and then somewhere;
    "{policy.<field>}" of the contract's fields; no "{weights}"."""
    named_worlds = False
    for form in _forms(value):
        text = form.group(0)
        if form.group("worlds"):
            if worlds is None:
                raise error(
                    owner,
                    "init",
                    f"names {text}, how many worlds a vectorized benchmark builds: mark its @seq.step "
                    "@seq.concurrent(sizes=[N]); a benchmark of one world an instance takes none",
                )
            named_worlds = True
        elif form.group("field") is not None:
            field = form.group("field")
            if field in RENAMED:
                raise error(owner, "init", f"names {text}, which is now {{policy.{RENAMED[field]}}}")
            if field not in SEQ_FIELDS:
                raise error(owner, "init", f"names {text}; a policy declares {', '.join(SEQ_FIELDS)}")
        else:
            raise error(owner, "init", f"names {text}, and a benchmark has no weights")
    if worlds is not None and not named_worlds:
        raise error(
            owner,
            "init",
            f"it is vectorized (@seq.concurrent(sizes=[{worlds}]) on its step): its constructor builds the "
            'worlds, handed how many by init= - init={"worlds": "{num_worlds}"}',
        )


def check_policy(value: Any, owner: str, error: type[SeqAuthoringError]) -> None:
    """A policy's forms: its weights' directory only, never a benchmark's."""
    for form in _forms(value):
        if form.group("worlds") or form.group("field") is not None:
            raise error(
                owner,
                "init",
                f"names {form.group(0)}, which a benchmark's init= is handed; a policy's names {{weights}}",
            )


def renamed(value: Any) -> Any:
    """`value` with the contract's policy fields written as Yardstick's, at any depth."""
    if is_config(value):
        return {CONFIG_KEY: value[CONFIG_KEY], SET_KEY: renamed(value[SET_KEY])}
    if isinstance(value, dict):
        return {k: renamed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [renamed(v) for v in value]
    if isinstance(value, str):
        return FORMS.sub(_ours, value)
    return value


def check_fits(
    cls: type,
    args: list[Any],
    kwargs: dict[str, Any],
    given: bool,
    owner: str,
    error: type[SeqAuthoringError],
    fills: str,
) -> None:
    """That the constructor can be called with init=, or with nothing when there is none."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        if not given:
            needed = ", ".join(
                f'"{p.name}": ...'
                for p in signature.parameters.values()
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            )
            raise error(
                owner,
                "init",
                f"{cls.__name__}{signature} is built with no arguments unless init= hands it "
                f"some - init={{{needed}}}, {fills}",
            ) from None
        raise error(owner, "init", f"does not fit {cls.__name__}{signature}: {exc}") from None


def check_configs(cls: type, value: Any, owner: str, error: type[SeqAuthoringError]) -> None:
    """Every seq.config(...) names a file beside the class's file."""
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    folder = os.path.dirname(os.path.abspath(file)) if file else os.getcwd()
    for ref in _configs(value):
        path = os.path.join(folder, ref[CONFIG_KEY])
        if not os.path.isfile(path):
            raise error(
                owner, "init", f"seq.config({ref[CONFIG_KEY]!r}): no such file beside its file ({path})"
            )


def _ours(form: Any) -> str:
    field = form.group("field")
    if field is not None and field in SEQ_FIELDS:
        return f"{{policy.{SEQ_FIELDS[field]}}}"
    return str(form.group(0))


def _forms(value: Any) -> Iterator[Any]:
    if isinstance(value, str):
        yield from FORMS.finditer(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _forms(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _forms(v)


def _configs(value: Any) -> Iterator[dict[str, Any]]:
    if is_config(value):
        yield value
        yield from _configs(value[SET_KEY])
    elif isinstance(value, dict):
        for v in value.values():
            yield from _configs(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _configs(v)
