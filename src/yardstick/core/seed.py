"""The catalogue a fresh platform offers: Meta-World MT10 and MT50, LIBERO's five suites, PushT and ALOHA as
evals with public boards, and the policies a `served` endpoint may name. Installing them reads only the
benchmarks' declarations, so a platform starts where their simulators are not installed. Installed
idempotently at start, so an upgrade adds what is new and changes nothing an admin set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.core import admin
from yardstick.store.models import Eval, ServedPolicy


@dataclass(frozen=True)
class ShippedEval:
    slug: str
    title: str
    benchmark: str
    trials_per_task: int
    description: str
    # What every episode shows a policy and records for the run's page: one camera, small and without the
    # table's reflections (16 ms a frame on a CPU instead of 24), a video per episode.
    benchmark_params: dict[str, Any] = field(
        default_factory=lambda: {"cameras": ["corner"], "image_size": 128, "reflections": False}
    )
    record_video: bool = True


SHIPPED_EVALS = (
    ShippedEval(
        "metaworld.mt10",
        "Meta-World MT10",
        "mt10",
        10,
        "Ten Sawyer manipulation tasks in MuJoCo; success rate over 10 seeds a task.",
    ),
    ShippedEval(
        "metaworld.mt50",
        "Meta-World MT50",
        "mt50",
        10,
        "All fifty Meta-World tasks; success rate over 10 seeds a task.",
    ),
    # LIBERO as the field evaluates it: each task's 50 fixed initial states, the suite's step cap, both
    # cameras at 224 turned as openvla and openpi LIBERO policies were trained on them.
    *(
        ShippedEval(
            f"libero.{suite}",
            f"LIBERO-{title}",
            f"libero_{suite}",
            50,
            f"LIBERO-{title} ({count} tasks, Franka Panda, 20 Hz, {cap} steps): success rate over each "
            "task's 50 fixed initial states; agentview and wrist images at 224, in openvla's orientation.",
            {"cameras": ["agentview", "wrist"], "image_size": 224, "orientation": "openvla"},
        )
        for suite, title, count, cap in (
            ("spatial", "Spatial", 10, 220),
            ("object", "Object", 10, 280),
            ("goal", "Goal", 10, 300),
            ("10", "10", 10, 520),
            ("90", "90", 90, 400),
        )
    ),
    ShippedEval(
        "pusht",
        "PushT",
        "pusht",
        50,
        "Push the T block onto its target (10 Hz, 300 steps): success rate over 50 seeds; "
        "the 96×96 top view.",
        {"pixels": True, "image_size": 96},
    ),
    ShippedEval(
        "aloha",
        "ALOHA sim",
        "aloha",
        50,
        "ALOHA's bimanual insertion and transfer-cube (50 Hz, 400 steps, 14 joint targets): success rate "
        "over 50 seeds a task; the 480×640 top camera.",
        {"cameras": ["top"], "image_size": [480, 640]},
    ),
)

# What a `served` endpoint may name, and the reference the engine builds it from.
SHIPPED_POLICIES = {
    "metaworld-expert": "expert",
    "random": "random",  # each benchmark's own random policy, at its rate
    "aloha-expert": "yardstick.catalog.aloha_expert:TransferCubeExpert",
    "pusht-heuristic": "yardstick.catalog.pusht:PushTHeuristic",
}


# A rig eval on a single-arm Franka, played by an org's rig with an operator (`yardstick rig run`): what the
# simulated Franka's table holds (a cube and a tote), so a rig of the demo's plays it as a lab's would.
SHIPPED_RIG_EVALS = (
    (
        "franka.tabletop",
        "franka",
        "Franka tabletop",
        "Tabletop manipulation on a single-arm Franka, judged by an operator at the station: the verdicts "
        "and the progress ladder of positronic-eval-vocabulary, scored by positronic-evals.",
        (
            admin.RigTask(
                "cube-in-tote",
                "Put the cube in the tote.",
                60,
                {"tote_placement": ["left", "right"], "start_pose": "nominal", "objects": ["mug", "sponge"]},
                items=1,
            ),
            admin.RigTask(
                "push-cube-forward",
                "Push the cube away from you, to the far edge of the table.",
                45,
                {"start_pose": "nominal"},
            ),
        ),
    ),
)


def install(session: Session) -> None:
    """Add the shipped evals, their tasks and public boards, and the shipped policy specs, where missing."""
    for slug, shape, title, description, tasks in SHIPPED_RIG_EVALS:
        if session.execute(select(Eval.id).where(Eval.slug == slug)).first() is None:
            admin.create_rig_eval(session, slug, shape, tasks, title=title, description=description, trials=4)
    for shipped in SHIPPED_EVALS:
        if session.execute(select(Eval.id).where(Eval.slug == shipped.slug)).first() is not None:
            continue
        admin.create_eval(
            session,
            shipped.slug,
            shipped.benchmark,
            title=shipped.title,
            description=shipped.description,
            choice=admin.EvalTasks(trials=shipped.trials_per_task),
            params=dict(shipped.benchmark_params),
            record_video=shipped.record_video,
        )
    for name, reference in SHIPPED_POLICIES.items():
        if session.get(ServedPolicy, name) is None:
            session.add(ServedPolicy(name=name, reference=reference))
