"""Plan resolution: a contract `EvalPlan` into the `ResolvedPlan` it answers and the episodes to run.

Every refusal names the task or field and the rule, with `evals` / `tasks` details where the contract asks.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from platform_client.enums import CameraVantage, EndpointKind, ErrorCode, Placement, RigShape, StartPose, Wire
from platform_client.eval_plan import SESSION_ROUTE, EvalPlan, HostPortAddress
from platform_client.responses import ResolvedPlan

from yardstick.core.catalog import Catalog, CatalogEval, CatalogTask, catalog_of
from yardstick.core.refusals import Refusal
from yardstick.positronic.catalog_view import evals_view, tasks_view
from yardstick.positronic.errors import CODES
from yardstick.positronic.plans import DEFAULT_PRESET, PROVIDER, Resolution, TaskScene, resolve
from yardstick.store.states import TargetKind

SEEDS = tuple(range(50))
MT10_TASKS = ("reach-v3", "push-v3", "pick-place-v3")


def sim_task(task_id: str, **over: Any) -> CatalogTask:
    fields: dict[str, Any] = {
        "task_id": task_id,
        "benchmark_task": task_id,
        "description": f"do {task_id}",
        "default_cap_sec": 7,
        "seeds": SEEDS,
    }
    return CatalogTask(**{**fields, **over})


def sim_eval(
    slug: str, benchmark: str, trials: int, tasks: tuple[CatalogTask, ...], **over: Any
) -> CatalogEval:
    fields: dict[str, Any] = {
        "slug": slug,
        "benchmark": benchmark,
        "embodiment": "sim",
        "trials_per_task": trials,
        "composable": True,
        "accepting": True,
        "tasks": tasks,
    }
    return CatalogEval(**{**fields, **over})


MT10 = sim_eval("metaworld.mt10", "mt10", 10, tuple(sim_task(task_id) for task_id in MT10_TASKS))
OTHER = sim_eval("metaworld.doors", "mt50", 5, (sim_task("door-open-v3"), sim_task("door-close-v3")))
KIT = {"mug": "medium", "bowl": "large", "pan": "large", "spoon": "small", "fork": "small"}
# A task that declares a scene: a tote, two camera mounts, a vantage, a kit to clutter from, a start pose.
SCENE = {
    "tote_placement": ["left", "right"],
    "external_cameras": {"side": ["left", "right"], "front": ["left", "right"]},
    "camera_vantage": "droid",
    "clutter": {"count_min": 2, "count_max": 3, "large_cap": 1, "medium_cap": 1},
    "objects": KIT,
    "start_pose": "nominal",
}
STAGED = sim_eval(
    "lab.staged",
    "staged",
    4,
    (sim_task("cube-into-tote", scene=SCENE, seeds=(100, 101, 102), default_cap_sec=60),),
)
CLOSED = sim_eval(
    "metaworld.closed", "mt10", 1, (sim_task("window-open-v3"),), composable=False, accepting=False
)
SPECS = frozenset({"expert", "random"})
CATALOG = catalog_of([MT10, OTHER, STAGED, CLOSED], served_policies=SPECS, may_compose=True)
NO_GRANT = catalog_of([MT10, OTHER, STAGED, CLOSED], served_policies=SPECS, may_compose=False)

PRIVATE = {"type": "private_eval", "org": "acme"}


def remote(name: str, **over: Any) -> dict[str, Any]:
    address = {"host": f"{name}.example", "port": 8000, "path": SESSION_ROUTE}
    return {"name": name, "wire": "websocket", "address": address, **over}


def served(name: str, spec: str = "expert", **over: Any) -> dict[str, Any]:
    return {"name": name, "kind": "served", "spec": spec, "wire": "websocket", **over}


def image(name: str = "policy") -> dict[str, Any]:
    return {"name": name, "kind": "image", "wire": "websocket", "image": "registry.example.com/you/policy:v1"}


def named(**over: Any) -> EvalPlan:
    fields = {"request_type": PRIVATE, "eval": "metaworld.mt10", "endpoints": [remote("candidate")]}
    return EvalPlan.model_validate({**fields, **over})


def composed(**over: Any) -> EvalPlan:
    fields = {
        "request_type": PRIVATE,
        "rig_shape": "sim",
        "tasks": ["reach-v3"],
        "endpoints": [remote("candidate")],
        "episodes_per_endpoint": 3,
    }
    return EvalPlan.model_validate({**fields, **over})


def refused(plan: EvalPlan, code: ErrorCode, *words: str, catalog: Catalog = CATALOG) -> Refusal:
    with pytest.raises(Refusal) as caught:
        resolve(plan, catalog, transaction_key="k")
    error = caught.value
    assert CODES[error.kind][0] is code, error.message
    for word in words:
        assert word in error.message, error.message
    return error


def valid(resolution: Resolution) -> None:
    """The answer survives the contract's own validation on the wire, and the episodes agree with it."""
    again = ResolvedPlan.model_validate_json(resolution.resolved.model_dump_json())
    assert again == resolution.resolved
    assert [episode.index for episode in resolution.episodes] == list(range(len(resolution.episodes)))
    assert len(resolution.episodes) == resolution.resolved.episodes_total
    for pos, task in enumerate(resolution.resolved.tasks):
        mine = [episode for episode in resolution.episodes if episode.task_pos == pos]
        assert [episode.endpoint for episode in mine] == task.episode_order
        assert {episode.task_id for episode in mine} == {task.task_id}
        assert {episode.cap_s for episode in mine} == {task.cap_per_episode_sec}
    assert {episode.endpoint for episode in resolution.episodes} == set(resolution.endpoints)


