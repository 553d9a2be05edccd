"""`@seq.benchmark(...)`: the Sequences SDK's benchmark declaration, made a Yardstick benchmark.

The class is held to the SDK's rules where it is written (its arguments, its marks, init=, its parameters),
then `ys.benchmark` is applied, so `benchmark_spec(cls)` reads it and the engine plays it as any other. What
only a deployment needs (gpu, cpu, memory, image, secrets, assets, replay, engine, driver, freeze) is kept
as it was given in `cls.__seq__`, for the registry, and enforced nowhere here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar

import yardstick.sdk.decorators as ys
from yardstick.hosted.params import Param, ParamError, constructor_params
from yardstick.hosted.seq_api import forms
from yardstick.hosted.seq_api.declarations import Replay, plain
from yardstick.hosted.seq_api.errors import BenchmarkDefinitionError
from yardstick.hosted.seq_api.marks import CONCURRENT, RESET, STEP, bindings, method
from yardstick.sdk.errors import SpecError
from yardstick.sdk.specs import MAX_WORLDS, ReplaySpec

_C = TypeVar("_C", bound=type)
SEQ: Final = "__seq__"
DEPLOYMENT: Final = (
    "gpu",
    "cpu",
    "memory",
    "image",
    "secrets",
    "assets",
    "replay",
    "engine",
    "driver",
    "freeze",
)
ALLOWED: Final = frozenset({"name", "tasks", "seeds", "max_seconds", "init", "make", *DEPLOYMENT})
NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
GONE: Final = {
    "conditions": "a benchmark declares tasks={name: description} and seeds=[...]",
    "task_descriptions": "tasks= carries each task's description, tasks={name: description}",
    "max_steps": "an episode runs at most max_seconds on the robot's clock",
    "timeout_s": "an episode runs at most max_seconds on the robot's clock",
    "envs": "a vectorized benchmark puts @seq.concurrent(sizes=[N]) on its @seq.step and builds its "
    'worlds in its constructor, init={"worlds": "{num_worlds}"}',
    "worlds": "a vectorized benchmark puts @seq.concurrent(sizes=[N]) on its @seq.step, N the most worlds "
    'one call steps, and builds them in its constructor, init={"worlds": "{num_worlds}"}',
    "render": "a benchmark declares no recording",
    "success_metric": "the success of an episode's last step is the episode's",
    "default_adapter": "a benchmark names no adapter; an eval names one",
}
OWNER: Final = "@seq.benchmark"
# The engines the contract reads as MuJoCo (`engine=` of the benchmark, or of its seq.Replay).
MUJOCO: Final = frozenset({"mujoco", "robosuite", "libero", "robocasa"})
# And as SAPIEN.
SAPIEN: Final = frozenset({"sapien", "mani_skill"})


def benchmark(*args: Any, **kwargs: Any) -> Callable[[_C], _C]:
    """`@seq.benchmark(tasks={name: description}, seeds=range(50), max_seconds=15.0, init=..., gpu=...)`."""
    if args:
        raise BenchmarkDefinitionError(
            OWNER,
            "arguments",
            "is called with them: @seq.benchmark(tasks={...}, seeds=[...], max_seconds=...)",
        )
    for name in kwargs:
        if name in GONE:
            raise BenchmarkDefinitionError(OWNER, name, f"is gone: {GONE[name]}")
        if name not in ALLOWED:
            raise BenchmarkDefinitionError(
                OWNER, name, f"is not an argument; they are {', '.join(sorted(ALLOWED))}"
            )

    def decorate(cls: _C) -> _C:
        return _register(cls, dict(kwargs))

    return decorate


def _register(cls: _C, kw: dict[str, Any]) -> _C:
    if SEQ in cls.__dict__:
        raise BenchmarkDefinitionError(OWNER, cls.__name__, "is applied once to a class")
    name = kw.get("name") or cls.__name__
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise BenchmarkDefinitionError(
            OWNER,
            "name",
            f"is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit, not {name!r}",
        )
    owner = f"benchmark {name}"
    bound = bindings(cls, "benchmark", BenchmarkDefinitionError)
    for flag, where in bound.items():
        if flag not in (RESET, STEP):
            raise BenchmarkDefinitionError(
                owner, where, f"@seq.{flag} is not a benchmark's: it marks @seq.reset and @seq.step"
            )
    for flag, shape in ((RESET, "def reset(self, task, seed)"), (STEP, "def step(self, action)")):
        if flag not in bound:
            raise BenchmarkDefinitionError(owner, flag, f"a benchmark marks one method @seq.{flag}: {shape}")
    worlds = _worlds(cls, bound[STEP], owner)
    tasks = _tasks(kw.get("tasks"), owner)
    seeds = _seeds(kw.get("seeds"), owner)
    max_seconds = _max_seconds(kw.get("max_seconds"), tasks, owner)
    replay = _replay(cls, kw.get("replay"), kw.get("engine"), owner)
    given = "init" in kw and kw["init"] is not None
    args, kwargs = forms.arguments(kw["init"], owner, BenchmarkDefinitionError) if given else ([], {})
    forms.check_benchmark([args, kwargs], owner, worlds, BenchmarkDefinitionError)
    forms.check_fits(
        cls, args, kwargs, given, owner, BenchmarkDefinitionError, '"{policy.hz}" the policy\'s rate'
    )
    forms.check_configs(cls, [args, kwargs], owner, BenchmarkDefinitionError)
    params = _params(cls, args, kwargs, owner)

    # Yardstick's own marks, now that the class says what its marks mean.
    ys.reset(method(cls, bound[RESET]))
    step = method(cls, bound[STEP])
    ys.step(step)
    if worlds is not None:
        ys.concurrent(sizes=[worlds])(step)
    init = forms.renamed(kwargs if kwargs else args) if given else None
    try:
        decorated = ys.benchmark(
            tasks=tasks,
            seeds=seeds,
            max_seconds=max_seconds,
            init=init,
            make=kw.get("make"),
            name=name,
            replay=replay,
        )(cls)
    except SpecError as exc:
        raise BenchmarkDefinitionError(exc.owner, exc.field, exc.rule) from None
    setattr(
        decorated,
        SEQ,
        {
            "kind": "benchmark",
            "name": name,
            "arguments": {k: plain(v) for k, v in kw.items()},
            "deployment": {k: plain(kw[k]) for k in DEPLOYMENT if k in kw},
            "params": {n: p.to_dict() for n, p in params.items()},
        },
    )
    return decorated


def _replay(cls: type, replay: Any, engine: Any, owner: str) -> ReplaySpec | None:
    """`seq.Replay(...)` as Yardstick records it: MuJoCo read through `state`, or frames the benchmark hands
    over ("own"). Its engine left out is the benchmark's `engine=`, else MuJoCo when it names a `state` (the
    one simulation Yardstick reads). SAPIEN and Isaac are the contract's and declared as it says, and kept
    as declared: an eval asked to record one is refused, naming it (`sequences.filing`); one of another
    engine records none (None)."""
    if replay is None:
        return None
    if not isinstance(replay, Replay):
        raise BenchmarkDefinitionError(owner, "replay", f"is a seq.Replay(...), not {type(replay).__name__}")
    for role in ("state", "looks"):
        wanted = getattr(replay, role)
        if wanted is not None and not callable(getattr(cls, wanted, None)):
            raise BenchmarkDefinitionError(
                owner, f"replay.{role}", f"names {wanted!r}, which is no method of it"
            )
    chosen = replay.engine or (engine if isinstance(engine, str) else None)
    if chosen is None and replay.state is not None:
        chosen = "mujoco"
    adapter: Literal["mujoco", "sapien", "isaac"] | None = (
        "mujoco"
        if chosen in MUJOCO
        else "sapien"
        if chosen in SAPIEN
        else "isaac"
        if chosen == "isaac"
        else None
    )
    if adapter is not None:
        if replay.state is None:
            raise BenchmarkDefinitionError(
                owner,
                "replay.state",
                f'names the method answering the simulation: engine="{chosen}" reads it',
            )
        return ReplaySpec(engine=adapter, state=replay.state, looks=replay.looks)
    if chosen == "own":
        return ReplaySpec(engine="own", state=None, looks=replay.looks)
    return None


def _worlds(cls: type, step: str, owner: str) -> int | None:
    for name, member in vars(cls).items():
        if name != step and getattr(member, CONCURRENT, None):
            raise BenchmarkDefinitionError(
                owner, name, "@seq.concurrent goes on the @seq.step method: @seq.concurrent(sizes=[N])"
            )
    declared = getattr(method(cls, step), CONCURRENT, None)
    if not declared:
        return None
    sizes = list(declared["sizes"])
    if len(sizes) != 1:
        raise BenchmarkDefinitionError(
            owner,
            step,
            f"@seq.concurrent(sizes={sizes}): a benchmark's step takes one size, the most worlds one "
            f"call steps - @seq.concurrent(sizes=[{max(sizes)}])",
        )
    if not 1 <= sizes[0] <= MAX_WORLDS:
        raise BenchmarkDefinitionError(
            owner, step, f"@seq.concurrent: worlds are 1 to {MAX_WORLDS}, not {sizes[0]}"
        )
    return int(sizes[0])


def _tasks(given: Any, owner: str) -> dict[str, str]:
    if given is None:
        raise BenchmarkDefinitionError(owner, "tasks", "is needed: tasks={name: description} ('' for none)")
    if not isinstance(given, dict):
        raise BenchmarkDefinitionError(
            owner, "tasks", f"is {{name: description}}, not a {type(given).__name__}"
        )
    for task, text in given.items():
        if not isinstance(task, str):
            raise BenchmarkDefinitionError(owner, "tasks", f"names each task by a str, not {task!r}")
        if not isinstance(text, str):
            raise BenchmarkDefinitionError(
                owner, f"tasks[{task!r}]", f"is its description, a str, not {text!r}"
            )
    return dict(given)


def _seeds(given: Any, owner: str) -> list[int]:
    if given is None:
        raise BenchmarkDefinitionError(
            owner, "seeds", "is needed: the seeds an episode starts at, e.g. range(50)"
        )
    if isinstance(given, (str, bytes, dict)) or not hasattr(given, "__iter__"):
        raise BenchmarkDefinitionError(
            owner, "seeds", f"is a list of whole numbers, e.g. range(50), not {given!r}"
        )
    seeds = list(given)
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise BenchmarkDefinitionError(owner, "seeds", f"holds whole numbers, not {seed!r}")
    return seeds


def _max_seconds(given: Any, tasks: dict[str, str], owner: str) -> float | dict[str, float]:
    def seconds(value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BenchmarkDefinitionError(owner, field, f"is a number of seconds, not {value!r}")
        return float(value)

    if given is None:
        raise BenchmarkDefinitionError(
            owner, "max_seconds", "is needed: how long an episode may run, in seconds"
        )
    if not isinstance(given, dict):
        return seconds(given, "max_seconds")
    return {str(task): seconds(limit, f"max_seconds[{task!r}]") for task, limit in given.items()}


def _params(cls: type, args: list[Any], kwargs: dict[str, Any], owner: str) -> dict[str, Param]:
    """The constructor's keyword arguments with a default that init= leaves to an eval."""
    try:
        return constructor_params(cls, args, kwargs, owner)
    except ParamError as exc:
        raise BenchmarkDefinitionError(owner, exc.field, exc.rule) from None
