"""Plan resolution: a submitted `EvalPlan` into the contract's `ResolvedPlan` and the episodes to run.

A plan names an eval, which the catalogue expands into its tasks, or states its own tasks (with a grant to
compose). Either way every value is fixed here, once: the tasks, the endpoints each runs and their counts,
the trials and their seeds, the cap and preset, the scene, and the order the episodes run in. Pure logic over
the core's `Catalog`: the answer is the contract's `ResolvedPlan` and the core's `RunPlan` to file.

Every draw (a side for `random`, clutter objects, the episode order) comes from
`random.Random(f"{transaction_key or 'example'}:{task_pos}:{what}")`, so a dry run under a key shows the
draws a submission under the same key then makes, and a run without a key shows an example.

A refusal raises the core's `Refusal`: `not_found` listing (`Listed`) the `evals` or `tasks` that are on
offer, `forbidden` for a composed plan without the grant, `eval_unavailable` for an eval not accepting runs,
and `bad_request` naming the task, the field and the rule. Problems of one kind found over several tasks or
endpoints are reported together, one sentence each.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from platform_client.billing import CreditQuote
from platform_client.enums import CameraVantage, EndpointKind, Placement, RigShape, StartPose
from platform_client.eval_plan import Cascade, Clutter, Endpoint, EvalPlan, NebiusCompetition
from platform_client.responses import ResolvedEndpoint, ResolvedPlan, ResolvedTask
from platform_client.tasks import TaskRef
from positronic_evals.slug import members_by_slug, slug_of

from yardstick.core import limits
from yardstick.core.catalog import Catalog, CatalogEval, CatalogTask
from yardstick.core.ledger import Quote
from yardstick.core.refusals import Listed, Problem, Refusal, RefusalKind, bad_request, forbidden, not_found
from yardstick.core.runs import BenchmarkTarget, EndpointTarget, PlannedEpisode, RunPlan
from yardstick.engine.plan import seed_of_trial
from yardstick.positronic.public_evals import refuse_unhosted
from yardstick.store.states import Audience, TargetKind
from yardstick.wire.address import parse_address

# What starts a served endpoint here: the platform's own policy server.
PROVIDER = "yardstick"
# The preset a task runs under when no level states one.
DEFAULT_PRESET = "default"
# The key draws come from when a plan carries none: the draws are an example.
EXAMPLE_KEY = "example"
# The object sizes a task's kit may declare, for the clutter caps.
OBJECT_SIZES = ("small", "medium", "large")

_SIDES = (Placement.left, Placement.right)
_SCENE_KEYS = frozenset(
    {"tote_placement", "external_cameras", "camera_vantage", "clutter", "objects", "start_pose"}
)

T = TypeVar("T")


@dataclass(frozen=True)
class TaskScene:
    """A task's `scene`, read: what a plan may state for it, and the defaults its catalogue entry gives.

    * `tote_placement: [sides]` — the task has a tote, on one of these sides (`none` too: it may be absent);
    * `external_cameras: {mount: [sides]}` — the external cameras, by the task's mount names;
    * `camera_vantage: "droid"` — the vantage its external cameras look from (a plan may state another);
    * `clutter: {count_min, ...}` — the default clutter bounds; `objects: [names]` or `{name: size}` — the kit
      clutter draws from (sizes `small`, `medium`, `large`, for the caps; a bare list is all small);
    * `start_pose: "nominal"` — the task takes a start pose, this one by default.

    A field the scene does not declare is one the task does not take.
    """

    tote_sides: tuple[Placement, ...] | None
    cameras: Mapping[str, tuple[Placement, ...]]
    takes_vantage: bool
    vantage: CameraVantage | None
    takes_clutter: bool
    clutter: Clutter | None
    objects: tuple[tuple[str, str], ...]
    start_pose: StartPose | None

    @classmethod
    def of(cls, task: CatalogTask) -> TaskScene:
        scene = task.scene
        unknown = sorted(set(scene) - _SCENE_KEYS)
        if unknown:
            raise ValueError(
                f"task {task.task_id!r} scene states {', '.join(unknown)}, which no plan field varies"
            )
        sides = None
        if "tote_placement" in scene:
            sides = tuple(
                _slug(Placement, side, f"task {task.task_id!r} tote side") for side in scene["tote_placement"]
            )
        cameras = {
            str(mount): tuple(
                _slug(Placement, side, f"task {task.task_id!r} camera {mount!r}") for side in offered
            )
            for mount, offered in dict(scene.get("external_cameras") or {}).items()
        }
        vantage = scene.get("camera_vantage")
        clutter = scene.get("clutter")
        objects = scene.get("objects") or ()
        kit = (
            tuple((str(name), str(size)) for name, size in objects.items())
            if isinstance(objects, Mapping)
            else tuple((str(name), "small") for name in objects)
        )
        odd = sorted({size for _, size in kit} - set(OBJECT_SIZES))
        if odd:
            raise ValueError(
                f"task {task.task_id!r} kit sizes {', '.join(odd)}: a size is one of {OBJECT_SIZES}"
            )
        pose = scene.get("start_pose")
        return cls(
            tote_sides=sides,
            cameras=cameras,
            takes_vantage="camera_vantage" in scene or bool(cameras),
            vantage=None
            if vantage is None
            else _slug(CameraVantage, vantage, f"task {task.task_id!r} vantage"),
            takes_clutter="clutter" in scene or "objects" in scene,
            clutter=None if clutter is None else Clutter.model_validate(clutter),
            objects=kit,
            start_pose=None if pose is None else _slug(StartPose, pose, f"task {task.task_id!r} start pose"),
        )


E = TypeVar("E", Placement, CameraVantage, StartPose, RigShape)


def _slug(enum: type[E], value: object, what: str) -> E:
    if isinstance(value, enum):
        return value
    member = members_by_slug(enum).get(str(value))
    if member is None:
        raise ValueError(f"{what} {value!r} is not one of {', '.join(members_by_slug(enum))}")
    return member


# --- the output --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resolution:
    """A plan resolved: the contract's answer, the episodes in run order, the eval, the endpoints named."""

    resolved: ResolvedPlan
    episodes: tuple[PlannedEpisode, ...]
    eval: CatalogEval | None
    endpoints: Mapping[str, Endpoint]
    sampled: bool
    # The deployed policies a served endpoint may name (its spec): the version each one plays.
    deployments: Mapping[str, int] = field(default_factory=dict)
    # What the ledger holds for the run (a pay-as-you-go org's), shown in `resolved` as the contract's quote.
    quote: Quote | None = None

    def with_quote(self, quote: Quote) -> Resolution:
        """The resolution with the credit quote its org is held to (a pay-as-you-go org's)."""
        shown = CreditQuote.model_validate(quote.as_json())
        return dataclasses.replace(
            self, resolved=self.resolved.model_copy(update={"credit_quote": shown}), quote=quote
        )

    def run_plan(self, plan: EvalPlan) -> RunPlan:
        """The run the core files: these episodes, their endpoints as targets, and who the run is for (a
        competition entry ranks on the public board; a private eval on its org's)."""
        public = isinstance(plan.request_type, NebiusCompetition)
        assert self.eval is not None  # a plan names an eval, or composes one eval's tasks
        return RunPlan(
            episodes=self.episodes,
            endpoints={name: _target(entry, self.deployments) for name, entry in self.endpoints.items()},
            benchmark=BenchmarkTarget.of(self.eval),
            eval=self.eval,
            sampled=self.sampled,
            audience=Audience.PUBLIC if public else Audience.ORG,
            rig_shape=None if self.resolved.rig_shape is RigShape.sim else slug_of(self.resolved.rig_shape),
        )


