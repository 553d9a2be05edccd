"""`@seq.policy(...)`: the Sequences SDK's policy declaration, made a Yardstick policy.

The contract's timing is said in Yardstick's words: `action_chunk_valid_len` (the rows of an answer that
play; all of them when unset) is `action_chunk_len`, `action_chunk_replan_at` (the step of a chunk it is
asked again at; its last valid row when unset) is `action_chunk_exec_len`, and an answer asked before the
valid rows run out plays once they have (`prefetch`), the world paused until it comes. The marks mean what
the contract says: `@seq.reset` on a policy is handed nothing when an episode starts, `@seq.on_episode`
the episode (or nothing) when it ends. `weights=` an uploaded volume (`"vol://NAME"`,
`seq.Volume.from_name(NAME)`, or {part: either}) fills `"{weights}"` with where the platform mounted it
(`$YARDSTICK_VOLUMES`), else with the SDK's mount (`/data`, `/data/<part>`). The other deployment-only
arguments are kept in `cls.__seq__`.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, Final, TypeVar

import yardstick.sdk.decorators as ys
from yardstick.hosted import mounts
from yardstick.hosted.params import INFER_PLATFORM, ParamError, check_names, keyword_params
from yardstick.hosted.seq_api import forms
from yardstick.hosted.seq_api.declarations import Volume, plain
from yardstick.hosted.seq_api.errors import PolicyDefinitionError
from yardstick.hosted.seq_api.marks import (
    CONCURRENT,
    INFER,
    MOST_SIZES,
    OBSERVE,
    ON_EPISODE,
    RESET,
    SAMPLE,
    SHUTDOWN,
    bindings,
    method,
)
from yardstick.sdk.episode import OBSERVES_EACH
from yardstick.sdk.errors import SpecError

_C = TypeVar("_C", bound=type)
SEQ: Final = "__seq__"
OWNER: Final = "@seq.policy"
# The contract's bound on a chunk length: what "all of its rows" plays as when valid_len is unset.
MAX_CHUNK: Final = 100_000
DEPLOYMENT: Final = (
    "gpu",
    "image",
    "weights",
    "secrets",
    "deps",
    "freeze",
    "min_workers",
    "buffer_workers",
    "max_gpus",
    "cpu",
    "memory",
    "timeouts",
    "io",
    "models",
    "family",
    "gpus_per_replica",
    "replica_start",
    "tensors",
)
ALLOWED: Final = frozenset(
    {"name", "hz", "action_chunk_valid_len", "action_chunk_replan_at", "init", *DEPLOYMENT}
)
PLAYS_HOW: Final = (
    "@seq.policy(hz=15, action_chunk_valid_len=15, action_chunk_replan_at=8) - hz the steps a second its "
    "answers play at, action_chunk_valid_len the steps of an answer that are valid, action_chunk_replan_at "
    "the step at which the next answer is asked for"
)
RENAMED: Final = {
    "action_chunk_len": "action_chunk_valid_len",
    "action_chunk_exec_len": "action_chunk_replan_at",
}
NAMED_METHODS: Final = ("infer", "observe", "reset", "end", "sample")
NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# Where @seq.reset's start hook goes on the class: Yardstick's @on_episode, handing the episode on to nothing.
START_HOOK: Final = "__seq_episode_starts__"


class Policy:
    """The base class a policy may subclass (`class MyPolicy(seq.Policy)`); it carries no behaviour."""


def policy(*args: Any, **kwargs: Any) -> Callable[[_C], _C]:
    """`@seq.policy(hz=10, action_chunk_valid_len=8, action_chunk_replan_at=4, gpu="L4", ...)`."""
    if args:
        raise PolicyDefinitionError(OWNER, "arguments", "is called with them: @seq.policy(hz=..., ...)")
    for name in kwargs:
        if name in RENAMED:
            raise PolicyDefinitionError(OWNER, name, f"is now {RENAMED[name]}: {PLAYS_HOW}")
        if name in NAMED_METHODS:
            raise PolicyDefinitionError(
                OWNER, name, "names no method: mark it with its decorator (@seq.infer, ...)"
            )
        if name == "make":
            raise PolicyDefinitionError(
                OWNER, name, "is gone: a policy is built by its class's constructor (init=)"
            )
        if name not in ALLOWED:
            raise PolicyDefinitionError(
                OWNER, name, f"is not an argument; they are {', '.join(sorted(ALLOWED))}"
            )
    if "hz" not in kwargs:
        raise PolicyDefinitionError(
            OWNER, "hz", f"is needed, the steps a second its answers play at: {PLAYS_HOW}"
        )

    def decorate(cls: _C) -> _C:
        return _register(cls, dict(kwargs))

    return decorate


def _register(cls: _C, kw: dict[str, Any]) -> _C:
    if SEQ in cls.__dict__:
        raise PolicyDefinitionError(OWNER, cls.__name__, "is applied once to a class")
    name = kw.get("name") or default_name(cls.__name__)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise PolicyDefinitionError(
            OWNER,
            "name",
            f"is 1-64 letters, digits, '_' or '-', starting with a letter or digit, not {name!r}",
        )
    owner = f"policy {name}"
    hz, valid, replan = _timing(kw, owner)
    bound = bindings(cls, "policy", PolicyDefinitionError)
    for flag, where in bound.items():
        if flag not in (INFER, OBSERVE, RESET, ON_EPISODE, SAMPLE, SHUTDOWN):
            raise PolicyDefinitionError(
                owner, where, f"@seq.{flag} is not a policy's: a policy answers with @seq.infer"
            )
    if INFER not in bound:
        raise PolicyDefinitionError(
            owner, "infer", "a policy marks one method @seq.infer: def infer(self, obs)"
        )
    infer = method(cls, bound[INFER])
    observes = OBSERVE in bound
    if observes:
        _check_observed(cls, bound, owner)
    else:
        _check_infer(infer, bound[INFER], owner)
    sizes = _sizes(cls, bound[INFER], owner)
    if observes and sizes:
        raise PolicyDefinitionError(
            owner,
            bound[INFER],
            "@seq.concurrent on a policy that observes is not run by Yardstick yet: batch an infer that "
            "takes the observation, or observe without @seq.concurrent",
        )
    given = "init" in kw and kw["init"] is not None
    args, kwargs = forms.arguments(kw["init"], owner, PolicyDefinitionError) if given else ([], {})
    forms.check_policy([args, kwargs], owner, PolicyDefinitionError)
    forms.check_fits(
        cls, args, kwargs, given, owner, PolicyDefinitionError, '"{weights}" its weights\' directory'
    )
    forms.check_configs(cls, [args, kwargs], owner, PolicyDefinitionError)
    try:
        params = keyword_params(
            infer, f"{cls.__name__}.{bound[INFER]}", skip=INFER_PLATFORM, skip_first=not observes, loose=True
        )
        check_names(params, owner)
    except ParamError as exc:
        raise PolicyDefinitionError(owner, exc.field, exc.rule) from None

    if params:
        infer = _handed_infer_params(cls, bound[INFER], infer, set(params))
    if observes:
        infer = _observed_infer(cls, bound[OBSERVE], bound[INFER])
    ys.infer(infer)
    _episode_hooks(cls, bound)
    chunk = valid if valid is not None else MAX_CHUNK
    try:
        decorated = ys.policy(
            hz=hz,
            action_chunk_len=chunk,
            action_chunk_exec_len=replan,
            batch_sizes=sizes,
            init=(kwargs if kwargs else args) if given else None,
            name=name,
            prefetch=replan is not None and replan < chunk,
            weights=weights_dirs(kw.get("weights")),
        )(cls)
    except SpecError as exc:
        raise PolicyDefinitionError(exc.owner, exc.field, exc.rule) from None
    keep_declaration(
        decorated,
        "policy",
        name,
        kw,
        hz=hz,
        action_chunk_valid_len=valid,
        action_chunk_replan_at=replan,
        params={n: p.to_dict() for n, p in params.items()},
    )
    return decorated


def keep_declaration(cls: type, kind: str, name: str, kw: dict[str, Any], **fields: Any) -> None:
    """What only the hosted platform reads of a `@seq.policy` or `@seq.planner` class, kept on it (`SEQ`):
    its kind and name, the arguments as written, the deployment's own, and the kind's `fields`."""
    setattr(
        cls,
        SEQ,
        {
            "kind": kind,
            "name": name,
            "arguments": {k: plain(v) for k, v in kw.items()},
            "deployment": {k: plain(kw[k]) for k in DEPLOYMENT if k in kw},
            **fields,
        },
    )


def weights_dirs(declared: Any) -> str | dict[str, str] | None:
    """Where the declared weights are in the box: one folder, or one a part."""
    if declared is None:
        return None
    if isinstance(declared, dict):
        return {str(part): _weights_dir(uri, str(part)) for part, uri in declared.items()}
    return _weights_dir(declared, None)


def _weights_dir(uri: Any, part: str | None) -> str:
    found = mounts.volume_ref(uri) if isinstance(uri, str) else None
    name = uri.name if isinstance(uri, Volume) else found[0] if found else None
    if name is not None:
        try:
            return str(mounts.where(name))
        except LookupError:
            pass  # not mounted here (a local run): the SDK's place, as on its platform
    return str(mounts.WEIGHTS / part) if part else str(mounts.WEIGHTS)


def _handed_infer_params(cls: type, name: str, infer: Callable[..., Any], names: set[str]) -> Any:
    """The SDK declares a policy's parameters on its infer method; Yardstick hands a policy its parameters at
    construction (an eval's `policy.<name>`, a deployment's `params.<name>`). So the constructor takes them by
    name and every infer call is handed them, unless the call names them itself. Returns the new infer."""
    built = cls.__init__  # type: ignore[misc]
    built_signature = inspect.signature(built)

    @functools.wraps(built)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        self.__seq_infer_params__ = {key: kwargs.pop(key) for key in list(kwargs) if key in names}
        built(self, *args, **kwargs)

    takes = [p for p in built_signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    keywords = [p for p in takes if p.kind is p.KEYWORD_ONLY]
    rest = [p for p in takes if p.kind is not p.KEYWORD_ONLY]
    infer_signature = inspect.signature(infer).parameters
    handed = [
        infer_signature[key].replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for key in infer_signature
        if key in names and key not in built_signature.parameters
    ]
    __init__.__signature__ = built_signature.replace(parameters=[*rest, *keywords, *handed])  # type: ignore[attr-defined]

    @functools.wraps(infer)
    def handed_infer(self: Any, *args: Any, **kwargs: Any) -> Any:
        return infer(self, *args, **{**getattr(self, "__seq_infer_params__", {}), **kwargs})

    cls.__init__ = __init__  # type: ignore[misc]
    setattr(cls, name, handed_infer)
    return handed_infer


# Where a policy that observes keeps the method Yardstick asks: observe the observation, then infer.
OBSERVED_INFER: Final = "__seq_observed_infer__"


def _platform_names(fn: Any) -> set[str]:
    """Which of the platform's arguments (`step`, `episode`) a method takes by name."""
    params = inspect.signature(fn).parameters
    keywords = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {name for name in ("step", "episode") if keywords or name in params}


