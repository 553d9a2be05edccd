"""The declarations a benchmark and a policy make, as typed records, and the rules they must keep.

The records are what the rest of Yardstick reads (the engine, the CLI, the platform's catalogue);
the decorators in `decorators.py` build them from a class. Every rule refuses with a `SpecError` that names
the field and the rule.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from yardstick.sdk.errors import SpecError

TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}")
TASK_NAME_RULE = "1-128 letters, digits, '.', '_', '/', ':' or '-', starting with a letter or digit"
TASK_DESCRIPTION_MAX = 300
MAX_WORLDS = 65536

# The fields of a policy that a benchmark's init= may name as "{policy.<field>}".
POLICY_FIELDS = ("hz", "action_chunk_len", "action_chunk_exec_len")


class Constructor(BaseModel):
    """How a class is built: `make` (a classmethod's name, "package.module:function", or None for the class
    itself) called with `args` and `kwargs` once their forms are filled (see `construct.py`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = Field(default_factory=dict)
    make: str | None = None

    @classmethod
    def of(cls, init: Any = None, make: str | None = None) -> Constructor:
        """init= as the decorators take it: a dict by name, a list by position, or None."""
        if init is None:
            return cls(make=make)
        if isinstance(init, dict):
            bad = [k for k in init if not isinstance(k, str) or not k.isidentifier()]
            if bad:
                raise SpecError(
                    "constructor", f"init[{bad[0]!r}]", "a keyword argument is named by a Python identifier"
                )
            return cls(kwargs=dict(init), make=make)
        if isinstance(init, (list, tuple)):
            return cls(args=tuple(init), make=make)
        raise SpecError(
            "constructor",
            "init",
            f"is the constructor's arguments, a dict by name or a list by position, "
            f"not {type(init).__name__}",
        )


# The replay engines Yardstick records: MuJoCo, read from the simulation, and "own", the frames a benchmark
# hands over. SAPIEN and Isaac (the contract's too) are declared and kept, and a run asked to record one is
# told it cannot (`engine.worlds`, the Sequences door's eval).
RECORDED_REPLAYS = ("mujoco", "own")


class ReplaySpec(BaseModel):
    """How a benchmark's episodes are recorded as 3D replays (the Sequences contract's `seq.Replay`): `engine`
    the simulator an adapter reads ("mujoco"; "own" when the benchmark hands its frames itself; "sapien" and
    "isaac", declared as the contract says, are not read here: `RECORDED_REPLAYS`); `state` the benchmark's
    method that answers the simulator's state of the episode playing (called with no argument, or with the
    world's index for a vectorized benchmark); `looks` the method, called alike at every frame, that says
    what the adapter cannot read: {node: {"rgba": [r, g, b, a]}} or {node: {"visible": False}} (with "own",
    asked after each frame the benchmark handed, its answer holding beside the frame's own looks)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: Literal["mujoco", "sapien", "isaac", "own"] = "mujoco"
    state: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    looks: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


def names_worlds(constructor: Constructor) -> bool:
    """Whether the constructor is handed "{num_worlds}" anywhere, in a string at any depth."""
    from yardstick.sdk.construct import FORMS

    def walk(value: Any) -> bool:
        if isinstance(value, str):
            return any(m.group("worlds") for m in FORMS.finditer(value))
        if isinstance(value, dict):
            return any(walk(v) for v in value.values())
        if isinstance(value, (list, tuple)):
            return any(walk(v) for v in value)
        return False

    return walk([constructor.args, constructor.kwargs])


class BenchmarkSpec(BaseModel):
    """A benchmark: its tasks, the seeds an episode starts at, an episode's limit on the robot's clock,
    and how its class is built. `worlds` is set for a vectorized benchmark: the most worlds one step call
    takes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    tasks: dict[str, str]
    seeds: tuple[int, ...]
    max_seconds: float | dict[str, float]
    constructor: Constructor = Field(default_factory=Constructor)
    reset_method: str
    step_method: str
    worlds: int | None = Field(default=None, ge=1, le=MAX_WORLDS)
    action_space: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    replay: ReplaySpec | None = None

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds_as_list(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, range) else value

    @model_validator(mode="after")
    def _rules(self) -> BenchmarkSpec:
        owner = f"benchmark {self.name}"
        if not self.tasks:
            raise SpecError(owner, "tasks", "names at least one task: {name: description}")
        for task, text in self.tasks.items():
            if not TASK_NAME.fullmatch(task):
                raise SpecError(owner, f"tasks[{task!r}]", f"a task name is {TASK_NAME_RULE}")
            if len(text) > TASK_DESCRIPTION_MAX:
                raise SpecError(
                    owner,
                    f"tasks[{task!r}]",
                    f"a description is at most {TASK_DESCRIPTION_MAX} characters, not {len(text)}",
                )
        if not self.seeds:
            raise SpecError(owner, "seeds", "names at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            repeated = sorted({s for s in self.seeds if self.seeds.count(s) > 1})
            raise SpecError(owner, "seeds", f"names each seed once; repeated: {repeated}")
        if isinstance(self.max_seconds, dict):
            for task, limit in self.max_seconds.items():
                if task not in self.tasks:
                    raise SpecError(
                        owner, f"max_seconds[{task!r}]", "names a task the benchmark does not have"
                    )
                if not limit > 0:
                    raise SpecError(owner, f"max_seconds[{task!r}]", f"must be above 0 s, not {limit!r}")
            missing = [t for t in self.tasks if t not in self.max_seconds]
            if missing:
                raise SpecError(
                    owner,
                    "max_seconds",
                    f"per task, it gives every task a limit; missing: {', '.join(missing)}",
                )
        elif not self.max_seconds > 0:
            raise SpecError(owner, "max_seconds", f"must be above 0 s, not {self.max_seconds!r}")
        if self.worlds is not None and not names_worlds(self.constructor):
            raise SpecError(
                owner,
                "init",
                "a vectorized benchmark (@concurrent on its step) builds its worlds in its constructor, "
                'handed how many by init= - init={"worlds": "{num_worlds}"}',
            )
        if self.action_space is not None:
            low, high = self.action_space
            if len(low) != len(high) or any(lo > hi for lo, hi in zip(low, high, strict=True)):
                raise SpecError(owner, "action_space", "is (low, high) of equal length with low <= high")
        return self

    def limit(self, task: str) -> float:
        """An episode's limit on the robot's clock for `task`, in seconds."""
        return self.max_seconds[task] if isinstance(self.max_seconds, dict) else self.max_seconds


class PolicySpec(BaseModel):
    """A policy: the rate its actions play at (`hz`), the rows of a chunk that may play open-loop
    (`action_chunk_len`), the step of a chunk at which it is asked again (`action_chunk_exec_len`), whether
    that answer plays at once or after the chunk's rows (`prefetch`), the batch sizes its infer accepts
    (None: one observation a call), and how its class is built."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    hz: float
    action_chunk_len: int = 1
    action_chunk_exec_len: int | None = None
    batch_sizes: tuple[int, ...] | None = None
    constructor: Constructor = Field(default_factory=Constructor)
    # Where its weights are: one directory, or {part: directory}; relative paths from its file's folder.
    weights: str | dict[str, str] | None = None
    # The settings a session may choose (a server reads them from the session's query), with defaults;
    # each episode is told the values it runs with (`Episode.params`).
    session_params: dict[str, Any] = Field(default_factory=dict)
    # Image sizes the policy expects, {observation key: [height, width]}, told to remote clients.
    image_sizes: dict[str, tuple[int, int]] = Field(default_factory=dict)
    infer_method: str = "infer"
    on_episode_method: str | None = None
    on_episode_end_method: str | None = None
    # The keywords its infer takes beside the observation: "episode", "seed".
    infer_keywords: frozenset[str] = frozenset()
    # How an answer meets the chunk playing: False, it plays at once (asked at action_chunk_exec_len);
    # True, it is asked for at action_chunk_exec_len and swapped in once action_chunk_len rows have played
    # (the Sequences contract's action_chunk_replan_at / action_chunk_valid_len).
    prefetch: bool = False

    @model_validator(mode="after")
    def _rules(self) -> PolicySpec:
        owner = f"policy {self.name}"
        if not self.hz > 0:
            raise SpecError(
                owner, "hz", f"the steps a second its actions play at must be above 0, not {self.hz!r}"
            )
        if self.action_chunk_len < 1:
            raise SpecError(
                owner, "action_chunk_len", f"a chunk plays at least 1 step, not {self.action_chunk_len}"
            )
        if (
            self.action_chunk_exec_len is not None
            and not 1 <= self.action_chunk_exec_len <= self.action_chunk_len
        ):
            raise SpecError(
                owner,
                "action_chunk_exec_len",
                f"the step it asks again at is between 1 and action_chunk_len ({self.action_chunk_len}), "
                f"not {self.action_chunk_exec_len}",
            )
        if self.batch_sizes is not None:
            if not self.batch_sizes or any(size < 1 for size in self.batch_sizes):
                raise SpecError(owner, "batch_sizes", "lists at least one batch size, each at least 1")
            if list(self.batch_sizes) != sorted(set(self.batch_sizes)):
                raise SpecError(owner, "batch_sizes", "lists each size once, smallest first")
        return self

    @property
    def replan_every(self) -> int:
        """Steps of a chunk played before the next request."""
        return self.action_chunk_exec_len or self.action_chunk_len

    def fields(self) -> dict[str, Any]:
        """What "{policy.<field>}" reads."""
        return {
            "hz": self.hz,
            "action_chunk_len": self.action_chunk_len,
            "action_chunk_exec_len": self.replan_every,
        }


def validated(model: type[BaseModel], **values: Any) -> Any:
    """`model(**values)`, with a rule's SpecError raised as itself rather than inside pydantic's wrapper."""
    try:
        return model(**values)
    except ValidationError as exc:
        for error in exc.errors():
            cause = (error.get("ctx") or {}).get("error")
            if isinstance(cause, SpecError):
                raise cause from None
        owner = f"{model.__name__.removesuffix('Spec').lower()} {values.get('name', '?')}"
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "declaration"
        raise SpecError(owner, field, first["msg"]) from None
