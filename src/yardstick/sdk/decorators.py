"""`@benchmark` and `@policy` on a class, and the marks on its methods.

    @yardstick.benchmark(tasks={"reach": "Reach the goal"}, seeds=range(10), max_seconds=5.0,
                         init={"hz": "{policy.hz}"})
    class Reach:
        def __init__(self, hz=20): ...
        @yardstick.reset
        def start(self, task, seed): return obs
        @yardstick.step
        def play(self, action): return obs, done, success    # or (obs, done, success, metrics)

    @yardstick.policy(hz=20, action_chunk_len=8, action_chunk_exec_len=4)
    class MyPolicy:
        @yardstick.infer
        def act(self, obs, *, episode, seed): return chunk  # rows of actions, the first played first

A vectorized benchmark puts `@concurrent(sizes=[N])` on its step; its reset then takes (worlds, tasks, seeds),
its step (worlds, actions) and returns one tuple a world. A policy that accepts batches says so with
`batch_sizes=[...]`: its infer is then handed lists (observations, episodes, seeds) and returns a chunk each.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from yardstick.sdk.errors import SpecError
from yardstick.sdk.specs import BenchmarkSpec, Constructor, PolicySpec, ReplaySpec, validated

_C = TypeVar("_C", bound=type)
_F = TypeVar("_F", bound=Callable[..., Any])

_ROLE = "__yardstick_role__"
_SIZES = "__yardstick_sizes__"
_SPEC = "__yardstick_spec__"

BENCHMARK_ROLES = ("reset", "step")
POLICY_ROLES = ("infer", "on_episode", "on_episode_end")


def _mark(role: str) -> Callable[[_F], _F]:
    def mark(fn: _F) -> _F:
        if not callable(fn):
            raise SpecError(role, type(fn).__name__, f"@{role} goes on a method")
        setattr(fn, _ROLE, role)
        return fn

    mark.__name__ = role
    mark.__doc__ = f"Mark the method that is the class's {role}."
    return mark


reset = _mark("reset")
step = _mark("step")
infer = _mark("infer")
on_episode = _mark("on_episode")
# Called when an episode ends, handed the episode or nothing: where a policy frees what it kept for it.
on_episode_end = _mark("on_episode_end")


def concurrent(*, sizes: Iterable[int]) -> Callable[[_F], _F]:
    """On a benchmark's step: it steps up to max(sizes) worlds a call."""
    chosen = list(sizes)
    if not chosen or any(not isinstance(n, int) or n < 1 for n in chosen):
        raise SpecError(
            "concurrent", "sizes", "lists the worlds one call steps, each an int of at least 1: sizes=[8]"
        )

    def mark(fn: _F) -> _F:
        setattr(fn, _SIZES, tuple(chosen))
        return fn

    return mark


