"""The platform's tables. Ids are random positive 63-bit integers (the contract carries them as bare hex),
times are aware UTC, and anything shaped by a contract (a plan, a resolved plan, a result) is kept as the
JSON the contract defines.

Secrets never land here in the clear: an API key is its prefix (to find it) and a SHA-256 of the whole
(to check it; a key has 256 bits of entropy, so a slow hash buys nothing).
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from yardstick.store.states import (
    Audience,
    BillingMode,
    BillingRole,
    BoardVisibility,
    BuildStatus,
    Contract,
    EpisodeState,
    HostedKind,
    LedgerKind,
    OnExhausted,
    PurchaseState,
    QuotaKind,
    ReservationState,
    RunStatus,
    UploadState,
    VolumeKind,
)
from yardstick.store.text import Chars, LongText, Words, name_columns


def new_id() -> int:
    """A random id in (0, 2**63): the contract's `Id64` range, unguessable across orgs."""
    return secrets.randbits(63) or 1


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {int: BigInteger, dict[str, Any]: JSON, list[Any]: JSON}


class UtcDateTime(TypeDecorator[dt.datetime]):
    """Aware UTC in and out, on SQLite (which keeps no zone and hands back naive times) as on PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("a stored time is aware: naive times say nothing of their zone")
        return value.astimezone(dt.UTC)

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _time(nullable: bool = False) -> Any:
    return mapped_column(UtcDateTime(), nullable=nullable, default=None if nullable else utcnow)


class Org(Base):
    __tablename__ = "orgs"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    slug: Mapped[str] = mapped_column(Chars(64), unique=True)
    name: Mapped[str] = mapped_column(Chars(200), default="")
    plan: Mapped[str] = mapped_column(Chars(64), default="standard")
    # Quota rules: submissions a day (per user of the org) and at once (for the whole org).
    submissions_per_day: Mapped[int] = mapped_column(Integer, default=20)
    concurrent_submissions: Mapped[int] = mapped_column(Integer, default=4)
    # May this org compose plans from catalogue tasks (the contract's "customer grant")?
    may_compose: Mapped[bool] = mapped_column(Boolean, default=True)
    # What happens when a quota runs out: `block` refuses the submission, `meter` lets it through and counts.
    on_exhausted: Mapped[str] = mapped_column(Chars(16), default=OnExhausted.BLOCK)
    # `packaged`: invoiced by its terms, no credits held. `pay_as_you_go`: runs spend the credit balance.
    billing_mode: Mapped[BillingMode] = mapped_column(Words(BillingMode, 32), default=BillingMode.PACKAGED)
    created_at: Mapped[dt.datetime] = _time()


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    login: Mapped[str] = mapped_column(Chars(200), unique=True)
    alias: Mapped[str | None] = mapped_column(Chars(200), nullable=True)
    email: Mapped[str | None] = mapped_column(Chars(320), nullable=True)
    # For signing in to the platform's own pages (the device flow's approval): a salted scrypt digest, never
    # the password. None: this user signs in through an identity provider only.
    password_digest: Mapped[str | None] = mapped_column(Chars(300), nullable=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = _time()


class Membership(Base):
    __tablename__ = "memberships"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), primary_key=True)
    role: Mapped[str] = mapped_column(Chars(32), default="member")
    # May this member spend the org's money (buy credits)? `none` | `spender`.
    billing_role: Mapped[BillingRole] = mapped_column(Words(BillingRole, 16), default=BillingRole.NONE)


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(Chars(32), unique=True)
    digest: Mapped[str] = mapped_column(Chars(64))
    label: Mapped[str] = mapped_column(Chars(200), default="")
    created_at: Mapped[dt.datetime] = _time()
    revoked_at: Mapped[dt.datetime | None] = _time(nullable=True)
    last_used_at: Mapped[dt.datetime | None] = _time(nullable=True)


class Rig(Base):
    """A robot of an org's, with its rig process: it claims the org's runs of its `shape` and plays them with
    an operator. Its key is stored as `ApiKey`'s are (a prefix to find the row, a SHA-256 to check it);
    `session` is the token of the rig process that last spoke, `seen_at` when (online while recent)."""

    __tablename__ = "rigs"
    __table_args__ = (UniqueConstraint("org_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(Chars(64))
    shape: Mapped[str] = mapped_column(Chars(16))
    prefix: Mapped[str] = mapped_column(Chars(32), unique=True)
    digest: Mapped[str] = mapped_column(Chars(64))
    session: Mapped[str | None] = mapped_column(Chars(64), nullable=True)
    seen_at: Mapped[dt.datetime | None] = _time(nullable=True)
    created_at: Mapped[dt.datetime] = _time()
    revoked_at: Mapped[dt.datetime | None] = _time(nullable=True)


class Eval(Base):
    """A catalogue eval: a suite of tasks on one benchmark. `org_id` set: offered to that org only."""

    __tablename__ = "evals"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    slug: Mapped[str] = mapped_column(Chars(128), unique=True)
    title: Mapped[str] = mapped_column(Chars(200), default="")
    description: Mapped[str] = mapped_column(LongText(), default="")
    # A reference the engine resolves (mt10, gym:..., mod:Class).
    benchmark: Mapped[str] = mapped_column(Chars(500))
    benchmark_params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    embodiment: Mapped[str] = mapped_column(Chars(64), default="sim")
    primary_metric: Mapped[str] = mapped_column(Chars(64), default="success_rate")
    trials_per_task: Mapped[int] = mapped_column(Integer, default=10)
    # Record every episode's camera video (the benchmark's observations must carry images), at this rate.
    record_video: Mapped[bool] = mapped_column(Boolean, default=False)
    record_fps: Mapped[float | None] = mapped_column(Float, nullable=True)
    composable: Mapped[bool] = mapped_column(Boolean, default=True)
    accepting: Mapped[bool] = mapped_column(Boolean, default=True)
    org_id: Mapped[int | None] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), nullable=True)
    created_at: Mapped[dt.datetime] = _time()


class Task(Base):
    """A catalogue task: one task of a benchmark, by a contract task id (lowercase words and hyphens)."""

    __tablename__ = "tasks"
    __table_args__ = (UniqueConstraint("eval_id", "task_id"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    eval_id: Mapped[int] = mapped_column(ForeignKey("evals.id", ondelete="CASCADE"), index=True)
    task_id: Mapped[str] = mapped_column(Chars(128))
    benchmark_task: Mapped[str] = mapped_column(Chars(128))
    description: Mapped[str] = mapped_column(LongText(), default="")
    position: Mapped[int] = mapped_column(Integer, default=0)
    default_cap_sec: Mapped[int] = mapped_column(Integer)
    seeds: Mapped[list[Any]] = mapped_column(JSON, default=list)
    # What the benchmark can vary per plan (none for the shipped simulators): {"tote_placement": [...], ...}.
    scene: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class ServedPolicy(Base):
    """A policy the platform knows how to serve: what a `served` endpoint's `spec` names, and the reference
    (with constructor params) a worker builds it from."""

    __tablename__ = "policy_specs"

    name: Mapped[str] = mapped_column(Chars(128), primary_key=True)
    reference: Mapped[str] = mapped_column(Chars(500))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Board(Base):
    __tablename__ = "boards"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    slug: Mapped[str] = mapped_column(Chars(128), unique=True)
    title: Mapped[str] = mapped_column(Chars(200))
    eval_id: Mapped[int] = mapped_column(ForeignKey("evals.id", ondelete="CASCADE"))
    visibility: Mapped[BoardVisibility] = mapped_column(
        Words(BoardVisibility, 16), default=BoardVisibility.PUBLIC
    )
    org_id: Mapped[int | None] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), nullable=True)


class Baseline(Base):
    """A reference model's run shown on a board, unranked, with who released it."""

    __tablename__ = "baselines"
    __table_args__ = (UniqueConstraint("board_id", "submission_id"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    board_id: Mapped[int] = mapped_column(ForeignKey("boards.id", ondelete="CASCADE"))
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    publisher: Mapped[str] = mapped_column(Chars(200))
    display_name: Mapped[str] = mapped_column(Chars(200))


class WorkerBeat(Base):
    """A worker's last sign of life, so a pending run can say it waits for one."""

    __tablename__ = "worker_beats"

    name: Mapped[str] = mapped_column(Chars(128), primary_key=True)
    host: Mapped[str] = mapped_column(Chars(200), default="")
    seen_at: Mapped[dt.datetime] = _time()


class Run(Base):
    """What a caller asked for, through one front door (`contract`): its episodes are the queue's rows.
    `plan` and `resolved` are that door's own documents, kept as it wrote them; everything the platform
    itself reads (endpoints, counts, status, scores) is in columns of its own."""

    __tablename__ = "submissions"
    __table_args__ = (
        UniqueConstraint("user_id", "transaction_key"),
        Index("ix_submissions_status_received", "status", "received_at"),
        # An org's runs by state: its active ones are counted on every admission and every `users.me`, and
        # an org's finished runs, which only grow, must not be read to count them.
        Index("ix_submissions_org_status", "org_id", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id"))  # indexed with status, above
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    eval_id: Mapped[int | None] = mapped_column(ForeignKey("evals.id"), nullable=True)
    alias: Mapped[str | None] = mapped_column(Chars(200), nullable=True)
    transaction_key: Mapped[str | None] = mapped_column(Chars(200), nullable=True)
    # The unguessable name of the run's page and replay (`/v/<token>/`): a link that opens without a key.
    replay_token: Mapped[str | None] = mapped_column(Chars(64), unique=True, nullable=True)
    plan_digest: Mapped[str] = mapped_column(Chars(64))
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)
    resolved: Mapped[dict[str, Any]] = mapped_column(JSON)
    sampled: Mapped[bool] = mapped_column(Boolean, default=False)
    contract: Mapped[Contract] = mapped_column(Words(Contract, 16), default=Contract.POSITRONIC)
    # The benchmark its episodes play: the reference the engine builds, its constructor's parameters, and
    # what is recorded of each episode ({video, trajectory, fps}; None: nothing).
    benchmark: Mapped[str] = mapped_column(Chars(500), default="")
    benchmark_params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    recording: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The endpoints its episodes name: {name: {kind, wire, address, spec, params, benchmark_params}}.
    endpoints: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    audience: Mapped[Audience] = mapped_column(Words(Audience, 16), default=Audience.ORG)
    status: Mapped[RunStatus] = mapped_column(Words(RunStatus, 16), default=RunStatus.PENDING)
    # An errored run: what kind of failure ended it (`FailureKind`), and the sentence saying how.
    failure: Mapped[str | None] = mapped_column(Chars(32), nullable=True)
    reason: Mapped[str | None] = mapped_column(LongText(), nullable=True)
    episodes_total: Mapped[int] = mapped_column(Integer)
    episodes_done: Mapped[int] = mapped_column(Integer, default=0)
    scores: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # A run that stops by a rule: the rule, the rounds released, what each round's look said (`store.rounds`).
    stopping: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # A run on a real robot: the rig shape it needs (None: a simulation the workers play), and the rig that
    # claimed it (None while it waits for one).
    rig_shape: Mapped[str | None] = mapped_column(Chars(16), nullable=True)
    rig_id: Mapped[int | None] = mapped_column(ForeignKey("rigs.id"), nullable=True)
    received_at: Mapped[dt.datetime] = _time()
    started_at: Mapped[dt.datetime | None] = _time(nullable=True)
    ended_at: Mapped[dt.datetime | None] = _time(nullable=True)
    cancelled_at: Mapped[dt.datetime | None] = _time(nullable=True)


class RunEpisode(Base):
    """One episode of a run: the unit of the queue. A worker leases it until `lease_expires_at`; a lease
    that runs out puts it back; `attempt` counts the leases it took. `cap_s` is the run's limit on its
    robot time (None: the task's own)."""

    __tablename__ = "episodes"
    __table_args__ = (
        UniqueConstraint("submission_id", "index"),
        Index("ix_episodes_queue", "state", "lease_expires_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    task_pos: Mapped[int] = mapped_column(Integer)  # the task node of the plan it belongs to
    task_id: Mapped[str] = mapped_column(Chars(128))
    benchmark_task: Mapped[str] = mapped_column(Chars(128))
    endpoint: Mapped[str] = mapped_column(Chars(200))
    trial: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    cap_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    state: Mapped[EpisodeState] = mapped_column(Words(EpisodeState, 16), default=EpisodeState.QUEUED)
    lease_owner: Mapped[str | None] = mapped_column(Chars(128), nullable=True)
    lease_expires_at: Mapped[dt.datetime | None] = _time(nullable=True)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(LongText(), nullable=True)
    finished_at: Mapped[dt.datetime | None] = _time(nullable=True)


class Artifact(Base):
    __tablename__ = "artifacts"
    __table_args__ = (UniqueConstraint("submission_id", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(Chars(500))
    size: Mapped[int] = mapped_column(BigInteger)
    content_type: Mapped[str] = mapped_column(Chars(100), default="application/octet-stream")
    created_at: Mapped[dt.datetime] = _time()


class QuotaEvent(Base):
    """A run counted against a quota (`QuotaKind.CHARGE`), or given back (`REFUND`)."""

    __tablename__ = "quota_events"
    __table_args__ = (Index("ix_quota_user_at", "user_id", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    kind: Mapped[QuotaKind] = mapped_column(Words(QuotaKind, 16))
    meter: Mapped[str] = mapped_column(Chars(32), default="submissions")
    at: Mapped[dt.datetime] = _time()


# --- sign-in ---------------------------------------------------------------------------------------------


class Identity(Base):
    """An account at an identity provider (GitHub, an OpenID Connect issuer, the platform itself) that signs
    in as a user. `users.register` finds a user by it, so one account is one user however often it comes."""

    __tablename__ = "identities"
    __table_args__ = (UniqueConstraint("provider", "issuer", "subject"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    provider: Mapped[str] = mapped_column(Chars(32))  # github | oidc | yardstick
    issuer: Mapped[str] = mapped_column(Chars(300), default="")  # the provider's base URL
    subject: Mapped[str] = mapped_column(Chars(200))  # the provider's stable id of the account
    email: Mapped[str | None] = mapped_column(Chars(320), nullable=True)
    created_at: Mapped[dt.datetime] = _time()


class DeviceGrant(Base):
    """One device-flow sign-in (RFC 8628) where the platform is the provider: a CLI holds the device code
    (kept here only as its SHA-256), a person approves the user code in a browser, the CLI's next poll
    gets its token once."""

    __tablename__ = "device_grants"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    device_digest: Mapped[str] = mapped_column(Chars(64), unique=True)
    user_code: Mapped[str] = mapped_column(Chars(16), unique=True)
    client_name: Mapped[str] = mapped_column(Chars(200), default="")
    interval_s: Mapped[int] = mapped_column(Integer, default=5)
    created_at: Mapped[dt.datetime] = _time()
    expires_at: Mapped[dt.datetime] = _time()
    last_polled_at: Mapped[dt.datetime | None] = _time(nullable=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), nullable=True)
    approved: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # None: not yet decided
    decided_at: Mapped[dt.datetime | None] = _time(nullable=True)
    consumed_at: Mapped[dt.datetime | None] = _time(nullable=True)


class WebSession(Base):
    """A browser signed in to the platform's pages: the cookie's SHA-256, whose user, until when."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    digest: Mapped[str] = mapped_column(Chars(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[dt.datetime] = _time()
    expires_at: Mapped[dt.datetime] = _time()


# --- credits -----------------------------------------------------------------------------------------------


class CreditAccount(Base):
    """An org's credit balance in integer units (one credit is 60,000,000,000). `reserved_units` is held by
    runs not yet settled; what a run may reserve is `posted_units - reserved_units`. The row is locked while
    a reservation is taken, so concurrent creates never overdraw it."""

    __tablename__ = "credit_accounts"

    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), primary_key=True)
    posted_units: Mapped[int] = mapped_column(BigInteger, default=0)
    reserved_units: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[dt.datetime] = _time()


class CreditEntry(Base):
    """The ledger: every change to a balance, signed (grant, purchase, charge, …), with what caused it."""

    __tablename__ = "credit_entries"
    __table_args__ = (Index("ix_credit_entries_org_at", "org_id", "created_at"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"))
    kind: Mapped[LedgerKind] = mapped_column(Words(LedgerKind, 16))
    units: Mapped[int] = mapped_column(BigInteger)
    submission_id: Mapped[int | None] = mapped_column(
        ForeignKey("submissions.id", ondelete="SET NULL"), nullable=True
    )
    purchase_id: Mapped[str | None] = mapped_column(Chars(64), nullable=True)
    note: Mapped[str] = mapped_column(LongText(), default="")
    created_at: Mapped[dt.datetime] = _time()


class Reservation(Base):
    """The credits a pay-as-you-go run holds: its frozen quote, the maximum reserved at create, and at the
    end the real charge (the rest released). `state`: held | settled | review."""

    __tablename__ = "reservations"

    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True
    )
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    quote: Mapped[dict[str, Any]] = mapped_column(JSON)
    reserved_units: Mapped[int] = mapped_column(BigInteger)
    charged_units: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    state: Mapped[ReservationState] = mapped_column(
        Words(ReservationState, 16), default=ReservationState.HELD
    )
    created_at: Mapped[dt.datetime] = _time()
    settled_at: Mapped[dt.datetime | None] = _time(nullable=True)


class Purchase(Base):
    """A purchase of a credit package, idempotent per org by transaction key. Credits are granted when the
    payment provider confirms it (the built-in provider: an admin settles it), never on a redirect."""

    __tablename__ = "purchases"
    __table_args__ = (UniqueConstraint("org_id", "transaction_key"),)

    id: Mapped[str] = mapped_column(Chars(64), primary_key=True)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    initiated_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    transaction_key: Mapped[str] = mapped_column(Chars(200))
    package: Mapped[dict[str, Any]] = mapped_column(JSON)
    state: Mapped[PurchaseState] = mapped_column(Words(PurchaseState, 16), default=PurchaseState.OPEN)
    checkout_url: Mapped[str | None] = mapped_column(LongText(), nullable=True)
    review_reason: Mapped[str | None] = mapped_column(LongText(), nullable=True)
    created_at: Mapped[dt.datetime] = _time()
    granted_at: Mapped[dt.datetime | None] = _time(nullable=True)


# --- code the platform hosts for its users ---------------------------------------------------------------


class Hosted(Base):
    """A benchmark or a policy an org registered with its code (`kind`): its name, and for a policy whether it
    is stopped, its settings (with the revision a change must name) and the version a rollback pinned. Its
    code lives in its versions."""

    __tablename__ = "hosted"
    __table_args__ = (UniqueConstraint("org_id", "kind", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[HostedKind] = mapped_column(Words(HostedKind, 16))
    name: Mapped[str] = mapped_column(Chars(64))
    stopped: Mapped[bool] = mapped_column(Boolean, default=False)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    settings_rev: Mapped[int] = mapped_column(Integer, default=0)
    # The version a rollback pinned (`seq policy rollback`); None: the newest ready one serves.
    serving: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[dt.datetime] = _time()
    removed_at: Mapped[dt.datetime | None] = _time(nullable=True)


class HostedVersion(Base):
    """One version of a hosted benchmark's or policy's code: the same code is the same version, other code the
    next. `declared` is what its registration said, `checked` what importing and trying it found; `status` how
    its build went (`BuildStatus`), `error` why it failed. Kept when newer versions come, for the evals that
    ran on it."""

    __tablename__ = "hosted_versions"
    __table_args__ = (UniqueConstraint("hosted_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    hosted_id: Mapped[int] = mapped_column(ForeignKey("hosted.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    code_sha256: Mapped[str] = mapped_column(Chars(64))  # of the bundle: the same bytes, the same version
    tree_sha256: Mapped[str] = mapped_column(Chars(64))  # of the unpacked files, as the SDK hashes a folder
    handler_ref: Mapped[str] = mapped_column(Chars(300))
    folder: Mapped[str] = mapped_column(Chars(500))  # the unpacked code, relative to the hosted root
    declared: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    checked: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    status: Mapped[BuildStatus] = mapped_column(Words(BuildStatus, 16))
    error: Mapped[str | None] = mapped_column(LongText(), nullable=True)
    created_at: Mapped[dt.datetime] = _time()
    built_at: Mapped[dt.datetime | None] = _time(nullable=True)


class Adapter(Base):
    """An org's registered adapter (`@seq.adapter`, the Sequences contract's): two conversions, run between a
    benchmark and a policy by the evals that name it. Its code lives in its versions; `last_eval` is what
    `seq adapter ls` shows of the eval that last ran it ({eval_id, version, benchmark, model})."""

    __tablename__ = "adapters"
    __table_args__ = (UniqueConstraint("org_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(Chars(64))
    last_eval: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[dt.datetime] = _time()
    updated_at: Mapped[dt.datetime] = _time()


class AdapterVersion(Base):
    """One version of an adapter: its one file, as registered. The version is the content: `sha256` is the
    contract's sum of its class name and its file, and the same sum registered again is this version."""

    __tablename__ = "adapter_versions"
    __table_args__ = (UniqueConstraint("adapter_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    adapter_id: Mapped[int] = mapped_column(ForeignKey("adapters.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(Chars(64))
    class_name: Mapped[str] = mapped_column(Chars(200))
    handler_ref: Mapped[str] = mapped_column(Chars(300))
    source: Mapped[str] = mapped_column(LongText())
    pairs: Mapped[Any] = mapped_column(JSON)  # "any", or [{"benchmark", "policy"}, ...]
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = _time()


class Secret(Base):
    """Environment variables an org's hosted code may be handed, sealed with the install's secret: `env_keys`
    says which, `sealed` holds their values, encrypted; never returned, never logged."""

    __tablename__ = "secrets"
    __table_args__ = (UniqueConstraint("org_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(Chars(64))
    env_keys: Mapped[list[Any]] = mapped_column(JSON, default=list)
    sealed: Mapped[str] = mapped_column(LongText())
    created_at: Mapped[dt.datetime] = _time()
    last_used_at: Mapped[dt.datetime | None] = _time(nullable=True)


# --- volumes: an org's named, versioned files --------------------------------------------------------------


class Volume(Base):
    """A named set of files an org uploaded (`seq volume put`): a checkpoint, a dataset, a benchmark's assets.
    `version` is the number of the version in use, None until the first upload is committed. Its files live in
    the volume store (`core.volume_store`), under its id."""

    __tablename__ = "volumes"
    __table_args__ = (UniqueConstraint("org_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(Chars(64))
    kind: Mapped[VolumeKind] = mapped_column(Words(VolumeKind, 16))
    version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[dt.datetime] = _time()
    updated_at: Mapped[dt.datetime] = _time()


class VolumeVersion(Base):
    """A committed version of a volume: its files (`VolumeFile`), their count and total size. Kept when a
    newer one comes, for the benchmark versions that pinned it."""

    __tablename__ = "volume_versions"
    __table_args__ = (UniqueConstraint("volume_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    volume_id: Mapped[int] = mapped_column(ForeignKey("volumes.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    file_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = _time()


class VolumeFile(Base):
    """One file of a volume's version: its path in the volume, its size, the base64 md5 of its bytes. (No
    unique index on the path: a 1024-character path can pass PostgreSQL's index row limit; an upload's paths
    are checked unique before a row is written.)"""

    __tablename__ = "volume_files"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    version_id: Mapped[int] = mapped_column(ForeignKey("volume_versions.id", ondelete="CASCADE"), index=True)
    path: Mapped[str] = mapped_column(Chars(1024))
    size: Mapped[int] = mapped_column(BigInteger)
    md5: Mapped[str] = mapped_column(Chars(24))


class VolumeUpload(Base):
    """An upload of a volume's next version (`number`), open until it is committed or superseded, and valid
    until `expires_at` (its signed targets with it)."""

    __tablename__ = "volume_uploads"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    volume_id: Mapped[int] = mapped_column(ForeignKey("volumes.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    kind: Mapped[VolumeKind] = mapped_column(Words(VolumeKind, 16))
    state: Mapped[UploadState] = mapped_column(Words(UploadState, 16))
    expires_at: Mapped[dt.datetime] = mapped_column(UtcDateTime())
    created_at: Mapped[dt.datetime] = _time()
    ended_at: Mapped[dt.datetime | None] = _time(nullable=True)


class VolumeUploadFile(Base):
    """One file of an upload, as its request declared it (`position` its index there). `held` files are the
    version in use's, unchanged, and are not sent; the others are sent through their resumable `session` (the
    latest one opened), and `arrived_md5` is the digest of their bytes once all of them arrived."""

    __tablename__ = "volume_upload_files"
    __table_args__ = (UniqueConstraint("upload_id", "position"),)

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    upload_id: Mapped[int] = mapped_column(ForeignKey("volume_uploads.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Chars(1024))
    size: Mapped[int] = mapped_column(BigInteger)
    md5: Mapped[str] = mapped_column(Chars(24))
    held: Mapped[bool] = mapped_column(Boolean, default=False)
    session: Mapped[str | None] = mapped_column(Chars(64), nullable=True)
    arrived_md5: Mapped[str | None] = mapped_column(Chars(24), nullable=True)


class AuditEvent(Base):
    """One change made through the platform's doors: who (the user and the key's last four), what (`action`,
    on `target`), when, through which door, and how it was asked (`method`, `path`, `status`). Append-only:
    nothing updates or deletes a row. `id` counts up, so it orders the log and pages it (`before`)."""

    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_org_id_id", "org_id", "id"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    at: Mapped[dt.datetime] = _time()
    org_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    user_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    actor: Mapped[str] = mapped_column(Chars(200))
    actor_key: Mapped[str | None] = mapped_column(Chars(32), nullable=True)
    door: Mapped[str] = mapped_column(Chars(16))
    action: Mapped[str] = mapped_column(Chars(120))
    target: Mapped[str | None] = mapped_column(Chars(300), nullable=True)
    method: Mapped[str] = mapped_column(Chars(8))
    path: Mapped[str] = mapped_column(Chars(1000))
    status: Mapped[int] = mapped_column(Integer)


# Every text column refuses, by rule and on both databases, what it cannot hold (`store.text`).
name_columns(Base.metadata.tables.values())


class RobotKey(Base):
    """A robot's own key to one deployment (`seq robot add --policy P`): it may connect to that deployment's
    act plane and label its episodes, nothing else. Stored as `ApiKey`'s are (a prefix to find the row, a
    SHA-256 to check it); `last_four` is what lists show of it."""

    __tablename__ = "robot_keys"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    hosted_id: Mapped[int] = mapped_column(ForeignKey("hosted.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(Chars(32), unique=True)
    digest: Mapped[str] = mapped_column(Chars(64))
    last_four: Mapped[str] = mapped_column(Chars(4))
    created_at: Mapped[dt.datetime] = _time()
    revoked_at: Mapped[dt.datetime | None] = _time(nullable=True)
    last_used_at: Mapped[dt.datetime | None] = _time(nullable=True)


class ActWorker(Base):
    """A process serving one deployment's act plane to robots (`core.act_plane`): wanted by a connect, then
    taken and started by a platform worker (`claimed_by`), which fills in where robots reach it (`url`, the
    SHA-256 of its own certificate) and beats while it serves; `ended_at` once it stopped or was found gone.
    Its id is the lease epoch the robots hold."""

    __tablename__ = "act_workers"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    hosted_id: Mapped[int] = mapped_column(ForeignKey("hosted.id", ondelete="CASCADE"), index=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("hosted_versions.id", ondelete="CASCADE"))
    claimed_by: Mapped[str | None] = mapped_column(Chars(200), nullable=True)
    url: Mapped[str | None] = mapped_column(Chars(200), nullable=True)
    fingerprint: Mapped[str | None] = mapped_column(Chars(64), nullable=True)
    created_at: Mapped[dt.datetime] = _time()
    beat_at: Mapped[dt.datetime | None] = _time(nullable=True)
    ended_at: Mapped[dt.datetime | None] = _time(nullable=True)
    why_ended: Mapped[str | None] = mapped_column(Chars(500), nullable=True)


class ActSeat(Base):
    """A robot's place on a deployment's act plane, named by the session its SDK made: kept while keepalives
    come (`kept_until`), given back by a release, gone with its worker or its key."""

    __tablename__ = "act_seats"

    session: Mapped[str] = mapped_column(Chars(64), primary_key=True)
    hosted_id: Mapped[int] = mapped_column(ForeignKey("hosted.id", ondelete="CASCADE"), index=True)
    worker_id: Mapped[int | None] = mapped_column(
        ForeignKey("act_workers.id", ondelete="SET NULL"), nullable=True
    )
    robot_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("robot_keys.id", ondelete="CASCADE"), nullable=True, index=True
    )
    api_key_digest: Mapped[str | None] = mapped_column(Chars(64), nullable=True)
    created_at: Mapped[dt.datetime] = _time()
    kept_until: Mapped[dt.datetime] = _time()


class PlannerKey(Base):
    """A key a planner holds for one of its members (`seq planner key add PLANNER --member NAME`): a device's
    (a site's iPad) is shown once and says into that planner alone (`POST /v1/planners/{name}/observe`); a
    deployed member's is held by the platform and never shown. Stored as every key is (a prefix to find the
    row, a SHA-256 to check it)."""

    __tablename__ = "planner_keys"

    id: Mapped[int] = mapped_column(primary_key=True, default=new_id)
    org_id: Mapped[int] = mapped_column(ForeignKey("orgs.id", ondelete="CASCADE"), index=True)
    planner_id: Mapped[int] = mapped_column(ForeignKey("hosted.id", ondelete="CASCADE"), index=True)
    member: Mapped[str] = mapped_column(Chars(64))
    member_kind: Mapped[str] = mapped_column(Chars(16))
    name: Mapped[str | None] = mapped_column(Chars(64), nullable=True)
    prefix: Mapped[str] = mapped_column(Chars(32), unique=True)
    digest: Mapped[str] = mapped_column(Chars(64))
    last_four: Mapped[str] = mapped_column(Chars(4))
    created_at: Mapped[dt.datetime] = _time()
    revoked_at: Mapped[dt.datetime | None] = _time(nullable=True)
    last_used_at: Mapped[dt.datetime | None] = _time(nullable=True)


class PlannerRecord(Base):
    """One thing a planner's next round reads: an observation someone on the site made into it (`kind`
    "observation"), or a plan the planner above wrote for it ("plan"). Numbered as they come (`id` rises:
    a round hands those past the last it handed), kept `planners.KEPT` newest a planner."""

    __tablename__ = "planner_records"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    planner_id: Mapped[int] = mapped_column(ForeignKey("hosted.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(Chars(16))
    by: Mapped[str | None] = mapped_column(Chars(64), nullable=True)
    data: Mapped[Any] = mapped_column(JSON, nullable=True)
    at: Mapped[dt.datetime] = _time()


class PlannerState(Base):
    """A planner's own record between rounds: the keys its plan left in `group.state` (handed up to a
    planner above as its `m.state`), and the last `PlannerRecord` a round handed it."""

    __tablename__ = "planner_states"

    planner_id: Mapped[int] = mapped_column(ForeignKey("hosted.id", ondelete="CASCADE"), primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    seen: Mapped[int] = mapped_column(default=0)
    planned_at: Mapped[dt.datetime | None] = _time(nullable=True)