# --- a named eval -------------------------------------------------------------------------------------------


def test_a_named_eval_expands_into_its_tasks_with_its_trials() -> None:
    resolution = resolve(named(), CATALOG, transaction_key="k")
    valid(resolution)
    plan = resolution.resolved
    assert plan.rig_shape is RigShape.sim  # the default franka stands for the eval's own embodiment
    assert [task.task_id for task in plan.tasks] == list(MT10_TASKS)
    assert plan.episodes_total == 30
    assert resolution.eval is MT10 and not resolution.sampled
    for task in plan.tasks:
        assert [(endpoint.name, endpoint.episodes) for endpoint in task.endpoints] == [("candidate", 10)]
        assert task.episode_order == ["candidate"] * 10
        assert task.cap_per_episode_sec == 7
        assert task.policy_preset == DEFAULT_PRESET
        assert task.tote_placement is Placement.none and task.start_pose is StartPose.nominal
        assert task.camera_vantage is None and task.external_cameras == {} and task.clutter is None
        assert task.clutter_objects == []
    first = resolution.episodes[:10]
    assert [(e.task_id, e.benchmark_task, e.trial, e.seed) for e in first] == [
        ("reach-v3", "reach-v3", k, k) for k in range(10)
    ]
    assert resolution.episodes[10].task_id == "push-v3" and resolution.episodes[10].index == 10
    assert resolution.episodes[10].task_pos == 1 and resolution.episodes[10].trial == 0


def test_a_named_eval_takes_the_plans_count_and_an_endpoints_own() -> None:
    plan = named(episodes_per_endpoint=3, endpoints=[remote("a"), remote("b", episodes_per_endpoint=1)])
    resolution = resolve(plan, CATALOG, transaction_key="k")
    valid(resolution)
    task = resolution.resolved.tasks[0]
    assert [(endpoint.name, endpoint.episodes) for endpoint in task.endpoints] == [("a", 3), ("b", 1)]
    assert resolution.resolved.episodes_total == 12


def test_a_named_eval_checks_the_checksum_against_its_expansion() -> None:
    assert resolve(named(episodes_total=30), CATALOG, transaction_key=None).resolved.episodes_total == 30
    refused(named(episodes_total=22), ErrorCode.bad_request, "episodes_total states 22", "30")


def test_the_cap_and_preset_of_the_plan_reach_every_task_of_a_named_eval() -> None:
    resolution = resolve(named(cap_per_episode_sec=5, policy_preset="fast"), CATALOG, transaction_key="k")
    assert {(task.cap_per_episode_sec, task.policy_preset) for task in resolution.resolved.tasks} == {
        (5, "fast")
    }
    assert {episode.cap_s for episode in resolution.episodes} == {5}


