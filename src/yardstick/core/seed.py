"""The catalogue a fresh platform offers: Meta-World MT10 and MT50 as evals with public boards, and the
policies a `served` endpoint may name. Installed idempotently at start, so an upgrade adds what is new and
changes nothing an admin set."""

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
)

# What a `served` endpoint may name, and the reference the engine builds it from.
SHIPPED_POLICIES = {"metaworld-expert": "expert", "random": "random"}


def install(session: Session) -> None:
    """Add the shipped evals, their tasks and public boards, and the shipped policy specs, where missing."""
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