def _check_observed(cls: type, bound: dict[str, str], owner: str) -> None:
    """An @seq.observe method takes one observation (with `step=` and `episode=` when it names them); the
    @seq.infer of a class that observes takes nothing but its platform arguments and parameters."""
    for flag, hands in ((OBSERVE, 1), (INFER, 0)):
        name = bound[flag]
        params = list(inspect.signature(method(cls, name)).parameters.values())[1:]
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        required = [p for p in positional if p.default is p.empty]
        takes_more = any(p.kind is p.VAR_POSITIONAL for p in params)
        if len(required) > hands or (len(positional) < hands and not takes_more):
            said = (
                "each observation - def observe(self, obs, *, step=None, episode=None)"
                if flag == OBSERVE
                else "nothing but episode= and its parameters: its observations went to @seq.observe"
            )
            raise PolicyDefinitionError(owner, name, f"is handed {said}")


def _observed_infer(cls: type, observe_name: str, infer_name: str) -> Callable[..., Any]:
    """The method Yardstick asks of a policy that observes: the observation the eval asks with goes to its
    @seq.observe method (with the step it was made at, and the episode, when it takes them), then its
    @seq.infer answers from what it kept. An eval asks at each chunk's replan step, so observe is handed the
    observations the policy is asked with, one per answer."""
    observe_takes = _platform_names(method(cls, observe_name))
    infer_takes = _platform_names(method(cls, infer_name))

    def observed_infer(self: Any, obs: Any, *, episode: Any) -> Any:
        # A robot's observations made since its last act, each in order, then the one it acts on.
        earlier, episode.earlier = list(getattr(episode, "earlier", ())), []
        again, episode.again = bool(getattr(episode, "again", False)), False
        for step, seen in [*earlier, *([] if again else [(episode.step, obs)])]:
            platform = {"step": step, "episode": episode}
            getattr(self, observe_name)(seen, **{k: v for k, v in platform.items() if k in observe_takes})
        platform = {"step": episode.step, "episode": episode}
        return getattr(self, infer_name)(**{k: v for k, v in platform.items() if k in infer_takes})

    observed_infer.__qualname__ = f"{cls.__qualname__}.{infer_name}"
    setattr(cls, OBSERVED_INFER, observed_infer)
    setattr(cls, OBSERVES_EACH, True)
    return observed_infer


