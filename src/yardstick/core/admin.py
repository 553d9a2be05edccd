"""What an administrator does with direct access to the database: orgs, users, keys, evals, boards and
baselines. The CLI's `yardstick admin …` calls these; so do tests and benchmarks setting up a platform.
Credits (`billing.admin`) and passwords (`signin.passwords`) have their own."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.core import keys
from yardstick.core.catalog import check_task_id
from yardstick.core.runs import hosted_ref
from yardstick.store.models import (
    ApiKey,
    Baseline,
    Board,
    Eval,
    Hosted,
    HostedVersion,
    Membership,
    Org,
    Run,
    Task,
    User,
)
from yardstick.store.states import BillingMode, BoardVisibility, BuildStatus, HostedKind, OnExhausted


class AdminError(ValueError):
    """An admin command that cannot be done as asked; the message says what and why."""


def create_org(
    session: Session,
    slug: str,
    *,
    name: str = "",
    per_day: int = 20,
    concurrent: int = 4,
    may_compose: bool = True,
    billing_mode: str = BillingMode.PACKAGED,
    on_exhausted: str = OnExhausted.BLOCK,
) -> Org:
    if session.execute(select(Org).where(Org.slug == slug)).scalar_one_or_none() is not None:
        raise AdminError(f"org {slug!r} exists already")
    one_of("billing mode", billing_mode, BillingMode)
    one_of("on_exhausted", on_exhausted, OnExhausted)
    org = Org(
        slug=slug,
        name=name or slug,
        submissions_per_day=per_day,
        concurrent_submissions=concurrent,
        may_compose=may_compose,
        billing_mode=billing_mode,
        on_exhausted=on_exhausted,
    )
    session.add(org)
    session.flush()
    return org


def org(session: Session, slug: str) -> Org:
    found = session.execute(select(Org).where(Org.slug == slug)).scalar_one_or_none()
    if found is None:
        raise AdminError(f"no org {slug!r}")
    return found


def create_user(
    session: Session, login: str, *, orgs: list[str], alias: str | None = None, is_admin: bool = False
) -> User:
    if session.execute(select(User).where(User.login == login)).scalar_one_or_none() is not None:
        raise AdminError(f"user {login!r} exists already")
    user = User(login=login, alias=alias, is_admin=is_admin)
    session.add(user)
    session.flush()
    for slug in orgs:
        session.add(Membership(user_id=user.id, org_id=org(session, slug).id))
    return user


def user(session: Session, login: str) -> User:
    found = session.execute(select(User).where(User.login == login)).scalar_one_or_none()
    if found is None:
        raise AdminError(f"no user {login!r}")
    return found


def add_member(session: Session, login: str, slug: str) -> None:
    session.merge(Membership(user_id=user(session, login).id, org_id=org(session, slug).id))


def create_key(session: Session, login: str, label: str = "") -> keys.MintedKey:
    return keys.mint(session, user(session, login).id, label)


def revoke_key(session: Session, prefix: str) -> None:
    found = session.execute(select(ApiKey).where(ApiKey.prefix == prefix)).scalar_one_or_none()
    if found is None or not keys.revoke(session, found.id):
        raise AdminError(f"no live key with prefix {prefix!r}")


@dataclass(frozen=True)
class EvalTasks:
    """Which tasks of a benchmark an eval offers (None: all), and how many trials each."""

    tasks: list[str] | None = None
    trials: int = 10


@dataclass(frozen=True)
class RigTask:
    """One task of a rig eval: what the operator lays out and the policy is told, its cap, its scene (what a
    plan may vary: `positronic.plans.TaskScene`), and how many items it moves (None: it moves none)."""

    task_id: str
    instruction: str
    cap_sec: int
    scene: Mapping[str, Any] = field(default_factory=dict)
    items: int | None = None


def create_rig_eval(
    session: Session,
    slug: str,
    shape: str,
    tasks: Sequence[RigTask],
    *,
    title: str = "",
    description: str = "",
    trials: int = 10,
    org_slug: str | None = None,
) -> Eval:
    """An eval played on a robot of `shape` by a rig with an operator, with a board: no simulator builds it,
    so its tasks are stated here rather than read off a benchmark's declaration."""
    if session.execute(select(Eval).where(Eval.slug == slug)).scalar_one_or_none() is not None:
        raise AdminError(f"eval {slug!r} exists already")
    if not tasks:
        raise AdminError(f"eval {slug!r}: a rig eval states at least one task")
    for task in tasks:
        try:
            check_task_id(task.task_id)
        except ValueError as exc:
            raise AdminError(str(exc)) from None
    owner = org(session, org_slug).id if org_slug else None
    row = Eval(
        slug=slug,
        title=title or slug,
        description=description,
        benchmark=f"rig:{shape}",
        embodiment=shape,
        trials_per_task=trials,
        org_id=owner,
        benchmark_params={"items": {t.task_id: t.items for t in tasks if t.items is not None}},
        record_video=True,
    )
    session.add(row)
    session.flush()
    for position, task in enumerate(tasks):
        session.add(
            Task(
                eval_id=row.id,
                task_id=task.task_id,
                benchmark_task=task.task_id,
                description=task.instruction,
                position=position,
                default_cap_sec=task.cap_sec,
                seeds=list(range(trials)),
                scene=dict(task.scene),
            )
        )
    session.add(_board_of(row))
    return row