def _target(entry: Endpoint, deployments: Mapping[str, int]) -> EndpointTarget:
    """How the core reaches an endpoint: a served spec the org deployed is its version, served in a box."""
    assert entry.wire is not None  # every entry that names a locator names its wire
    deployed = deployments.get(entry.spec or "") if entry.kind is EndpointKind.served else None
    if entry.kind is EndpointKind.image:
        # The reference as the plan names it: the gateway pins it to a digest before filing (`images`).
        return EndpointTarget(name=entry.name, kind=TargetKind.IMAGE, wire="websocket", spec=str(entry.image))
    if deployed is not None:
        return EndpointTarget(
            name=entry.name, kind=TargetKind.HOSTED, wire=slug_of(entry.wire), spec=str(deployed)
        )
    return EndpointTarget(
        name=entry.name,
        kind=TargetKind.SERVED if entry.kind is EndpointKind.served else TargetKind.REMOTE,
        wire=slug_of(entry.wire),
        address=(
            parse_address(slug_of(entry.wire), entry.model_dump(mode="json")["address"])
            if entry.kind is EndpointKind.remote
            else None
        ),
        spec=entry.spec if entry.kind is EndpointKind.served else None,
    )


def draw_rng(transaction_key: str | None, task_pos: int, what: str) -> random.Random:
    """The generator one draw of one task comes from: the same key, task and field give the same draw."""
    return random.Random(f"{transaction_key or EXAMPLE_KEY}:{task_pos}:{what}")


