"""An `EvalRequest` resolved into the core's `RunPlan`: which benchmark and policy, which tasks, how many
trials of each and at which seeds, which parameters, which arms. Pure: the caller hands it what the caller
may name.

- Trial k of a task runs `seeds[k % len(seeds)]`; a trial past the last seed repeats one (`repeats`).
- `params` name a side: `benchmark.x` (its constructor's open parameters), `policy.x` (the policy's),
  `adapter.x` (the adapter's constructor's, when the eval names one), `eval.x` (the eval loop's own:
  `eval.max_seconds`); a bare name is the one side that declares it.
- `sweep` lays each combination of its values over the params: one arm each (at most `MAX_ARMS`), every arm
  playing the same episodes, so arms compare on the same seeds and are never pooled.
- Every problem found is reported at once, one sentence each, naming the field and the rule."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yardstick.core import limits
from yardstick.core.catalog import CatalogEval
from yardstick.core.refusals import bad_request, not_found
from yardstick.core.runs import BenchmarkTarget, EndpointTarget, PlannedEpisode, RunPlan
from yardstick.engine.plan import seed_of_trial
from yardstick.sequences.models import EvalRequest, InferParam, Scalar
from yardstick.store.states import TargetKind

MAX_ARMS = 8
SIDES = ("benchmark", "policy", "adapter", "eval")
EVAL_PARAMS = {"max_seconds": InferParam(type="float", min=0.001)}


@dataclass(frozen=True)
class OfferedBenchmark:
    """A benchmark an eval may name: its tasks (name → description), seeds, each task's limit, the parameters
    its constructor leaves open, what the engine builds, and the catalogue eval it ranks under (None:
    none)."""

    name: str
    version: int
    tasks: Mapping[str, str]
    seeds: tuple[int, ...]
    max_seconds: Mapping[str, float]
    params: Mapping[str, InferParam]
    target: BenchmarkTarget
    catalog: CatalogEval | None = None
    # The catalogue's id of each task where it differs from its name (a catalogue eval's task ids).
    task_ids: Mapping[str, str] = field(default_factory=dict)
    # The templates its code was made from (`seq init`), which an adapter's pairs may name.
    templates: frozenset[str] = frozenset()
    # The engine its 3D replay declares (`seq.Replay(engine=...)`), None when it declares none.
    replay_engine: str | None = None


@dataclass(frozen=True)
class OfferedPolicy:
    """A policy an eval may name: how a run reaches it, its version, the parameters it declares."""

    name: str
    version: int
    kind: TargetKind
    spec: str
    params: Mapping[str, InferParam]
    wire: str = "websocket"
    # What its owner set for every episode (`seq policy set NAME params.x=...`), under an eval's own.
    defaults: Mapping[str, Scalar] = field(default_factory=dict)
    templates: frozenset[str] = frozenset()


@dataclass(frozen=True)
class OfferedAdapter:
    """The adapter version an eval runs between its benchmark and its policy, and what its constructor
    declares."""

    name: str
    version: int
    version_id: int
    params: Mapping[str, InferParam]


@dataclass(frozen=True)
class Arm:
    number: int
    policy_params: dict[str, Scalar]
    benchmark_params: dict[str, Scalar]
    eval_params: dict[str, Scalar]
    adapter_params: dict[str, Scalar] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"arm-{self.number}"

    def shown(self) -> dict[str, Scalar]:
        """Every parameter the arm sets, by its side's name (`policy.temp`)."""
        return {
            **{f"benchmark.{k}": v for k, v in self.benchmark_params.items()},
            **{f"policy.{k}": v for k, v in self.policy_params.items()},
            **{f"adapter.{k}": v for k, v in self.adapter_params.items()},
            **{f"eval.{k}": v for k, v in self.eval_params.items()},
        }


@dataclass(frozen=True)
class TaskSelection:
    task: str
    seeds: tuple[int, ...]
    trials: int

    @property
    def repeats(self) -> int:
        return max(0, self.trials - len(self.seeds))