def _board_of(row: Eval) -> Board:
    """An eval's board: its org's (tenant) where the eval is an org's, else public."""
    return Board(
        slug=row.slug,
        title=row.title,
        eval_id=row.id,
        visibility=BoardVisibility.TENANT if row.org_id else BoardVisibility.PUBLIC,
        org_id=row.org_id,
    )


def create_eval(
    session: Session,
    slug: str,
    benchmark: str,
    *,
    title: str = "",
    description: str = "",
    choice: EvalTasks = EvalTasks(),
    org_slug: str | None = None,
    board: bool = True,
    params: dict[str, Any] | None = None,
    record_video: bool = False,
    record_fps: float | None = None,
) -> Eval:
    """An eval over a benchmark the engine can build, with its tasks, and a board: public, or the org's.
    `params` go to the benchmark's constructor (cameras, image size); `record_video` has every episode
    recorded (a video per camera, the trajectory) for the run's page."""
    from yardstick.catalog import resolve
    from yardstick.sdk.decorators import benchmark_spec

    if session.execute(select(Eval).where(Eval.slug == slug)).scalar_one_or_none() is not None:
        raise AdminError(f"eval {slug!r} exists already")
    if record_fps is not None and not record_fps > 0:
        raise AdminError(f"record_fps {record_fps}: must be a positive number of frames a second")
    try:
        built = resolve("benchmark", benchmark)
        spec = benchmark_spec(built)
    except ValueError as exc:  # an AuthoringError, or a catalog builder refusing its arguments
        raise AdminError(f"benchmark {benchmark!r}: {exc}") from None
    try:
        inspect.signature(built).bind_partial(**(params or {}))
    except (TypeError, ValueError) as exc:
        raise AdminError(f"params of {benchmark!r}: {exc}") from None
    chosen = choice.tasks or list(spec.tasks)
    unknown = [t for t in chosen if t not in spec.tasks]
    if unknown:
        raise AdminError(f"tasks {unknown} are not tasks of {benchmark} ({', '.join(spec.tasks)})")
    # The contracts' clients refuse a catalogue with a task id outside the rule: one such task would break
    # resolve, create and the catalogue for everyone who can see the eval.
    for task in chosen:
        try:
            check_task_id(task)
        except ValueError as exc:
            raise AdminError(f"task {task!r} of {benchmark}: {exc}") from None
    owner = org(session, org_slug).id if org_slug else None
    row = Eval(
        slug=slug,
        title=title or slug,
        description=description,
        benchmark=benchmark,
        embodiment="sim",
        trials_per_task=choice.trials,
        org_id=owner,
        benchmark_params=dict(params or {}),
        record_video=record_video,
        record_fps=record_fps,
    )
    session.add(row)
    session.flush()
    for position, task in enumerate(chosen):
        session.add(
            Task(
                eval_id=row.id,
                task_id=task,
                benchmark_task=task,
                description=spec.tasks[task],
                position=position,
                default_cap_sec=math.ceil(spec.limit(task)),
                seeds=list(spec.seeds),
            )
        )
    if board:
        session.add(_board_of(row))
    return row