def test_an_unknown_eval_lists_the_evals_on_offer() -> None:
    error = refused(named(eval="metaworld.mt11"), ErrorCode.not_found, "'metaworld.mt11'")
    assert error.details["evals"] == sorted(CATALOG.evals)
    assert CODES[error.kind][1] == 404


def test_an_eval_not_accepting_runs_is_unavailable() -> None:
    error = refused(named(eval="metaworld.closed"), ErrorCode.eval_unavailable, "'metaworld.closed'")
    assert CODES[error.kind][1] == 409


# --- stated tasks -------------------------------------------------------------------------------------------


def test_stated_tasks_cascade_the_count_plan_task_endpoint() -> None:
    # A 10 + 10 + 2 round: the plan's 10 on two endpoints, and the candidate's 2 on a task of its own.
    plan = composed(
        tasks=[
            "reach-v3",
            {
                "task_id": "push-v3",
                "endpoints": ["baseline", {"name": "candidate", "episodes_per_endpoint": 2}],
            },
        ],
        endpoints=[remote("baseline"), served("candidate")],
        episodes_per_endpoint=10,
        episodes_total=32,
    )
    resolution = resolve(plan, CATALOG, transaction_key="k")
    valid(resolution)
    reach, push = resolution.resolved.tasks
    assert [(e.name, e.episodes) for e in reach.endpoints] == [("baseline", 10), ("candidate", 10)]
    assert [(e.name, e.episodes) for e in push.endpoints] == [("baseline", 10), ("candidate", 2)]
    assert resolution.resolved.episodes_total == 32
    assert resolution.eval is MT10
    assert resolution.resolved.rig_shape is RigShape.sim


def test_a_task_count_overrides_the_plans() -> None:
    plan = composed(
        tasks=["reach-v3", {"task_id": "push-v3", "episodes_per_endpoint": 1}], episodes_per_endpoint=4
    )
    counts = [task.episodes for task in resolve(plan, CATALOG, transaction_key="k").resolved.tasks]
    assert counts == [4, 1]


def test_two_endpoints_interleave_blind_and_run_the_same_trials() -> None:
    plan = composed(endpoints=[remote("baseline"), remote("candidate")], episodes_per_endpoint=10)
    resolution = resolve(plan, CATALOG, transaction_key="k")
    valid(resolution)
    order = resolution.resolved.tasks[0].episode_order
    assert Counter(order) == {"baseline": 10, "candidate": 10}
    # One round per trial: each pair of episodes holds both endpoints, in a drawn order.
    assert all(set(order[k : k + 2]) == {"baseline", "candidate"} for k in range(0, 20, 2))
    assert order != ["baseline", "candidate"] * 10 and order != ["candidate", "baseline"] * 10
    by_endpoint = {
        name: [(e.trial, e.seed) for e in resolution.episodes if e.endpoint == name]
        for name in ("baseline", "candidate")
    }
    assert by_endpoint["baseline"] == by_endpoint["candidate"] == [(k, k) for k in range(10)]


def test_an_endpoint_with_fewer_episodes_runs_the_first_trials() -> None:
    plan = composed(endpoints=[remote("a"), remote("b", episodes_per_endpoint=2)], episodes_per_endpoint=5)
    resolution = resolve(plan, CATALOG, transaction_key="k")
    valid(resolution)
    assert [e.trial for e in resolution.episodes if e.endpoint == "b"] == [0, 1]
    assert set(resolution.resolved.tasks[0].episode_order[:4]) == {"a", "b"}


def test_trials_wrap_around_the_seeds() -> None:
    plan = composed(tasks=["cube-into-tote"], episodes_per_endpoint=5)
    resolution = resolve(plan, CATALOG, transaction_key="k")
    assert [(e.trial, e.seed) for e in resolution.episodes] == [
        (0, 100),
        (1, 101),
        (2, 102),
        (3, 100),
        (4, 101),
    ]