@dataclass(frozen=True)
class Resolved:
    """An eval resolved: the core's plan, its arms, the selection per task (for the dry run's layout)."""

    plan: RunPlan
    arms: tuple[Arm, ...]
    selection: tuple[TaskSelection, ...]
    benchmark: OfferedBenchmark
    policy: OfferedPolicy
    adapter: OfferedAdapter | None = None

    def arm_params(self) -> list[dict[str, Any]]:
        """Each arm's parameters as the contract's report has them (`ArmParams`): every one each side
        declares, with the value the arm ran with and its source - the eval (`cli`) where it set one, else
        the declaring side's default (the platform's, for the eval loop's own)."""
        declared = {
            "policy": self.policy.params,
            "adapter": self.adapter.params if self.adapter is not None else {},
            "benchmark": self.benchmark.params,
            "eval": EVAL_PARAMS,
        }
        shown = []
        for arm in self.arms:
            set_here = {
                "policy": arm.policy_params,
                "adapter": arm.adapter_params,
                "benchmark": arm.benchmark_params,
                "eval": arm.eval_params,
            }
            row: dict[str, Any] = {"arm": arm.number}
            for side, params in declared.items():
                row[side] = {
                    name: {"value": set_here[side][name], "source": "cli"}
                    if name in set_here[side]
                    else {"value": param.default, "source": _default_source(side, param)}
                    for name, param in params.items()
                }
            shown.append(row)
        return shown

    def layout(self) -> dict[str, Any]:
        """What the dry run shows: the selection an arm plays (episodes, tasks, seeds, repeats, limits) and
        the arms."""
        return {
            "selection": {
                "episodes": sum(s.trials for s in self.selection),
                "tasks": [
                    {"task": s.task, "seeds": list(s.seeds), "episodes": s.trials, "repeats": s.repeats}
                    for s in self.selection
                ],
                "repeats": sum(s.repeats for s in self.selection),
                "max_seconds": self.limits(),
            },
            "policy": [{"model": self.policy.name, "machines": 1, "gpu": "cpu", "cards_each": 0}],
            "benchmark": {"machines_per_arm": 1, "gpu": "cpu"},
            "adapter": (
                None if self.adapter is None else {"name": self.adapter.name, "version": self.adapter.version}
            ),
            "arms": [{"arm": a.number, "model": self.policy.name, "params": a.shown()} for a in self.arms],
        }

    def first(self, keep: int) -> Resolved:
        """The same eval cut to `keep` episodes (a spend cap): the lowest trials of every task and arm, so
        what is kept still compares the arms on the same seeds and covers every task it can."""
        order = sorted(self.plan.episodes, key=lambda e: (e.trial, e.task_pos, e.endpoint))
        kept = {e.index for e in order[:keep]}
        episodes = tuple(e for e in self.plan.episodes if e.index in kept)
        return dataclasses.replace(self, plan=dataclasses.replace(self.plan, episodes=episodes))

    def unreplayed(self) -> Resolved:
        """The same eval, recording no 3D replay of its episodes (`replay: none`); its videos and
        trajectories as before."""
        recording = self.plan.benchmark.recording
        kept = {**recording, "replay": False} if recording else recording
        target = dataclasses.replace(self.plan.benchmark, recording=kept)
        return dataclasses.replace(self, plan=dataclasses.replace(self.plan, benchmark=target))

    def limits(self) -> dict[str, Any]:
        """How long an episode may run, each arm's beside the benchmark's own (one figure where its tasks
        agree): an arm that sets `eval.max_seconds` is not a standard eval."""
        own = sorted({self.benchmark.max_seconds[s.task] for s in self.selection})
        default = own[0] if len(own) == 1 else None
        arms = []
        for arm in self.arms:
            value = arm.eval_params.get("max_seconds", default)
            arms.append({"arm": arm.number, "value": value, "standard": "max_seconds" not in arm.eval_params})
        return {"default": default, "per_task": dict(self.benchmark.max_seconds), "arms": arms}