def _marked(cls: type, roles: tuple[str, ...], owner: str) -> dict[str, str]:
    """{role: method name} for the marked methods of `cls` and its bases, each role at most once."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for name, member in vars(klass).items():
            fn = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
            role = getattr(fn, _ROLE, None)
            if role is None:
                continue
            if role not in roles:
                raise SpecError(
                    owner,
                    name,
                    f"@{role} marks a method of a "
                    f"{'policy' if role in POLICY_ROLES else 'benchmark'}, not of this class",
                )
            if role in found and found[role] != name and klass is cls:
                raise SpecError(owner, name, f"one method is marked @{role}; {found[role]} is already")
            found[role] = name
    return found


def _positional(fn: Callable[..., Any]) -> int | None:
    """How many positional parameters `fn` takes after self; None if it takes any number."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _takes(fn: Callable[..., Any], count: int) -> bool:
    """Whether `fn` (a method) can be called with exactly `count` positional arguments after self: extra
    parameters with defaults are fine, a required one it would not be handed is not."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    keyword_required = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    star = any(p.kind is p.VAR_POSITIONAL for p in params)
    return (len(positional) >= count or star) and len(required) <= count and not keyword_required


def benchmark(
    *,
    tasks: dict[str, str],
    seeds: Iterable[int],
    max_seconds: float | dict[str, float],
    init: Any = None,
    make: str | None = None,
    name: str | None = None,
    action_space: tuple[Iterable[float], Iterable[float]] | None = None,
    replay: ReplaySpec | dict[str, Any] | None = None,
) -> Callable[[_C], _C]:
    """Declare a class a benchmark. `action_space` (low, high), when given, is shown to policies that
    sample. `replay` says how its episodes are recorded in 3D (`ReplaySpec`: which simulator, the method
    answering its state, the method saying its looks)."""

    def decorate(cls: _C) -> _C:
        owner = f"benchmark {name or cls.__name__}"
        roles = _marked(cls, BENCHMARK_ROLES, owner)
        for role, shape in (
            ("reset", "def reset(self, task, seed) -> observation"),
            ("step", "def step(self, action) -> (observation, done, success[, metrics])"),
        ):
            if role not in roles:
                raise SpecError(owner, role, f"a benchmark marks one method @{role}: {shape}")
        step_fn = getattr(cls, roles["step"])
        sizes: tuple[int, ...] | None = getattr(step_fn, _SIZES, None)
        expected = {"reset": 3, "step": 2} if sizes else {"reset": 2, "step": 1}
        shapes = (
            {"reset": "(worlds, tasks, seeds)", "step": "(worlds, actions)"}
            if sizes
            else {"reset": "(task, seed)", "step": "(action)"}
        )
        for role in BENCHMARK_ROLES:
            method = getattr(cls, roles[role])
            if not _takes(method, expected[role]):
                kind = "a vectorized benchmark's" if sizes else "its"
                raise SpecError(
                    owner,
                    roles[role],
                    f"{kind} @{role} takes {shapes[role]}, not {_positional(method)} arguments",
                )
        space = None
        if action_space is not None:
            low, high = action_space
            space = (tuple(float(v) for v in low), tuple(float(v) for v in high))
        spec = validated(
            BenchmarkSpec,
            name=name or cls.__name__,
            tasks=dict(tasks),
            seeds=tuple(seeds),
            max_seconds=max_seconds,
            constructor=Constructor.of(init, make),
            reset_method=roles["reset"],
            step_method=roles["step"],
            worlds=max(sizes) if sizes else None,
            action_space=space,
            replay=replay,
        )
        for role in ("state", "looks"):
            named = getattr(spec.replay, role) if spec.replay is not None else None
            if named is not None and not callable(getattr(cls, named, None)):
                raise SpecError(owner, f"replay.{role}", f"names a method of the class; it has no {named}")
        setattr(cls, _SPEC, spec)
        return cls

    return decorate


def policy(
    *,
    hz: float,
    action_chunk_len: int = 1,
    action_chunk_exec_len: int | None = None,
    batch_sizes: Iterable[int] | None = None,
    init: Any = None,
    make: str | None = None,
    weights: str | dict[str, str] | None = None,
    session_params: dict[str, Any] | None = None,
    image_sizes: dict[str, tuple[int, int]] | None = None,
    name: str | None = None,
    prefetch: bool = False,
) -> Callable[[_C], _C]:
    """Declare a class a policy. `weights` is where its weights are (a directory, or {part: directory}),
    which init= hands its constructor as "{weights}" or "{weights.<part>}". `session_params` are the
    settings a session may choose, with their defaults (each episode reads its own in `episode.params`);
    `image_sizes` ({observation key: (height, width)}) tells remote clients what to send. `prefetch`: the
    policy is asked `action_chunk_exec_len` steps into a chunk and its answer plays once that chunk's
    `action_chunk_len` rows have played (the Sequences way), rather than at once."""

    def decorate(cls: _C) -> _C:
        owner = f"policy {name or cls.__name__}"
        roles = _marked(cls, POLICY_ROLES, owner)
        if "infer" not in roles:
            raise SpecError(owner, "infer", "a policy marks one method @infer: def infer(self, obs) -> chunk")
        infer_fn = getattr(cls, roles["infer"])
        params = inspect.signature(infer_fn).parameters
        taken = _positional(infer_fn)
        if taken is not None and taken < 1:
            raise SpecError(
                owner, roles["infer"], "@infer takes the observation: def infer(self, obs) -> chunk"
            )
        takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
        keywords = frozenset(k for k in ("episode", "seed") if takes_all or k in params)
        if "on_episode" in roles:
            hook = getattr(cls, roles["on_episode"])
            if _positional(hook) not in (None, 1):
                raise SpecError(
                    owner, roles["on_episode"], "@on_episode takes the episode: def start(self, episode)"
                )
        if "on_episode_end" in roles and not (
            _takes(getattr(cls, roles["on_episode_end"]), 1)
            or _takes(getattr(cls, roles["on_episode_end"]), 0)
        ):
            raise SpecError(
                owner,
                roles["on_episode_end"],
                "@on_episode_end takes the episode or nothing: def end(self, episode) or def end(self)",
            )
        spec = validated(
            PolicySpec,
            name=name or cls.__name__,
            hz=hz,
            action_chunk_len=action_chunk_len,
            action_chunk_exec_len=action_chunk_exec_len,
            batch_sizes=tuple(batch_sizes) if batch_sizes is not None else None,
            constructor=Constructor.of(init, make),
            weights=weights,
            session_params=dict(session_params or {}),
            image_sizes=dict(image_sizes or {}),
            infer_method=roles["infer"],
            on_episode_method=roles.get("on_episode"),
            on_episode_end_method=roles.get("on_episode_end"),
            infer_keywords=keywords,
            prefetch=prefetch,
        )
        setattr(cls, _SPEC, spec)
        return cls

    return decorate


# What the Sequences SDK's own decorators leave on a class: a `seq` other than Yardstick's was imported.
_REAL_SEQ = {"@benchmark": "__seq_benchmark__", "@policy": "__seq_registration__"}


def _not_ours(cls: type, mark: str, rule: str) -> SpecError:
    if _REAL_SEQ[mark] in cls.__dict__:
        rule = (
            "is decorated by an installed sequence-ai's seq, imported before Yardstick's: load the file "
            "through Yardstick (yardstick eval run -b file.py:Class), which imports its own seq"
        )
    return SpecError(f"class {cls.__qualname__}", mark, rule)


def benchmark_spec(cls: type) -> BenchmarkSpec:
    spec = cls.__dict__.get(_SPEC)
    if not isinstance(spec, BenchmarkSpec):
        raise _not_ours(cls, "@benchmark", "is not a benchmark: decorate it with @benchmark(...)")
    return spec


def policy_spec(cls: type) -> PolicySpec:
    spec = cls.__dict__.get(_SPEC)
    if not isinstance(spec, PolicySpec):
        raise _not_ours(cls, "@policy", "is not a policy: decorate it with @policy(hz=...)")
    return spec