def test_served_and_remote_endpoints_resolve_to_their_locators() -> None:
    plan = composed(
        endpoints=[remote("baseline", wire="grpc", max_concurrent_sessions=1), served("candidate")]
    )
    resolution = resolve(plan, CATALOG, transaction_key="k")
    baseline, candidate = resolution.resolved.tasks[0].endpoints
    assert baseline.kind is EndpointKind.remote and baseline.wire is Wire.grpc
    assert baseline.address == HostPortAddress(host="baseline.example", port=8000, path=SESSION_ROUTE)
    assert baseline.provider is None and baseline.spec is None
    assert candidate.kind is EndpointKind.served and candidate.wire is Wire.websocket
    assert candidate.address is None and candidate.provider == PROVIDER and candidate.spec == "expert"
    assert resolution.endpoints["baseline"].max_concurrent_sessions == 1
    assert resolution.endpoints["candidate"].spec == "expert"


@pytest.mark.parametrize("wire", ["websocket", "websocket_tls", "grpc", "grpc_tls"])
def test_every_host_port_wire_is_dialled(wire: str) -> None:
    resolution = resolve(composed(endpoints=[remote("a", wire=wire)]), CATALOG, transaction_key="k")
    assert resolution.resolved.tasks[0].endpoints[0].wire.name == wire


def test_a_unix_and_a_roboarena_wire_are_dialled() -> None:
    unix = {"name": "u", "wire": "websocket_unix", "address": {"uds": "/tmp/p.sock", "path": SESSION_ROUTE}}
    arena = {"name": "r", "wire": "roboarena", "address": {"host": "arena.example", "port": 8000}}
    resolution = resolve(composed(endpoints=[unix, arena]), CATALOG, transaction_key="k")
    assert [e.wire for e in resolution.resolved.tasks[0].endpoints] == [Wire.websocket_unix, Wire.roboarena]


def test_a_task_defines_its_own_endpoint() -> None:
    plan = composed(tasks=["reach-v3", {"task_id": "push-v3", "endpoints": [remote("solo")]}])
    resolution = resolve(plan, CATALOG, transaction_key="k")
    assert [[e.name for e in task.endpoints] for task in resolution.resolved.tasks] == [
        ["candidate"],
        ["solo"],
    ]
    assert set(resolution.endpoints) == {"candidate", "solo"}


def test_two_definitions_of_one_name_are_refused() -> None:
    other = remote("candidate")
    other["address"]["host"] = "elsewhere.example"
    plan = composed(tasks=["reach-v3", {"task_id": "push-v3", "endpoints": [other]}])
    refused(plan, ErrorCode.bad_request, "'candidate' is defined twice")


@pytest.mark.parametrize("name", ["<img src=x onerror=alert(1)>", "a&b", "two\nlines"])
def test_an_endpoint_name_that_is_not_plain_text_is_refused_by_name(name: str) -> None:
    plan = composed(endpoints=[{**remote("candidate"), "name": name}])
    refused(plan, ErrorCode.bad_request, "endpoints.name", "plain text", repr(name))


def test_the_task_cap_and_preset_override_the_plans() -> None:
    plan = composed(
        tasks=["reach-v3", {"task_id": "push-v3", "cap_per_episode_sec": 4, "policy_preset": "careful"}],
        cap_per_episode_sec=6,
    )
    reach, push = resolve(plan, CATALOG, transaction_key="k").resolved.tasks
    assert (reach.cap_per_episode_sec, reach.policy_preset) == (6, DEFAULT_PRESET)
    assert (push.cap_per_episode_sec, push.policy_preset) == (4, "careful")


def test_a_plan_may_carry_two_nodes_of_one_task() -> None:
    plan = composed(tasks=["reach-v3", {"task_id": "reach-v3", "cap_per_episode_sec": 3}])
    resolution = resolve(plan, CATALOG, transaction_key="k")
    valid(resolution)
    assert [task.cap_per_episode_sec for task in resolution.resolved.tasks] == [7, 3]


# --- refusals -----------------------------------------------------------------------------------------------