def resolve(
    request: EvalRequest,
    benchmark: OfferedBenchmark,
    policy: OfferedPolicy,
    *,
    adapter: OfferedAdapter | None = None,
    only: Sequence[tuple[str, int]] | None = None,
) -> Resolved:
    """Resolve `request` on `benchmark` with `policy`. `only` (task, seed) pairs replace the selection: a
    rerun of what did not succeed. Raises a `Refusal` naming every problem."""
    problems: list[str] = []
    arms = _arms(request, benchmark, policy, adapter, problems)
    selection = (
        _selection(request, benchmark, problems) if only is None else _pairs(only, benchmark, problems)
    )
    per_arm = sum(s.trials for s in selection)
    if per_arm * len(arms) > limits.EPISODES_PER_PLAN:
        problems.append(
            f"trials: {per_arm * len(arms):,} episodes ({per_arm:,} an arm, {len(arms)} arm(s)) is more than"
            f" the platform's {limits.EPISODES_PER_PLAN:,} an eval: ask fewer trials or tasks"
        )
    if problems:
        raise bad_request("; ".join(problems))
    episodes: list[PlannedEpisode] = []
    endpoints: dict[str, EndpointTarget] = {}
    for arm in arms:
        endpoints[arm.endpoint] = EndpointTarget(
            name=arm.endpoint,
            kind=policy.kind,
            wire=policy.wire,
            spec=policy.spec,
            params={**policy.defaults, **arm.policy_params},
            benchmark_params=arm.benchmark_params,
            adapter=(
                None
                if adapter is None
                else {"version_id": adapter.version_id, "params": dict(arm.adapter_params)}
            ),
            # The contract's eval.max_seconds replaces the benchmark's limit, above it as well as below.
            max_seconds=(float(arm.eval_params["max_seconds"]) if "max_seconds" in arm.eval_params else None),
        )
    for pos, chosen in enumerate(selection):
        task_id = benchmark.task_ids.get(chosen.task, chosen.task)
        for trial in range(chosen.trials):
            seed = seed_of_trial(chosen.seeds, trial)[0]
            # Every arm plays trial k before any plays k+1: arms progress side by side.
            for arm in arms:
                limit = float(arm.eval_params.get("max_seconds", benchmark.max_seconds[chosen.task]))
                episodes.append(
                    PlannedEpisode(
                        index=len(episodes),
                        task_pos=pos,
                        task_id=task_id,
                        benchmark_task=chosen.task,
                        endpoint=arm.endpoint,
                        trial=trial,
                        seed=seed,
                        cap_s=limit,
                    )
                )
    plan = RunPlan(
        episodes=tuple(episodes),
        endpoints=endpoints,
        benchmark=benchmark.target,
        eval=benchmark.catalog,
        sampled=only is not None,
    )
    return Resolved(plan, tuple(arms), tuple(selection), benchmark, policy, adapter)


def _selection(request: EvalRequest, benchmark: OfferedBenchmark, problems: list[str]) -> list[TaskSelection]:
    offered = list(benchmark.tasks)
    tasks = list(request.tasks) if request.tasks is not None else offered
    unknown = [t for t in tasks if t not in benchmark.tasks]
    if unknown:
        problems.append(
            f"tasks: {', '.join(map(repr, unknown))} is not a task of {benchmark.name}"
            f" (it has {', '.join(offered)})"
        )
    named = [t for t in tasks if t in benchmark.tasks]
    for what, value in (("trials", request.trials), ("seeds", request.seeds)):
        if isinstance(value, dict):
            stray = [t for t in value if t != "*" and t not in benchmark.tasks]
            if stray:
                problems.append(f"{what}: {', '.join(map(repr, stray))} is not a task of {benchmark.name}")
    chosen = []
    for task in named:
        seeds = _per_task(request.seeds, task)
        if seeds is None:
            seeds = list(benchmark.seeds)
        foreign = [s for s in seeds if s not in benchmark.seeds]
        if foreign:
            problems.append(
                f"seeds{_where(request.seeds, task)}: {foreign} are not seeds of {benchmark.name}:"
                f" an eval picks among its {len(benchmark.seeds)} seeds"
            )
            continue
        trials = _per_task(request.trials, task)
        chosen.append(TaskSelection(task, tuple(seeds), len(seeds) if trials is None else int(trials)))
    return chosen


def _pairs(
    only: Sequence[tuple[str, int]], benchmark: OfferedBenchmark, problems: list[str]
) -> list[TaskSelection]:
    """The selection a rerun replays: each task's seeds in the order they come, one trial each."""
    by_task: dict[str, list[int]] = {}
    for task, seed in only:
        if task not in benchmark.tasks:
            problems.append(f"rerun: task {task!r} is no longer a task of {benchmark.name}")
            continue
        by_task.setdefault(task, []).append(seed)
    if not by_task and not problems:
        problems.append("rerun_unsuccessful_of: every episode of that eval succeeded: nothing to rerun")
    return [TaskSelection(task, tuple(seeds), len(seeds)) for task, seeds in by_task.items()]


def _per_task(value: Any, task: str) -> Any:
    if isinstance(value, dict):
        return value.get(task, value.get("*"))
    return value


def _where(value: Any, task: str) -> str:
    return f"[{task!r}]" if isinstance(value, dict) and task in value else ""


def _default_source(side: str, param: InferParam) -> str:
    """Who gives a parameter the arm left alone: its declaring side, the eval loop's the platform - but an
    unset limit of the loop's is each task's own, the benchmark's."""
    if side != "eval":
        return side
    return "platform" if param.default is not None else "benchmark"