# --- resolution --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Leaf:
    """A task of the plan before its values are fixed: the levels above its catalogue entry (nearest first),
    and the eval trials each of its endpoints runs, in order."""

    task: CatalogTask
    levels: tuple[Cascade, ...]
    # A `range` where the trials run from 0: lazy, so a plan asking for 10**9 episodes is counted and
    # refused (`_check_limits`) before a single one is made.
    trials: tuple[tuple[str, Sequence[int]], ...]


def resolve(
    plan: EvalPlan, catalog: Catalog, *, transaction_key: str | None, open_competitions: bool = False
) -> Resolution:
    """Resolve `plan` against what `catalog` offers this caller, drawing from `transaction_key`.
    `open_competitions`: the install lets a competition take any endpoints (`Settings.open_competitions`).

    Raises `Refusal` on a plan the platform refuses; a plan that resolves changes nothing anywhere.
    """
    if plan.eval is not None:
        evaluation = _named_eval(str(plan.eval), catalog)
        leaves = _expand_eval(plan, evaluation)
    else:
        evaluation = _composed_eval(plan, catalog)
        tasks = {task_id: task for task_id, (_, task) in catalog.tasks.items()}
        leaves = [
            _Leaf(
                task=tasks[node.task_id],
                levels=(node, plan),
                trials=tuple(
                    (entry.name, range(plan.episodes_on(node, entry))) for entry in plan.task_endpoints(node)
                ),
            )
            for node in plan.tasks
        ]
    rig_shape = _rig_shape(plan, evaluation)
    definitions = _definitions(plan, catalog)
    if isinstance(plan.request_type, NebiusCompetition) and not open_competitions:
        _one_image(definitions)
    limits.check(_over_limits(plan, leaves, definitions))

    problems: list[str] = []
    resolved_tasks: list[ResolvedTask] = []
    episodes: list[PlannedEpisode] = []
    for pos, leaf in enumerate(leaves):
        resolved, planned = _resolve_leaf(
            pos, leaf, plan, definitions, transaction_key, first_index=len(episodes), problems=problems
        )
        if resolved is not None:
            resolved_tasks.append(resolved)
            episodes.extend(planned)
    if plan.tote_placement is not None and not any(TaskScene.of(leaf.task).tote_sides for leaf in leaves):
        problems.extend(
            f"task {task_id!r} has no tote: tote_placement is not a field it takes "
            "(no task of the plan has one)"
            for task_id in dict.fromkeys(leaf.task.task_id for leaf in leaves)
        )
    if problems:
        raise bad_request("; ".join(problems))

    if plan.names_an_eval and plan.episodes_total is not None and plan.episodes_total != len(episodes):
        raise bad_request(
            f"episodes_total states {plan.episodes_total}, and eval {evaluation.slug!r} expands to "
            f"{len(episodes)} episodes: state the expansion's total, or none"
        )
    used = {episode.endpoint for episode in episodes}
    return Resolution(
        resolved=ResolvedPlan(episodes_total=len(episodes), tasks=resolved_tasks, rig_shape=rig_shape),
        episodes=tuple(episodes),
        eval=evaluation,
        endpoints={name: entry for name, entry in definitions.items() if name in used},
        sampled=plan.sample is not None,
        deployments=catalog.deployments,
    )