def test_a_plan_of_its_own_tasks_needs_the_grant() -> None:
    error = refused(composed(), ErrorCode.forbidden, "grant", catalog=NO_GRANT)
    assert CODES[error.kind][1] == 403
    # A named eval needs none.
    assert resolve(named(), NO_GRANT, transaction_key="k").resolved.episodes_total == 30


def test_an_unknown_task_lists_the_tasks_on_offer() -> None:
    error = refused(composed(tasks=["reach-v3", "fly-v3"]), ErrorCode.not_found, "'fly-v3'")
    offered = error.details["tasks"]
    assert offered == sorted(offered) and "reach-v3" in offered and "fly-v3" not in offered
    assert "window-open-v3" not in offered  # a pinned eval's tasks are not composed


def test_a_plan_of_its_own_tasks_states_the_sim_rig() -> None:
    plan = EvalPlan.model_validate(
        {
            "request_type": PRIVATE,
            "tasks": ["reach-v3"],
            "endpoints": [remote("a")],
            "episodes_per_endpoint": 1,
        }
    )
    refused(plan, ErrorCode.bad_request, "'reach-v3'", "simulation", "rig_shape franka", "`rig_shape: sim`")
    refused(
        composed(rig_shape="yam"), ErrorCode.bad_request, "simulation", "rig_shape yam", "`rig_shape: sim`"
    )


def test_a_plan_mixing_evals_is_refused_naming_the_tasks() -> None:
    refused(
        composed(tasks=["reach-v3", "door-open-v3"]),
        ErrorCode.bad_request,
        "'reach-v3'",
        "'metaworld.mt10'",
        "'door-open-v3'",
        "'metaworld.doors'",
        "one benchmark",
    )


def test_a_default_cap_over_the_ceiling_is_refused_naming_the_task() -> None:
    error = refused(
        composed(tasks=["reach-v3", "push-v3"], max_cap_per_episode_sec=5),
        ErrorCode.bad_request,
        "'reach-v3' takes 7 s",
        "'push-v3' takes 7 s",
        "max_cap_per_episode_sec of 5 s",
    )
    assert "catalogue default" in error.message
    refused(named(max_cap_per_episode_sec=6), ErrorCode.bad_request, "'reach-v3' takes 7 s", "6 s")
    resolution = resolve(
        named(max_cap_per_episode_sec=6, cap_per_episode_sec=6), CATALOG, transaction_key="k"
    )
    assert resolution.resolved.tasks[0].cap_per_episode_sec == 6


@pytest.mark.parametrize(
    ("stated", "words"),
    [
        (
            {"tote_placement": "left"},
            ("task 'reach-v3' has no tote", "tote_placement is not a field it takes"),
        ),
        ({"tote_placement": "none"}, ("task 'reach-v3' has no tote",)),
        ({"external_cameras": {"side": "random"}}, ("has no external camera", "external_cameras")),
        ({"camera_vantage": "droid"}, ("has no external camera", "camera_vantage")),
        ({"clutter": {"count_min": 1, "count_max": 2}}, ("has no object kit", "clutter")),
        ({"start_pose": "droid_reset"}, ("has no start pose to choose", "start_pose")),
    ],
)
def test_a_scene_field_on_a_task_without_a_scene_is_refused(
    stated: dict[str, Any], words: tuple[str, ...]
) -> None:
    refused(composed(tasks=[{"task_id": "reach-v3", **stated}]), ErrorCode.bad_request, *words)
    refused(composed(**stated), ErrorCode.bad_request, *words)
    refused(named(**stated), ErrorCode.bad_request, *words)


def test_an_unknown_spec_is_refused_naming_the_specs() -> None:
    error = refused(
        composed(endpoints=[served("candidate", spec="dreamzero")]), ErrorCode.bad_request, "'dreamzero'"
    )
    assert "expert, random" in error.message
    assert error.details["specs"] == ["expert", "random"]


def test_a_served_endpoint_takes_our_provider_only() -> None:
    refused(composed(endpoints=[served("c", provider="modal")]), ErrorCode.bad_request, "'modal'", "provider")
    resolution = resolve(composed(endpoints=[served("c", provider=PROVIDER)]), CATALOG, transaction_key="k")
    assert resolution.resolved.tasks[0].endpoints[0].provider == PROVIDER


