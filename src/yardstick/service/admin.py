"""What an administrator does with direct access to the database: orgs, users, keys, evals, boards and
baselines. The CLI's `yardstick admin …` calls these; so do tests and benchmarks setting up a platform."""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any

from platform_client.tasks import TaskRef
from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.service import billing, keys, passwords
from yardstick.service.billing_config import BillingConfigError, parse_credits
from yardstick.store.models import ApiKey, Baseline, Board, Eval, Membership, Org, Submission, Task, User


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
    billing_mode: str = "packaged",
    on_exhausted: str = "block",
) -> Org:
    if session.execute(select(Org).where(Org.slug == slug)).scalar_one_or_none() is not None:
        raise AdminError(f"org {slug!r} exists already")
    _one_of("billing mode", billing_mode, billing.BILLING_MODES)
    _one_of("on_exhausted", on_exhausted, ON_EXHAUSTED)
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


def set_password(session: Session, login: str, password: str) -> None:
    """A user's password for the platform's sign-in page: its salted scrypt digest is kept, never itself."""
    try:
        user(session, login).password_digest = passwords.hash_password(password)
    except passwords.PasswordRefused as exc:
        raise AdminError(f"password: {exc}") from None


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
    # The contract's clients refuse a catalogue with a task id outside its rule: one such task would break
    # resolve, create and the catalogue for everyone who can see the eval.
    for task in chosen:
        try:
            TaskRef(task)
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
        session.add(
            Board(
                slug=slug,
                title=row.title,
                eval_id=row.id,
                visibility="tenant" if owner else "public",
                org_id=owner,
            )
        )
    return row


def add_baseline(session: Session, board_slug: str, submission_id: int, publisher: str, name: str) -> None:
    board = session.execute(select(Board).where(Board.slug == board_slug)).scalar_one_or_none()
    if board is None:
        raise AdminError(f"no board {board_slug!r}")
    submission = session.get(Submission, submission_id)
    if submission is None or submission.eval_id != board.eval_id:
        raise AdminError(f"submission {submission_id:x} is not a run of board {board_slug!r}'s eval")
    session.add(
        Baseline(board_id=board.id, submission_id=submission_id, publisher=publisher, display_name=name)
    )


# --- billing ---------------------------------------------------------------------------------------------

ON_EXHAUSTED = ("block", "meter")


def _one_of(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
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
        _one_of("billing mode", billing_mode, billing.BILLING_MODES)
        found.billing_mode = billing_mode
    if on_exhausted is not None:
        _one_of("on_exhausted", on_exhausted, ON_EXHAUSTED)
        found.on_exhausted = on_exhausted
    for what, value in (("per_day", per_day), ("concurrent", concurrent)):
        if value is not None and value < 0:
            raise AdminError(f"{what} {value}: a limit is a count, 0 or more")
    if per_day is not None:
        found.submissions_per_day = per_day
    if concurrent is not None:
        found.concurrent_submissions = concurrent
    return found


def set_billing_role(session: Session, slug: str, login: str, role: str) -> None:
    """Whether a member may spend the org's money (buy credits): `spender`, or `none`."""
    _one_of("billing role", role, billing.BILLING_ROLES)
    found = session.get(Membership, (user(session, login).id, org(session, slug).id))
    if found is None:
        raise AdminError(
            f"user {login!r} is not a member of org {slug!r} (yardstick admin user create --org)"
        )
    found.billing_role = role


def grant_credits(session: Session, slug: str, amount: str, note: str = "") -> tuple[int, int]:
    """Add credits to an org's balance: `amount` in credits (`100`, `2.5`) or integer units with a `u`
    suffix. Returns the units granted and the balance's posted units after."""
    try:
        units = parse_credits(amount)
        account = billing.post(session, org(session, slug).id, units, kind="grant", note=note or "granted")
    except (billing.BillingError, BillingConfigError) as exc:
        raise AdminError(str(exc)) from None
    return units, account.posted_units


def settle_purchase(session: Session, purchase_id: str, note: str = "") -> tuple[str, int]:
    """Grant an open purchase's credits once its payment arrived (the built-in payment provider's way of
    confirming one). Returns the org's slug and the units granted."""
    try:
        row = billing.settle_purchase(session, purchase_id, note)
    except billing.BillingError as exc:
        raise AdminError(str(exc)) from None
    found = session.get(Org, row.org_id)
    return (found.slug if found else "?"), int(row.package["credit_units"])


def credit_summary(session: Session, slug: str) -> dict[str, Any]:
    return billing.describe(session, org(session, slug).id)