def default_name(class_name: str) -> str:
    """A policy's name when it gives none, as the SDK makes it: MyReacher → my-reacher."""
    kebab = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", class_name.strip("_"))
    return re.sub(r"[_-]+", "-", kebab).lower()


def _timing(kw: dict[str, Any], owner: str) -> tuple[float, int | None, int | None]:
    hz = kw["hz"]
    if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not 0 < hz <= 1000:
        raise PolicyDefinitionError(
            owner, "hz", f"is the steps a second its answers play at, above 0 and at most 1000, not {hz!r}"
        )
    lengths: list[int | None] = []
    for field in ("action_chunk_valid_len", "action_chunk_replan_at"):
        value = kw.get(field)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHUNK
        ):
            raise PolicyDefinitionError(
                owner, field, f"is a whole number of steps from 1 to {MAX_CHUNK}, not {value!r}"
            )
        lengths.append(value)
    valid, replan = lengths
    if valid is not None and replan is not None and replan > valid:
        raise PolicyDefinitionError(
            owner,
            "action_chunk_replan_at",
            f"{replan} is more than action_chunk_valid_len {valid}: the next answer is needed no later "
            "than the step this one's valid rows run out",
        )
    return float(hz), valid, replan


def _check_infer(fn: Any, name: str, owner: str) -> None:
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not positional and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise PolicyDefinitionError(owner, name, "takes the observation: def infer(self, obs, *, seed=None)")
    if "instruction" in {p.name for p in params}:
        raise PolicyDefinitionError(
            owner, name, "no longer takes `instruction`: read the task from the observation it is handed"
        )
    required = [p for p in positional if p.default is p.empty]
    if len(required) > 1:
        raise PolicyDefinitionError(
            owner,
            name,
            "takes its inputs by name, which Yardstick does not run yet: take them whole, def "
            f"{name}(self, obs) and read obs[...]",
        )