def test_an_image_endpoint_resolves_to_an_image_target_the_gateway_pins() -> None:
    for plan in (named(endpoints=[image()]), composed(endpoints=[image()])):
        resolution = resolve(plan, CATALOG, transaction_key="k")
        valid(resolution)
        target = resolution.run_plan(plan).endpoints["policy"]
        assert target.kind == TargetKind.IMAGE and target.wire == "websocket"
        assert target.spec == plan.endpoints[0].image and target.credential is None


# --- samples ------------------------------------------------------------------------------------------------


def test_a_sample_by_count_is_drawn_once_for_its_seed_and_kept_in_eval_order() -> None:
    plan = named(sample={"count": 7, "seed": 3}, endpoints=[remote("a"), remote("b")])
    resolution = resolve(plan, CATALOG, transaction_key="k")
    valid(resolution)
    assert resolution.sampled
    drawn = [(e.task_id, e.trial) for e in resolution.episodes if e.endpoint == "a"]
    assert len(drawn) == 7
    position = {task_id: pos for pos, task_id in enumerate(MT10_TASKS)}
    assert drawn == sorted(drawn, key=lambda pair: (position[pair[0]], pair[1]))
    assert drawn == [(e.task_id, e.trial) for e in resolution.episodes if e.endpoint == "b"]
    assert resolution.resolved.episodes_total == 14
    again = resolve(plan, CATALOG, transaction_key="other")
    assert [(e.task_id, e.trial) for e in again.episodes if e.endpoint == "a"] == drawn
    other = resolve(named(sample={"count": 7, "seed": 4}), CATALOG, transaction_key="k")
    assert [(e.task_id, e.trial) for e in other.episodes] != drawn
    for episode in resolution.episodes:
        assert episode.seed == SEEDS[episode.trial]


def test_a_sample_by_percent_rounds_up_and_drops_a_task_with_no_trial() -> None:
    resolution = resolve(named(sample={"percent": 10, "seed": 0}), CATALOG, transaction_key="k")
    valid(resolution)
    assert resolution.resolved.episodes_total == 3  # 10 % of 30 trials
    one = resolve(named(sample={"percent": 1}), CATALOG, transaction_key="k")
    assert one.resolved.episodes_total == 1  # 0.3 rounds up
    assert len(one.resolved.tasks) == 1 and one.episodes[0].task_pos == 0
    assert resolve(named(sample={"percent": 100}), CATALOG, transaction_key="k").resolved.episodes_total == 30


def test_a_sample_larger_than_the_eval_is_refused() -> None:
    refused(
        named(sample={"count": 31}), ErrorCode.bad_request, "sample.count 31", "30 trials", "'metaworld.mt10'"
    )
    assert resolve(named(sample={"count": 30}), CATALOG, transaction_key="k").resolved.episodes_total == 30


def test_a_sample_takes_no_count_of_its_own() -> None:
    refused(named(sample={"count": 3}, episodes_per_endpoint=2), ErrorCode.bad_request, "the plan states")
    refused(
        named(sample={"count": 3}, endpoints=[remote("a", episodes_per_endpoint=2)]),
        ErrorCode.bad_request,
        "'a'",
    )


def test_the_checksum_of_a_sampled_eval_is_the_sample() -> None:
    assert resolve(named(sample={"count": 4}, episodes_total=4), CATALOG, transaction_key="k").sampled
    refused(named(sample={"count": 4}, episodes_total=30), ErrorCode.bad_request, "episodes_total states 30")


# --- draws --------------------------------------------------------------------------------------------------


def staged(**over: Any) -> EvalPlan:
    return composed(
        tasks=["cube-into-tote"], endpoints=[remote("a"), remote("b")], episodes_per_endpoint=8, **over
    )


def draws(resolution: Resolution) -> tuple[Any, ...]:
    task = resolution.resolved.tasks[0]
    return (task.tote_placement, task.external_cameras, task.clutter_objects, task.episode_order)


