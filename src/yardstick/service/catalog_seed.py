"""The catalogue a fresh platform offers: Meta-World MT10 and MT50 as evals with public boards, and the
policies a `served` endpoint may name. Installed idempotently at start, so an upgrade adds what is new and
changes nothing an admin set."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.store.models import Board, Eval, PolicySpec, Task


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
)

# What a `served` endpoint may name, and the reference the engine builds it from.
SHIPPED_POLICIES = {"metaworld-expert": "expert", "random": "random"}


def install(session: Session) -> None:
    """Add the shipped evals, their tasks and public boards, and the shipped policy specs, where missing."""
    from yardstick.catalog import resolve
    from yardstick.sdk.decorators import benchmark_spec

    for shipped in SHIPPED_EVALS:
        if session.execute(select(Eval).where(Eval.slug == shipped.slug)).scalar_one_or_none() is not None:
            continue
        spec = benchmark_spec(resolve("benchmark", shipped.benchmark))
        row = Eval(
            slug=shipped.slug,
            title=shipped.title,
            description=shipped.description,
            benchmark=shipped.benchmark,
            embodiment="sim",
            primary_metric="success_rate",
            trials_per_task=shipped.trials_per_task,
            composable=True,
            accepting=True,
            benchmark_params=dict(shipped.benchmark_params),
            record_video=shipped.record_video,
        )
        session.add(row)
        session.flush()
        for position, (task, description) in enumerate(spec.tasks.items()):
            session.add(
                Task(
                    eval_id=row.id,
                    task_id=task,
                    benchmark_task=task,
                    description=description,
                    position=position,
                    default_cap_sec=math.ceil(spec.limit(task)),
                    seeds=list(spec.seeds),
                    scene={},
                )
            )
        session.add(Board(slug=shipped.slug, title=shipped.title, eval_id=row.id, visibility="public"))
    for name, reference in SHIPPED_POLICIES.items():
        if session.get(PolicySpec, name) is None:
            session.add(PolicySpec(name=name, reference=reference))