def eval_of_hosted(
    session: Session,
    slug: str,
    owner: str,
    name: str,
    *,
    trials: int = 10,
    public: bool = False,
    title: str = "",
) -> Eval:
    """A catalogue eval, with its board, over the newest ready version of a benchmark org `owner` registered
    (Sequences' `seq deploy`): Positronic plans may name it, Sequences evals too, and both rank on its board
    (the owner's, or with `public` everyone's). Its tasks keep the benchmark's names; their catalogue ids are
    those names made task ids (lowercase words and hyphens)."""
    if session.execute(select(Eval).where(Eval.slug == slug)).scalar_one_or_none() is not None:
        raise AdminError(f"eval {slug!r} exists already")
    owner_org = org(session, owner)
    found = session.execute(
        select(HostedVersion)
        .join(Hosted, Hosted.id == HostedVersion.hosted_id)
        .where(
            Hosted.org_id == owner_org.id,
            Hosted.kind == HostedKind.BENCHMARK,
            Hosted.name == name,
            HostedVersion.status == BuildStatus.READY,
        )
        .order_by(HostedVersion.number.desc())
        .limit(1)
    ).scalar_one_or_none()
    if found is None:
        raise AdminError(f"org {owner!r} has no ready benchmark {name!r} (seq deploy registers one)")
    declaration = (found.checked or {}).get("declaration") or {}
    ids = {task: task_id_of(task) for task in declaration.get("tasks", {})}
    if len(set(ids.values())) != len(ids):
        raise AdminError(f"benchmark {name!r}: two of its tasks make the same task id ({ids})")
    row = Eval(
        slug=slug,
        title=title or slug,
        description=f"{owner}'s benchmark {name}, v{found.number}",
        benchmark=hosted_ref(found.id),
        embodiment="sim",
        trials_per_task=trials,
        org_id=None if public else owner_org.id,
        record_video=True,
    )
    session.add(row)
    session.flush()
    for position, (task, description) in enumerate(declaration["tasks"].items()):
        session.add(
            Task(
                eval_id=row.id,
                task_id=ids[task],
                benchmark_task=task,
                description=description,
                position=position,
                default_cap_sec=math.ceil(float(declaration["max_seconds"][task])),
                seeds=list(declaration["seeds"]),
            )
        )
    session.add(
        Board(
            slug=slug,
            title=row.title,
            eval_id=row.id,
            visibility=BoardVisibility.PUBLIC if public else BoardVisibility.TENANT,
            org_id=None if public else owner_org.id,
        )
    )
    return row


def task_id_of(name: str) -> str:
    """A task's name made a task id: lowercase, each run of other characters one hyphen."""
    made = "-".join(part for part in re.split(r"[^a-z0-9]+", name.lower()) if part)
    return check_task_id(made or "task")


def add_baseline(session: Session, board_slug: str, run_id: int, publisher: str, name: str) -> None:
    board = session.execute(select(Board).where(Board.slug == board_slug)).scalar_one_or_none()
    if board is None:
        raise AdminError(f"no board {board_slug!r}")
    run = session.get(Run, run_id)
    if run is None or run.eval_id != board.eval_id:
        raise AdminError(f"submission {run_id:x} is not a run of board {board_slug!r}'s eval")
    if run.sampled:
        # A reference the board's runs are read against plays the eval whole, as a ranked run does.
        raise AdminError(
            f"submission {run_id:x} played a sample of {run.episodes_total} of the eval's episodes: "
            "a baseline is a run of the whole eval, which a sampled run is not"
        )
    session.add(Baseline(board_id=board.id, submission_id=run_id, publisher=publisher, display_name=name))


def one_of(what: str, value: str, allowed: type[StrEnum]) -> None:
    if value not in set(allowed):
        raise AdminError(f"{what} {value!r} is not one of {', '.join(allowed)}")


def set_org(
    session: Session,
    slug: str,
    *,
    billing_mode: str | None = None,
    on_exhausted: str | None = None,
    per_day: int | None = None,
    concurrent: int | None = None,
) -> Org:
    """Change an org's billing mode (`packaged` | `pay_as_you_go`), what its quotas do when spent (`block`
    refuses, `meter` admits and counts past the limit), or the limits themselves. Runs already admitted
    keep the billing they were admitted under."""
    found = org(session, slug)
    if billing_mode is not None:
        one_of("billing mode", billing_mode, BillingMode)
        found.billing_mode = BillingMode(billing_mode)
    if on_exhausted is not None:
        one_of("on_exhausted", on_exhausted, OnExhausted)
        found.on_exhausted = on_exhausted
    for what, value in (("per_day", per_day), ("concurrent", concurrent)):
        if value is not None and value < 0:
            raise AdminError(f"{what} {value}: a limit is a count, 0 or more")
    if per_day is not None:
        found.submissions_per_day = per_day
    if concurrent is not None:
        found.concurrent_submissions = concurrent
    return found