def test_a_declared_scene_is_drawn_where_no_level_states_it() -> None:
    resolution = resolve(staged(), CATALOG, transaction_key="k")
    valid(resolution)
    task = resolution.resolved.tasks[0]
    assert task.tote_placement in (Placement.left, Placement.right)
    assert set(task.external_cameras) == {"side", "front"}
    assert set(task.external_cameras.values()) <= {Placement.left, Placement.right}
    assert task.camera_vantage is CameraVantage.droid
    assert task.start_pose is StartPose.nominal
    assert task.clutter is not None and task.clutter.count_max == 3
    assert 2 <= len(task.clutter_objects) <= 3
    kit = list(KIT)
    assert task.clutter_objects == sorted(task.clutter_objects, key=kit.index)
    sizes = Counter(KIT[name] for name in task.clutter_objects)
    assert sizes["large"] <= 1 and sizes["medium"] <= 1
    assert task.cap_per_episode_sec == 60


def test_a_stated_scene_is_taken_and_the_task_level_wins() -> None:
    plan = composed(
        tasks=[
            {
                "task_id": "cube-into-tote",
                "tote_placement": "right",
                "external_cameras": {"front": "left"},
                "clutter": {"count_min": 0, "count_max": 0},
            }
        ],
        tote_placement="left",
        external_cameras={"side": "right", "front": "right"},
        camera_vantage="phail",
        start_pose="droid_reset",
    )
    task = resolve(plan, CATALOG, transaction_key="k").resolved.tasks[0]
    assert task.tote_placement is Placement.right
    assert task.external_cameras == {"side": Placement.right, "front": Placement.left}
    assert task.camera_vantage is CameraVantage.phail
    assert task.start_pose is StartPose.droid_reset
    assert task.clutter_objects == []


def test_random_at_the_task_draws_even_when_the_plan_states_a_side() -> None:
    sides = {
        resolve(
            composed(
                tasks=[{"task_id": "cube-into-tote", "tote_placement": "random"}], tote_placement="left"
            ),
            CATALOG,
            transaction_key=f"key-{n}",
        )
        .resolved.tasks[0]
        .tote_placement
        for n in range(20)
    }
    assert sides == {Placement.left, Placement.right}


def test_a_side_or_mount_the_task_does_not_offer_is_refused() -> None:
    refused(
        staged(tote_placement="none"), ErrorCode.bad_request, "tote_placement is none", "left, right, random"
    )
    refused(
        staged(external_cameras={"top": "left"}),
        ErrorCode.bad_request,
        "camera mount 'top'",
        "'side', 'front'",
    )


def test_the_same_key_draws_the_same_and_another_key_draws_anew() -> None:
    first = resolve(staged(), CATALOG, transaction_key="tx-1")
    assert draws(resolve(staged(), CATALOG, transaction_key="tx-1")) == draws(first)
    assert [(e.endpoint, e.trial) for e in resolve(staged(), CATALOG, transaction_key="tx-1").episodes] == [
        (e.endpoint, e.trial) for e in first.episodes
    ]
    others = {str(draws(resolve(staged(), CATALOG, transaction_key=f"tx-{n}"))) for n in range(2, 12)}
    assert len(others | {str(draws(first))}) > 1
    orders = {
        tuple(resolve(staged(), CATALOG, transaction_key=f"tx-{n}").resolved.tasks[0].episode_order)
        for n in range(10)
    }
    assert len(orders) > 1


def test_without_a_key_the_draws_are_a_valid_example() -> None:
    example = resolve(staged(), CATALOG, transaction_key=None)
    valid(example)
    assert draws(resolve(staged(), CATALOG, transaction_key=None)) == draws(example)


def test_the_draws_of_two_tasks_are_their_own() -> None:
    plan = composed(
        tasks=["reach-v3", "push-v3"], endpoints=[remote("a"), remote("b")], episodes_per_endpoint=10
    )
    resolution = resolve(plan, CATALOG, transaction_key="k")
    valid(resolution)
    reach, push = resolution.resolved.tasks
    assert reach.episode_order != push.episode_order


# --- the catalogue as the contract lists it -----------------------------------------------------------------