def _sizes(cls: type, infer: str, owner: str) -> list[int] | None:
    for name, member in vars(cls).items():
        if name != infer and getattr(member, CONCURRENT, None):
            raise PolicyDefinitionError(owner, name, "@seq.concurrent goes on the @seq.infer method")
    declared = getattr(method(cls, infer), CONCURRENT, None)
    if not declared:
        return None
    sizes = list(declared["sizes"])
    if any(n > MOST_SIZES for n in sizes) or sizes != sorted(set(sizes)) or sizes[0] != 1:
        raise PolicyDefinitionError(
            owner,
            infer,
            f"@seq.concurrent(sizes={sizes}) lists each size once, ascending, 1 first, at most {MOST_SIZES}",
        )
    return sizes


def _episode_hooks(cls: type, bound: dict[str, str]) -> None:
    """@seq.reset (handed nothing when an episode starts) as Yardstick's @on_episode, and @seq.on_episode
    (handed the episode, or nothing, when it ends) as its @on_episode_end."""
    if RESET in bound:
        reset_name = bound[RESET]

        def start(self: Any, episode: Any) -> Any:
            return getattr(self, reset_name)()

        start.__qualname__ = f"{cls.__qualname__}.{reset_name}"
        setattr(cls, START_HOOK, ys.on_episode(start))
    if ON_EPISODE in bound:
        end = method(cls, bound[ON_EPISODE])
        params = list(inspect.signature(end).parameters.values())[1:]
        takes = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        wrong = [p.name for p in takes if p.name != "episode" and p.default is p.empty]
        if wrong:
            raise PolicyDefinitionError(
                f"policy {cls.__name__}",
                bound[ON_EPISODE],
                f"takes {' and '.join(wrong)}: an episode's end hands it the episode alone - def "
                f"{bound[ON_EPISODE]}(self, episode), or def {bound[ON_EPISODE]}(self)",
            )
        ys.on_episode_end(end)