def _arms(
    request: EvalRequest,
    benchmark: OfferedBenchmark,
    policy: OfferedPolicy,
    adapter: OfferedAdapter | None,
    problems: list[str],
) -> list[Arm]:
    declared = {
        "benchmark": benchmark.params,
        "policy": policy.params,
        "adapter": adapter.params if adapter is not None else {},
        "eval": EVAL_PARAMS,
    }
    fixed: dict[tuple[str, str], Scalar] = {}
    for key, value in (request.params or {}).items():
        placed = _place(f"params[{key!r}]", key, declared, problems)
        if placed is not None and _fits(f"params[{key!r}]", declared[placed[0]][placed[1]], value, problems):
            fixed[placed] = value
    swept: list[tuple[tuple[str, str], list[Scalar]]] = []
    for key, options in (request.sweep or {}).items():
        placed = _place(f"sweep[{key!r}]", key, declared, problems)
        if placed is None:
            continue
        if not options:
            problems.append(f"sweep[{key!r}]: names at least one value")
            continue
        if all(_fits(f"sweep[{key!r}]", declared[placed[0]][placed[1]], v, problems) for v in options):
            swept.append((placed, list(options)))
    combinations = list(itertools.product(*(options for _, options in swept))) if swept else [()]
    if len(combinations) > MAX_ARMS:
        problems.append(
            f"sweep: {len(combinations)} arms, at most {MAX_ARMS} (the product of its value lists)"
        )
        return []
    arms = []
    for number, combination in enumerate(combinations):
        values = dict(fixed)
        values.update({placed: value for (placed, _), value in zip(swept, combination, strict=True)})
        by_side: dict[str, dict[str, Scalar]] = {side: {} for side in SIDES}
        for (side, name), value in values.items():
            by_side[side][name] = value
        arms.append(Arm(number, by_side["policy"], by_side["benchmark"], by_side["eval"], by_side["adapter"]))
    return arms


def _place(
    field_name: str, key: str, declared: Mapping[str, Mapping[str, InferParam]], problems: list[str]
) -> tuple[str, str] | None:
    """Which side's parameter `key` names: `side.name`, or a bare name one side alone declares."""
    side, dot, name = key.partition(".")
    if dot and side in SIDES:
        if name not in declared[side]:
            known = ", ".join(declared[side]) or "none"
            problems.append(f"{field_name}: {side} declares no parameter {name!r} (it declares {known})")
            return None
        return side, name
    sides = [s for s in SIDES if key in declared[s]]
    if len(sides) == 1:
        return sides[0], key
    if sides:
        problems.append(
            f"{field_name}: {key!r} is declared by {' and '.join(sides)}: name one, as {sides[0]}.{key}"
        )
    else:
        problems.append(
            f"{field_name}: no side declares a parameter {key!r} (benchmark.x, policy.x, adapter.x or eval.x)"
        )
    return None


def _fits(field_name: str, param: InferParam, value: Scalar, problems: list[str]) -> bool:
    """Whether `value` is one `param` takes: its type (an int for a float is fine), bounds, choices."""
    kinds = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}[param.type]
    wrong_kind = isinstance(value, bool) and param.type != "bool"
    if wrong_kind or not isinstance(value, kinds) or (isinstance(value, float) and not math.isfinite(value)):
        problems.append(f"{field_name}: {value!r} is not a {param.type}")
        return False
    if param.min is not None and isinstance(value, int | float) and value < param.min:
        problems.append(f"{field_name}: {value!r} is below its minimum {param.min}")
        return False
    if param.max is not None and isinstance(value, int | float) and value > param.max:
        problems.append(f"{field_name}: {value!r} is above its maximum {param.max}")
        return False
    if param.choices is not None and value not in param.choices:
        problems.append(f"{field_name}: {value!r} is not one of {param.choices}")
        return False
    return True


def setting_value(field_name: str, declared: Any, value: Any, problems: list[str]) -> Scalar | None:
    """A `params.<name>` setting's value as its parameter declares it, or None with the problem said: the
    CLI sends text it could not read as a number or a truth as text, and the platform casts it to the
    declared type (a number or a truth for a `str` parameter as its text)."""
    try:
        param = InferParam.model_validate(declared)
    except ValueError:
        return value if isinstance(value, int | float | bool | str) else None
    cast: Any = value
    if isinstance(value, str) and param.type in ("int", "float"):
        try:
            cast = int(value) if param.type == "int" else float(value)
        except ValueError:
            problems.append(f"{field_name}: {value!r} is not a {param.type}")
            return None
    elif isinstance(value, str) and param.type == "bool" and value.lower() in ("true", "false"):
        cast = value.lower() == "true"
    elif param.type == "str" and isinstance(value, int | float | bool):
        cast = str(value).lower() if isinstance(value, bool) else str(value)
    if param.type == "float" and isinstance(cast, int) and not isinstance(cast, bool):
        cast = float(cast)
    return cast if _fits(field_name, param, cast, problems) else None


def unknown(what: str, name: str, offered: Sequence[str]) -> Exception:
    return not_found(f"{what}: no {what} {name!r} that you can run; on offer: {', '.join(offered) or 'none'}")