def _size(trials: Sequence[int]) -> int:
    # len() of a range past sys.maxsize raises OverflowError; its bounds do not.
    return max(0, trials.stop - trials.start) if isinstance(trials, range) else len(trials)


def _over_limits(
    plan: EvalPlan, leaves: Sequence[_Leaf], definitions: Mapping[str, Endpoint]
) -> list[Problem]:
    """What the plan asks for past the platform's limits (`core.limits`), each field by its path: the counts
    and caps it states, its tasks, endpoints and episodes in all, and its stored text."""
    problems: list[Problem] = []
    per_plan = f"episodes a plan (the platform's limit: {limits.EPISODES_PER_PLAN:,})"
    stated: list[tuple[str, Cascade]] = [("", plan)]
    stated += [(f"endpoints[{j}].", entry) for j, entry in enumerate(plan.endpoints)]
    for i, node in enumerate(plan.tasks):
        stated.append((f"tasks[{i}].", node))
        stated += [(f"tasks[{i}].endpoints[{j}].", entry) for j, entry in enumerate(node.endpoints or [])]
    for where, level in stated:
        count = level.episodes_per_endpoint
        problems += limits.at_most(f"{where}episodes_per_endpoint", count, limits.EPISODES_PER_PLAN, per_plan)
        problems += limits.at_most(
            f"{where}cap_per_episode_sec", level.cap_per_episode_sec, limits.CAP_PER_EPISODE_SEC, "seconds"
        )
    problems += limits.at_most("tasks", len(leaves), limits.TASKS_PER_PLAN, "tasks a plan")
    problems += limits.at_most("endpoints", len(definitions), limits.ENDPOINTS_PER_PLAN, "endpoints a plan")
    total = sum(_size(trials) for leaf in leaves for _, trials in leaf.trials)
    if total > limits.EPISODES_PER_PLAN and not any(
        p.field.endswith("episodes_per_endpoint") for p in problems
    ):
        problems.append(
            Problem(
                "episodes_per_endpoint",
                f"the plan expands to {total:,} episodes over {len(leaves):,} tasks: at most "
                f"{limits.EPISODES_PER_PLAN:,} episodes a plan",
            )
        )
    problems += limits.text("alias", plan.alias, limits.ALIAS_CHARS)
    problems += limits.text("transaction_key", plan.transaction_key, limits.TRANSACTION_KEY_CHARS)
    return problems


def _named_eval(slug: str, catalog: Catalog) -> CatalogEval:
    evaluation = catalog.evals.get(slug)
    if evaluation is None:
        refuse_unhosted(slug)
        offered = sorted(catalog.evals)
        raise not_found(
            f"eval {slug!r} is not one this platform offers you; "
            f"the evals on offer: {', '.join(offered) or 'none'}",
            listed=[Listed("evals", tuple(offered))],
        )
    _require_accepting(evaluation)
    return evaluation


def _require_accepting(evaluation: CatalogEval) -> None:
    if not evaluation.accepting:
        raise Refusal(
            RefusalKind.EVAL_UNAVAILABLE,
            f"eval {evaluation.slug!r} is not accepting runs now; try again later, or name another eval",
        )