def test_the_catalogue_lists_evals_and_composable_tasks() -> None:
    evals = evals_view(CATALOG).evals
    assert [summary.id for summary in evals] == [
        "metaworld.mt10",
        "metaworld.doors",
        "lab.staged",
        "metaworld.closed",
    ]
    assert evals[0].tasks == list(MT10_TASKS) and evals[0].embodiment == "sim" and evals[0].composable
    tasks = {str(summary.id): summary for summary in tasks_view(CATALOG).tasks}
    assert "window-open-v3" not in tasks
    assert tasks["reach-v3"].default_cap_per_episode_sec == 7 and tasks["reach-v3"].tote_placement == []
    cube = tasks["cube-into-tote"]
    assert cube.tote_placement == [Placement.left, Placement.right]
    assert cube.external_cameras == {
        "side": [Placement.left, Placement.right],
        "front": [Placement.left, Placement.right],
    }
    assert cube.objects == ["mug", "bowl", "pan", "spoon", "fork"]
    with pytest.raises(Refusal) as caught:
        tasks_view(NO_GRANT)
    assert CODES[caught.value.kind][0] is ErrorCode.forbidden


def test_a_catalogue_task_refuses_what_the_contract_cannot_carry() -> None:
    with pytest.raises(ValueError, match="not a task id"):
        sim_task("Reach_V3")
    with pytest.raises(ValueError, match="no seeds"):
        sim_task("reach-v3", seeds=())
    with pytest.raises(ValueError, match="no plan field varies"):
        TaskScene.of(sim_task("reach-v3", scene={"lighting": "dim"}))


def test_the_plans_tote_applies_to_the_tasks_with_one_and_a_task_stating_one_it_lacks_is_refused() -> None:
    mixed = sim_eval(
        "lab.mixed",
        "staged",
        2,
        (
            sim_task("cube-into-tote", scene=SCENE, default_cap_sec=60),
            sim_task("wipe-table", default_cap_sec=60),
        ),
    )
    catalog = catalog_of([mixed], served_policies=SPECS, may_compose=True)
    for plan in (
        named(eval="lab.mixed", tote_placement="left"),
        composed(rig_shape="sim", tasks=["cube-into-tote", "wipe-table"], tote_placement="left"),
    ):
        resolution = resolve(plan, catalog, transaction_key="k")
        valid(resolution)
        totes = {task.task_id: task.tote_placement for task in resolution.resolved.tasks}
        assert totes == {"cube-into-tote": Placement.left, "wipe-table": Placement.none}
    refused(
        composed(tasks=["cube-into-tote", {"task_id": "wipe-table", "tote_placement": "left"}]),
        ErrorCode.bad_request,
        "task 'wipe-table' has no tote",
        "tote_placement",
        catalog=catalog,
    )


# --- competitions -------------------------------------------------------------------------------------------

COMPETITION = {"type": "nebius_competition"}


def test_a_competition_takes_one_image_endpoint() -> None:
    plan = named(request_type=COMPETITION, endpoints=[image()])
    valid(resolve(plan, CATALOG, transaction_key="k"))


@pytest.mark.parametrize(
    ("endpoints", "words"),
    [
        ([served("candidate")], ("endpoints", "of kind image", "'candidate' is served")),
        ([remote("candidate")], ("endpoints", "of kind image", "'candidate' is remote")),
        ([image("a"), image("b")], ("endpoints", "exactly one endpoint", "defines 2 ('a', 'b')")),
        ([image("a"), served("b")], ("endpoints", "exactly one endpoint")),
    ],
)
def test_a_competition_of_another_kind_or_of_two_endpoints_is_refused_naming_the_rule(
    endpoints: list[dict[str, Any]], words: tuple[str, ...]
) -> None:
    refused(named(request_type=COMPETITION, endpoints=endpoints), ErrorCode.bad_request, *words)
    opened = resolve(
        named(request_type=COMPETITION, endpoints=endpoints),
        CATALOG,
        transaction_key="k",
        open_competitions=True,
    )
    assert set(opened.endpoints) == {entry["name"] for entry in endpoints}  # a lab's own competitions
