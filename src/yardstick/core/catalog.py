"""The catalogue: the evals a caller may name, each a suite of tasks on one benchmark, and the policies the
platform serves. Read per caller (an org's private evals are its own), in one query, into plain values the
front doors translate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.core.accounts import Caller
from yardstick.store.models import Eval, Hosted, HostedVersion, Org, ServedPolicy, Task
from yardstick.store.states import BuildStatus, HostedKind

# A task id, as the contracts carry one: lowercase words joined by single hyphens (Meta-World's `reach-v3`).
MAX_TASK_ID_WORDS = 16
TASK_ID = re.compile(rf"[a-z0-9]+(?:-[a-z0-9]+){{0,{MAX_TASK_ID_WORDS - 1}}}")
TASK_ID_RULE = f"lowercase words joined by single hyphens, at most {MAX_TASK_ID_WORDS}"


def check_task_id(task_id: str) -> str:
    """`task_id` if it follows the rule, else ValueError naming it and the rule."""
    if not TASK_ID.fullmatch(task_id):
        raise ValueError(f"not a task id: {task_id!r} ({TASK_ID_RULE})")
    return task_id


@dataclass(frozen=True)
class CatalogTask:
    """One task of an eval: its id, the benchmark's name for it, its cap, its seeds and its scene.

    `scene` states what a plan may vary (a front door reads it); empty for a simulator, which has no tote,
    no external camera, no kit and one start pose.
    """

    task_id: str
    benchmark_task: str
    description: str
    default_cap_sec: int
    seeds: tuple[int, ...]
    scene: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        check_task_id(self.task_id)
        if not self.seeds:
            raise ValueError(f"task {self.task_id!r} has no seeds: trial k runs seeds[k % len(seeds)]")
        if self.default_cap_sec < 1:
            raise ValueError(
                f"task {self.task_id!r} caps an episode at {self.default_cap_sec} s: a cap is >= 1 s"
            )


@dataclass(frozen=True)
class CatalogEval:
    """One eval a caller may name: its benchmark, embodiment, trials per task, tasks in order."""

    slug: str
    benchmark: str
    embodiment: str
    trials_per_task: int
    composable: bool
    accepting: bool
    tasks: tuple[CatalogTask, ...]
    description: str = ""
    # What its runs build the benchmark with, and record of each episode.
    benchmark_params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    record_video: bool = False
    record_fps: float | None = None

    def __post_init__(self) -> None:
        if self.trials_per_task < 1:
            raise ValueError(f"eval {self.slug!r} runs {self.trials_per_task} trials per task: at least 1")
        if not self.tasks:
            raise ValueError(f"eval {self.slug!r} has no task")


@dataclass(frozen=True)
class Catalog:
    """What one caller may name: the evals (already filtered by org), the tasks it may compose, the served
    policies, and whether its org holds the grant to state its own tasks."""

    evals: Mapping[str, CatalogEval] = field(hash=False)
    tasks: Mapping[str, tuple[CatalogEval, CatalogTask]] = field(hash=False)
    served_policies: frozenset[str]
    may_compose: bool
    # The org's deployed policies (served in a box), by name: the id of each one's newest ready version.
    deployments: Mapping[str, int] = field(default_factory=dict, hash=False)


def catalog_of(
    evals: Iterable[CatalogEval],
    *,
    served_policies: Iterable[str],
    may_compose: bool,
    deployments: Mapping[str, int] | None = None,
) -> Catalog:
    """A `Catalog` over `evals`, its task map built from the composable ones.

    A task id in two composable evals maps to the one with more tasks (MT10's tasks are MT50's too: composed,
    they run on MT50); between two of one size, to the one listed last.
    """
    listed = list(evals)
    tasks: dict[str, tuple[CatalogEval, CatalogTask]] = {}
    for evaluation in sorted(listed, key=lambda e: len(e.tasks)):
        if evaluation.composable:
            for task in evaluation.tasks:
                tasks[task.task_id] = (evaluation, task)
    return Catalog(
        evals={evaluation.slug: evaluation for evaluation in listed},
        tasks=tasks,
        served_policies=frozenset(served_policies),
        may_compose=may_compose,
        deployments=dict(deployments or {}),
    )


def read_catalog(session: Session, caller: Caller, org: Org | None = None) -> Catalog:
    """What `caller` may name (for `org`, else for any org of theirs): the evals of no org or of theirs,
    the policies served, and whether they may compose plans of tasks."""
    rows = session.execute(
        select(Eval, Task)
        .join(Task, Task.eval_id == Eval.id)
        .where((Eval.org_id.is_(None)) | (Eval.org_id.in_(caller.org_ids or {0})))
        .order_by(Eval.slug, Task.position)
    ).all()
    by_eval: dict[int, tuple[Eval, list[Task]]] = {}
    for row, task in rows:
        by_eval.setdefault(row.id, (row, []))[1].append(task)
    evals = [
        CatalogEval(
            slug=row.slug,
            benchmark=row.benchmark,
            embodiment=row.embodiment,
            trials_per_task=row.trials_per_task,
            composable=row.composable,
            accepting=row.accepting,
            description=row.description,
            benchmark_params=dict(row.benchmark_params),
            record_video=row.record_video,
            record_fps=row.record_fps,
            tasks=tuple(
                CatalogTask(
                    task_id=t.task_id,
                    benchmark_task=t.benchmark_task,
                    description=t.description,
                    default_cap_sec=t.default_cap_sec,
                    seeds=tuple(t.seeds),
                    scene=dict(t.scene),
                )
                for t in tasks
            ),
        )
        for row, tasks in by_eval.values()
    ]
    served = session.execute(select(ServedPolicy.name)).scalars()
    may_compose = org.may_compose if org is not None else any(o.may_compose for o in caller.orgs)
    owner = org or (caller.orgs[0] if caller.orgs else None)
    deployed = _deployments(session, owner.id) if owner is not None else {}
    return catalog_of(evals, served_policies=served, may_compose=may_compose, deployments=deployed)


def _deployments(session: Session, org_id: int) -> dict[str, int]:
    """The org's deployed policies that are running, each by the version that serves: the newest ready one,
    or the one a rollback pinned."""
    found: dict[str, int] = {}
    pinned: set[str] = set()
    for name, version_id, number, serving in session.execute(
        select(Hosted.name, HostedVersion.id, HostedVersion.number, Hosted.serving)
        .join(HostedVersion, HostedVersion.hosted_id == Hosted.id)
        .where(
            Hosted.org_id == org_id,
            Hosted.kind == HostedKind.POLICY,
            Hosted.removed_at.is_(None),
            Hosted.stopped.is_(False),
            HostedVersion.status == BuildStatus.READY,
        )
        .order_by(Hosted.name, HostedVersion.number)
    ).all():
        if name not in pinned:
            found[name] = version_id  # the last of each name is its newest
        if number == serving:
            pinned.add(name)  # a rollback's pin: kept over the newer ones after it
    return found