def _expand_eval(plan: EvalPlan, evaluation: CatalogEval) -> list[_Leaf]:
    """The named eval's tasks, each with its endpoints' trials: every trial, or the sample's."""
    per_task = evaluation.trials_per_task
    if plan.sample is None:
        return [
            _Leaf(
                task=task,
                levels=(plan,),
                trials=tuple(
                    (entry.name, range(_first((entry, plan), _count) or per_task)) for entry in plan.endpoints
                ),
            )
            for task in evaluation.tasks
        ]

    counted = [entry.name for entry in plan.endpoints if entry.episodes_per_endpoint is not None]
    if plan.episodes_per_endpoint is not None or counted:
        where = "the plan" if plan.episodes_per_endpoint is not None else f"endpoint {counted[0]!r}"
        raise bad_request(
            f"{where} states episodes_per_endpoint, and the plan samples eval {evaluation.slug!r}: "
            f"a sample draws from the eval's own trials ({per_task} per task); "
            "state the sample or a count, not both"
        )
    trials = [(pos, k) for pos in range(len(evaluation.tasks)) for k in range(per_task)]
    sample = plan.sample
    if sample.count is not None:
        size = sample.count
        if size > len(trials):
            raise bad_request(
                f"sample.count {size} is more than the {len(trials)} trials of eval {evaluation.slug!r} "
                f"({len(evaluation.tasks)} tasks, {per_task} each): a sample takes at most every trial"
            )
    else:
        assert sample.percent is not None  # `Sample` states one size
        size = -(-sample.percent * len(trials) // 100)  # the share, rounded up
    drawn = sorted(random.Random(sample.seed).sample(range(len(trials)), size))
    by_task: dict[int, list[int]] = {}
    for index in drawn:
        pos, k = trials[index]
        by_task.setdefault(pos, []).append(k)
    return [
        _Leaf(
            task=task,
            levels=(plan,),
            trials=tuple((entry.name, tuple(by_task[pos])) for entry in plan.endpoints),
        )
        for pos, task in enumerate(evaluation.tasks)
        if pos in by_task
    ]


def _composed_eval(plan: EvalPlan, catalog: Catalog) -> CatalogEval:
    """The one eval a plan's own tasks come from, once the caller may compose and every task is on offer."""
    if not catalog.may_compose:
        raise forbidden(
            "the plan states its own tasks, which takes a grant to compose plans, and your organisation "
            "holds none: name an eval (`eval: <name>`) instead"
        )
    offered = {task_id: pair for task_id, pair in catalog.tasks.items() if pair[0].composable}
    named = list(dict.fromkeys(str(node.task_id) for node in plan.tasks))
    unknown = [task_id for task_id in named if task_id not in offered]
    if unknown:
        listed = sorted(offered)
        raise not_found(
            f"task {', '.join(repr(task_id) for task_id in unknown)} is not in the catalogue you may compose "
            f"from; the tasks on offer: {', '.join(listed) or 'none'}",
            listed=[Listed("tasks", tuple(listed))],
        )
    by_eval: dict[str, list[str]] = {}
    for task_id in named:
        by_eval.setdefault(offered[task_id][0].slug, []).append(task_id)
    if len(by_eval) > 1:
        parts = "; ".join(
            f"{', '.join(repr(task_id) for task_id in task_ids)} from eval {slug!r} "
            f"(benchmark {offered[task_ids[0]][0].benchmark!r})"
            for slug, task_ids in by_eval.items()
        )
        raise bad_request(
            f"the plan's tasks come from more than one eval: {parts}; a plan runs on one benchmark, "
            "so compose it from the tasks of one eval"
        )
    evaluation = offered[named[0]][0]
    _require_accepting(evaluation)
    return evaluation


def _rig_shape(plan: EvalPlan, evaluation: CatalogEval) -> RigShape:
    """The eval's embodiment. A named eval runs on it whatever `rig_shape` (the model refuses all but the
    default); a plan stating its tasks must state it."""
    shape = members_by_slug(RigShape).get(evaluation.embodiment)
    if shape is None:
        raise Refusal(
            RefusalKind.EVAL_UNAVAILABLE,
            f"eval {evaluation.slug!r} runs on the embodiment {evaluation.embodiment!r}, "
            f"which no rig shape of this contract names ({', '.join(members_by_slug(RigShape))})",
        )
    if plan.names_an_eval or plan.rig_shape is shape:
        return shape
    task_ids = ", ".join(dict.fromkeys(repr(str(node.task_id)) for node in plan.tasks))
    stated = f"rig_shape {slug_of(plan.rig_shape)}" + (
        " (the default, when a plan states none)" if plan.rig_shape is RigShape.franka else ""
    )
    where = "in simulation" if shape is RigShape.sim else f"on the {slug_of(shape)} embodiment"
    raise bad_request(
        f"rig_shape: the plan's tasks {task_ids} take the embodiments [{slug_of(shape)}] (they run {where}), "
        f"and the plan runs on {stated}: state `rig_shape: {slug_of(shape)}`",
        field="rig_shape",
    )


def _definitions(plan: EvalPlan, catalog: Catalog) -> dict[str, Endpoint]:
    """Every endpoint the plan defines, by name, each checked: the plan's, then those its tasks define."""
    found: dict[str, Endpoint] = {}
    problems: list[str] = []
    specs = False
    task_defined = (entry for node in plan.tasks for entry in node.endpoints or [] if entry.names_a_locator)
    for entry in [*plan.endpoints, *task_defined]:
        seen = found.get(entry.name)
        if seen is not None:
            if _locator(seen) != _locator(entry):
                problems.append(
                    f"endpoint {entry.name!r} is defined twice, with different locators: "
                    "a name names one policy across the plan, so give the second another name"
                )
            continue
        found[entry.name] = entry
        if markup := _markup_in(entry.name):
            problems.append(
                f"endpoints.name: {entry.name!r} holds {markup}: an endpoint's name is plain text (shown on "
                "boards and public replays), without < > & \" ' or control characters"
            )
        if entry.kind is EndpointKind.served:
            if entry.spec not in catalog.served_policies and entry.spec not in catalog.deployments:
                specs = True
                known = ", ".join(sorted({*catalog.served_policies, *catalog.deployments})) or "none"
                problems.append(
                    f"endpoint {entry.name!r} is served from spec {entry.spec!r}, "
                    f"which this platform does not serve; the specs it serves: {known}"
                )
            if entry.provider is not None and entry.provider != PROVIDER:
                problems.append(
                    f"endpoint {entry.name!r} names the provider {entry.provider!r}: "
                    f"this platform starts a served endpoint itself (provider {PROVIDER!r}); "
                    "state no provider"
                )
    if problems:
        offered = sorted({*catalog.served_policies, *catalog.deployments})
        raise bad_request("; ".join(problems), listed=[Listed("specs", tuple(offered))] if specs else ())
    return found


# What would read as markup or break a line where a name is shown: pages escape it, but a name leaves the
# platform in JSON (public replay data, boards) that others render.
_NOT_PLAIN = frozenset("<>&\"'")


def _markup_in(name: str) -> str:
    """What of `name` is not plain text ("" when all of it is)."""
    bad = sorted({c for c in name if c in _NOT_PLAIN or (ord(c) < 32 or ord(c) == 127)})
    return ", ".join(repr(c) for c in bad)


def _one_image(definitions: Mapping[str, Endpoint]) -> None:
    """The contract's competition: one policy, run by the platform from its image (`NebiusCompetition`)."""
    if len(definitions) != 1:
        raise bad_request(
            f"endpoints: a nebius_competition plan defines exactly one endpoint, an image one; this plan "
            f"defines {len(definitions)} ({', '.join(map(repr, definitions))})"
        )
    (entry,) = definitions.values()
    if entry.kind is not EndpointKind.image:
        raise bad_request(
            f"endpoints: a nebius_competition plan's one endpoint is of kind image (the platform runs "
            f"the policy from its image); endpoint {entry.name!r} is {entry.kind.name}"
        )


def _locator(entry: Endpoint) -> dict[str, Any]:
    located: dict[str, Any] = entry.model_dump(mode="json", exclude={"episodes_per_endpoint"})
    return located


def _count(level: Cascade) -> int | None:
    return level.episodes_per_endpoint


def _first(levels: Sequence[Cascade], value: Callable[[Cascade], T | None]) -> T | None:
    """The value the nearest level states, or None where none does."""
    return next((stated for stated in map(value, levels) if stated is not None), None)


def _resolve_leaf(
    pos: int,
    leaf: _Leaf,
    plan: EvalPlan,
    definitions: Mapping[str, Endpoint],
    key: str | None,
    *,
    first_index: int,
    problems: list[str],
) -> tuple[ResolvedTask | None, list[PlannedEpisode]]:
    task, levels = leaf.task, leaf.levels
    before = len(problems)

    stating = next((level for level in levels if level.cap_per_episode_sec is not None), None)
    cap = task.default_cap_sec if stating is None else stating.cap_per_episode_sec
    assert cap is not None
    where = (
        "its catalogue default"
        if stating is None
        else "as the plan states"
        if stating is plan
        else "as the task states"
    )
    if stating is None and cap > limits.CAP_PER_EPISODE_SEC:
        problems.append(
            f"task {task.task_id!r} takes {cap} s per episode (its catalogue default), over the platform's "
            f"limit of {limits.CAP_PER_EPISODE_SEC} s: state a cap_per_episode_sec within it"
        )
    ceiling = plan.max_cap_per_episode_sec
    if ceiling is not None and cap > ceiling:
        problems.append(
            f"task {task.task_id!r} takes {cap} s per episode ({where}), over the plan's "
            f"max_cap_per_episode_sec of {ceiling} s"
        )
    scene = _resolve_scene(pos, task, levels, key, problems)
    if len(problems) > before or scene is None:
        return None, []

    # One round per trial: each endpoint that runs trial k plays it in round k, in an order drawn per round,
    # so endpoints alternate blind and meet each trial at about the same time.
    order: list[str] = []
    shuffle = draw_rng(key, pos, "episode_order")
    for k in range(max(len(trials) for _, trials in leaf.trials)):
        round_ = [name for name, trials in leaf.trials if k < len(trials)]
        shuffle.shuffle(round_)
        order.extend(round_)

    trials_of = dict(leaf.trials)
    played = dict.fromkeys(trials_of, 0)
    episodes: list[PlannedEpisode] = []
    for name in order:
        trial = trials_of[name][played[name]]
        played[name] += 1
        episodes.append(
            PlannedEpisode(
                index=first_index + len(episodes),
                task_pos=pos,
                task_id=task.task_id,
                benchmark_task=task.benchmark_task,
                endpoint=name,
                trial=trial,
                seed=seed_of_trial(task.seeds, trial)[0],
                cap_s=float(cap),
            )
        )
    resolved = ResolvedTask(
        task_id=TaskRef(task.task_id),
        endpoints=[_resolved_endpoint(definitions[name], len(trials)) for name, trials in leaf.trials],
        cap_per_episode_sec=cap,
        policy_preset=_first(levels, lambda level: level.policy_preset) or DEFAULT_PRESET,
        episode_order=order,
        **scene,
    )
    return resolved, episodes


def _resolved_endpoint(entry: Endpoint, episodes: int) -> ResolvedEndpoint:
    assert entry.wire is not None  # every entry that names a locator names its wire
    served = entry.kind is EndpointKind.served
    return ResolvedEndpoint(
        name=entry.name,
        kind=entry.kind,
        wire=entry.wire,
        address=entry.address if entry.kind is EndpointKind.remote else None,
        provider=PROVIDER if served else None,
        spec=entry.spec if served else None,
        episodes=episodes,
    )


def _resolve_scene(
    pos: int, task: CatalogTask, levels: Sequence[Cascade], key: str | None, problems: list[str]
) -> dict[str, Any] | None:
    """The scene fields of a resolved task, or None with `problems` extended where a level states a field the
    task does not take, or a value it does not offer."""
    offered = TaskScene.of(task)
    before = len(problems)
    name = f"task {task.task_id!r}"

    def refuse(lacks: str, field_name: str) -> None:
        problems.append(f"{name} has no {lacks}: {field_name} is not a field it takes")

    stated_tote = _first(levels, lambda level: level.tote_placement)
    tote = Placement.none
    if offered.tote_sides is None:
        # The plan's own tote is for the tasks that have one (`resolve` refuses it where none has); a task
        # stating one it has not is refused.
        if _first(levels[:-1], lambda level: level.tote_placement) is not None:
            refuse("tote", "tote_placement")
    else:
        tote = _side(
            stated_tote,
            offered.tote_sides,
            draw_rng(key, pos, "tote_placement"),
            f"{name} tote_placement",
            problems,
        )

    stated_cameras: dict[str, Placement] = {}
    for level in reversed(levels):
        stated_cameras.update(level.external_cameras)
    unknown = [mount for mount in stated_cameras if mount not in offered.cameras]
    if unknown and not offered.cameras:
        refuse("external camera", "external_cameras")
    elif unknown:
        problems.append(
            f"{name} has no camera mount {', '.join(map(repr, unknown))}: "
            f"external_cameras names the mounts the task defines, {', '.join(map(repr, offered.cameras))}"
        )
    cameras = {
        mount: _side(
            stated_cameras.get(mount),
            sides,
            draw_rng(key, pos, f"external_cameras.{mount}"),
            f"{name} external camera {mount!r}",
            problems,
        )
        for mount, sides in offered.cameras.items()
    }

    vantage = _first(levels, lambda level: level.camera_vantage)
    if not offered.takes_vantage:
        if vantage is not None:
            refuse("external camera", "camera_vantage")
    elif vantage is None:
        vantage = offered.vantage

    clutter = _first(levels, lambda level: level.clutter)
    objects: list[str] = []
    if not offered.takes_clutter:
        if clutter is not None:
            refuse("object kit", "clutter")
    else:
        clutter = clutter or offered.clutter
        if clutter is not None:
            objects = _draw_clutter(clutter, offered.objects, draw_rng(key, pos, "clutter"))

    pose = _first(levels, lambda level: level.start_pose)
    if offered.start_pose is None:
        if pose is not None:
            refuse("start pose to choose", "start_pose")
        pose = StartPose.nominal
    elif pose is None:
        pose = offered.start_pose

    if len(problems) > before:
        return None
    return {
        "tote_placement": tote,
        "external_cameras": cameras,
        "camera_vantage": vantage if offered.takes_vantage else None,
        "clutter": clutter if offered.takes_clutter else None,
        "clutter_objects": objects,
        "start_pose": pose,
    }


def _side(
    stated: Placement | None, offered: Sequence[Placement], rng: random.Random, what: str, problems: list[str]
) -> Placement:
    """The side a level states, if the task offers it; a draw among the offered sides for `random` or none."""
    drawable = [side for side in offered if side in _SIDES]
    if stated is None or stated is Placement.random:
        return rng.choice(drawable) if drawable else Placement.none
    if stated not in offered:
        choices = [slug_of(side) for side in offered] + (["random"] if drawable else [])
        problems.append(
            f"{what} is {slug_of(stated)}, which the task does not offer: one of {', '.join(choices)}"
        )
    return stated


def _draw_clutter(clutter: Clutter, kit: Sequence[tuple[str, str]], rng: random.Random) -> list[str]:
    """Between `count_min` and `count_max` objects of the kit, at most `large_cap` large and `medium_cap`
    medium ones, listed in the kit's order."""
    wanted = rng.randint(clutter.count_min, clutter.count_max)
    caps = {"large": clutter.large_cap, "medium": clutter.medium_cap, "small": len(kit)}
    taken: list[int] = []
    for index in rng.sample(range(len(kit)), len(kit)):
        if len(taken) == wanted:
            break
        size = kit[index][1]
        if caps[size] > 0:
            caps[size] -= 1
            taken.append(index)
    return [kit[index][0] for index in sorted(taken)]
