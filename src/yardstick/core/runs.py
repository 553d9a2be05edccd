"""Runs: filing one (admitted under quota, its price held, its episodes queued, once per transaction key),
reading, listing and cancelling them. A front door resolves its contract's request into a `RunPlan` first;
everything here speaks the platform's own types."""

from __future__ import annotations

import secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import or_, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from yardstick.core import admission, limits
from yardstick.core.accounts import Caller
from yardstick.core.catalog import CatalogEval
from yardstick.core.ended import EndedRuns, has_ended
from yardstick.core.idempotency import create_once
from yardstick.core.ledger import Ledger, PricedEpisodes, Quote
from yardstick.core.liveness import Liveness
from yardstick.core.paging import keyset_page, page_size
from yardstick.core.refusals import Listed, Refusal, RefusalKind, bad_request, forbidden, not_found
from yardstick.store import rounds
from yardstick.store.db import Database
from yardstick.store.models import Eval, Org, Run, RunEpisode, utcnow
from yardstick.store.queue import EpisodeQueue, stop_episodes
from yardstick.store.states import ACTIVE_RUNS, Audience, Contract, EpisodeState, RunStatus, TargetKind
from yardstick.wire.address import Address, address_fields, parse_address

__all__ = [
    "BenchmarkTarget",
    "EndpointTarget",
    "Filing",
    "PlannedEpisode",
    "RunPlan",
    "Runs",
    "hosted_ref",
    "hosted_version",
    "org_for",
]

# A benchmark reference that names a hosted version (an org's registered benchmark), as a run's row keeps it.
_HOSTED = "hosted:"

# PostgreSQL's code for a transaction ended as a deadlock's victim, and how often a cancel is tried.
DEADLOCK: Final = "40P01"
DEADLOCK_TRIES: Final = 3


def hosted_ref(version_id: int) -> str:
    """The benchmark reference of a hosted version, as a run keeps it."""
    return f"{_HOSTED}{version_id}"


def hosted_version(ref: str) -> int | None:
    """The hosted version a run's benchmark reference names, or None for any other reference."""
    if not ref.startswith(_HOSTED):
        return None
    try:
        return int(ref[len(_HOSTED) :])
    except ValueError:
        return None


@dataclass(frozen=True)
class BenchmarkTarget:
    """What a run's episodes play: the reference the engine builds, its constructor's parameters, and what is
    recorded of each episode (`{video, trajectory, fps, replay}`; None: nothing)."""

    ref: str
    params: Mapping[str, Any] = field(default_factory=dict)
    recording: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, evaluation: CatalogEval) -> BenchmarkTarget:
        recording = (
            # A 3D replay too, of a benchmark that declares one (the worker asks no other for one).
            {"video": True, "trajectory": True, "fps": evaluation.record_fps, "replay": True}
            if evaluation.record_video
            else None
        )
        return cls(evaluation.benchmark, dict(evaluation.benchmark_params), recording)


@dataclass(frozen=True)
class EndpointTarget:
    """How a run's episodes reach one policy: `served` (the platform builds `spec`, a policy it serves) or
    `remote` (someone's server at `address`, over `wire`). `params` are laid over the policy's own (its
    constructor's for a served policy, the session's for a remote one); `benchmark_params` over the run's
    benchmark parameters for this endpoint's episodes (a sweep's arm)."""

    name: str
    kind: TargetKind
    wire: str
    address: Address | None = None  # where a remote endpoint is dialled
    spec: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    benchmark_params: Mapping[str, Any] = field(default_factory=dict)
    # The adapter the episodes play through, between the benchmark and the policy: {"version_id", "params"}.
    adapter: Mapping[str, Any] | None = None
    # An image endpoint's registry credential, sealed with the install's secret (`Secrets.seal`).
    credential: str | None = None
    # Its episodes' limit on the robot's clock in place of each task's own (a Sequences arm's
    # `eval.max_seconds`, which raises it as well as lowers it); None: the task's own.
    max_seconds: float | None = None

    def as_json(self) -> dict[str, Any]:
        """As a run's row keeps it (by name: `Run.endpoints`); `from_json` reads it back."""
        return {
            "kind": self.kind,
            "wire": self.wire,
            "address": address_fields(self.address) if self.address is not None else None,
            "spec": self.spec,
            "params": dict(self.params),
            "benchmark_params": dict(self.benchmark_params),
            **({"adapter": dict(self.adapter)} if self.adapter is not None else {}),
            **({"credential": self.credential} if self.credential is not None else {}),
            **({"max_seconds": self.max_seconds} if self.max_seconds is not None else {}),
        }

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> EndpointTarget:
        """The target a run's row keeps under `name` (`as_json`'s)."""
        address = data.get("address")
        return cls(
            name=name,
            kind=TargetKind(data["kind"]),
            wire=str(data["wire"]),
            address=parse_address(str(data["wire"]), address) if address is not None else None,
            spec=None if data.get("spec") is None else str(data["spec"]),
            params=dict(data.get("params") or {}),
            benchmark_params=dict(data.get("benchmark_params") or {}),
            adapter=dict(data["adapter"]) if data.get("adapter") is not None else None,
            credential=None if data.get("credential") is None else str(data["credential"]),
            max_seconds=None if data.get("max_seconds") is None else float(data["max_seconds"]),
        )


@dataclass(frozen=True)
class PlannedEpisode:
    """One episode a run plays: which task node, which endpoint, which trial and seed, under which cap.

    `trial` is the eval's trial number the episode plays: every endpoint of a task runs the same trials, so
    endpoints are compared on the same seeds.
    """

    index: int
    task_pos: int
    task_id: str
    benchmark_task: str
    endpoint: str
    trial: int
    seed: int
    cap_s: float


@dataclass(frozen=True)
class RunPlan:
    """A request resolved: its episodes in run order, the endpoints they name, the benchmark they play, the
    catalogue eval it ranks under (None: none), whether it samples the eval's trials (a sample does not rank),
    and who it is for."""

    episodes: tuple[PlannedEpisode, ...]
    endpoints: Mapping[str, EndpointTarget]
    benchmark: BenchmarkTarget
    eval: CatalogEval | None
    sampled: bool
    audience: Audience = Audience.ORG
    # The robot its episodes need (`core.rigs.SHAPES`): a rig of the org's plays them, never a worker.
    rig_shape: str | None = None

    def priced(self) -> list[PricedEpisodes]:
        """The plan's episodes as a quote prices them: counted per task position and endpoint, in task order
        (a task's endpoints as its episodes first name them). Both doors price a run by this."""
        lines: dict[tuple[int, str], PricedEpisodes] = {}
        for e in self.episodes:
            line = lines.get((e.task_pos, e.endpoint))
            count = line.count + 1 if line is not None else 1
            lines[(e.task_pos, e.endpoint)] = PricedEpisodes(e.task_pos, e.endpoint, count, e.cap_s)
        return sorted(lines.values(), key=lambda line: line.task_pos)


@dataclass(frozen=True)
class Filing:
    """A run to file: the plan, the caller's transaction key and alias, the front door it came through, and
    that door's own documents (the request as sent, its answer), kept as the door wrote them. `digest`
    tells a replay of the same request (answered with the first run) from another under the same key (a
    conflict). `quote` is what the ledger holds for it (None: nothing)."""

    plan: RunPlan
    contract: Contract
    digest: str
    request: dict[str, Any]
    answer: dict[str, Any]
    transaction_key: str | None = None
    alias: str | None = None
    quote: Quote | None = None
    # A rule that stops the run early (`store.rounds.new_stopping`); None plays every episode.
    stopping: dict[str, Any] | None = None


class Runs:
    def __init__(self, db: Database, queue: EpisodeQueue, ledger: Ledger, ended: EndedRuns) -> None:
        self.db = db
        self.queue = queue
        self.ledger = ledger
        self.ended = ended
        self.liveness = Liveness(db)

    # --- filing --------------------------------------------------------------------------------------

    def file(self, caller: Caller, org: Org, filing: Filing) -> tuple[Run, bool]:
        """Admit a run: within quota, its price held, its episodes queued, all in one transaction. The same
        transaction key with the same request returns the first run (`False`: not filed again); with
        another request it is a conflict."""
        key = filing.transaction_key

        def earlier(session: Session) -> Run | None:
            return None if key is None else _by_key(session, caller.user_id, key, filing.digest)

        def create(session: Session) -> Run:
            plan = filing.plan
            on_rig = plan.rig_shape is not None
            locked = admission.admit(
                session, caller.user_id, org, lock=not self.db.is_sqlite, counts_day=not on_rig
            )
            run = Run(
                org_id=org.id,
                user_id=caller.user_id,
                eval_id=_eval_id(session, plan.eval.slug if plan.eval else None),
                alias=filing.alias,
                transaction_key=key,
                replay_token=secrets.token_urlsafe(18),
                plan_digest=filing.digest,
                plan=filing.request,
                resolved=filing.answer,
                contract=filing.contract,
                benchmark=plan.benchmark.ref,
                benchmark_params=dict(plan.benchmark.params),
                recording=dict(plan.benchmark.recording) if plan.benchmark.recording is not None else None,
                endpoints={name: target.as_json() for name, target in plan.endpoints.items()},
                sampled=plan.sampled,
                audience=plan.audience,
                episodes_total=len(plan.episodes),
                stopping=filing.stopping,
                rig_shape=plan.rig_shape,
                received_at=utcnow(),
            )
            session.add(run)
            session.flush()
            if filing.quote is not None:
                self.ledger.reserve(session, locked, run.id, filing.quote)
            session.add_all(
                RunEpisode(
                    submission_id=run.id,
                    index=e.index,
                    task_pos=e.task_pos,
                    task_id=e.task_id,
                    benchmark_task=e.benchmark_task,
                    endpoint=e.endpoint,
                    trial=e.trial,
                    seed=e.seed,
                    cap_s=e.cap_s,
                    state=EpisodeState.HELD
                    if filing.stopping is not None and rounds.held_at_filing(e.trial, filing.stopping)
                    else EpisodeState.QUEUED,
                )
                for e in plan.episodes
            )
            if not on_rig:  # a rig plan queues for an operator: the contract does not count it in the day
                admission.charge(session, run)
            return run

        return create_once(self.db, earlier=earlier, create=create)

    def billing_mode(self, org: Org) -> str:
        """Read afresh: the caller's cached org may be seconds behind an admin's change."""
        with self.db.reading() as session:
            return str(session.execute(select(Org.billing_mode).where(Org.id == org.id)).scalar_one())

    async def quotas(self, caller: Caller) -> list[admission.Quota]:
        """The caller's quotas in its first org, counted now, read on the event loop."""
        if not caller.orgs:
            return []
        # Read afresh: the caller's cached org may be seconds behind an admin's change.
        return await admission.current_quotas(self.db, caller.user_id, caller.orgs[0].id) or []

    # --- reading ---------------------------------------------------------------------------------------

    def get(self, caller: Caller, run_id: int, contract: Contract | None = None) -> Run:
        """The run, if the caller may see it (and it came through `contract`, when one is named). An ended
        run is read once a process (`core.ended`)."""
        row: Run | None = self.ended.get(("run", run_id))
        if row is None:
            with self.db.reading() as session:
                row = session.get(Run, run_id)
            if row is not None and has_ended(row.status):
                self.ended.keep(("run", run_id), row)
        if row is None or not _shown_to(caller, row, contract):
            raise not_found(f"id: no submission {run_id:x} that you can see")
        return row

    def kept(self, caller: Caller, run_id: int, contract: Contract) -> Run | None:
        """The run as `get` would answer it, if it ended and this process has read it: no I/O, so an async
        route may ask on the event loop. None means ask `get`."""
        row: Run | None = self.ended.get(("run", run_id))
        return row if row is not None and _shown_to(caller, row, contract) else None

    def newest(self, caller: Caller, contract: Contract, most: int) -> list[Run]:
        """The caller's `most` newest runs filed through `contract` (an admin's: everyone's), newest first."""
        query = select(Run).where(Run.contract == contract)
        if not caller.is_admin:
            query = query.where(Run.user_id == caller.user_id)
        with self.db.reading() as session:
            return list(
                session.execute(query.order_by(Run.received_at.desc(), Run.id.desc()).limit(most)).scalars()
            )

    def by_prefix(self, caller: Caller, contract: Contract, prefix: str, most: int = 10) -> list[Run]:
        """The caller's runs filed through `contract` whose hex id starts with `prefix` (what a listing that
        shortens ids shows), up to `most`. Ids are random, so a prefix is a range for each length an id may
        have."""
        if prefix.startswith("0"):
            return []  # a hex id is written without leading zeros
        number, digits = int(prefix, 16), len(prefix)
        spans = [
            (number << 4 * (length - digits), ((number + 1) << 4 * (length - digits)) - 1)
            for length in range(digits, 17)
        ]
        top = (1 << 63) - 1  # ids are below 2**63 (a signed 64-bit column on both databases)
        ranges = [Run.id.between(low, min(high, top)) for low, high in spans if low <= top]
        with self.db.reading() as session:
            rows = session.execute(
                select(Run).where(Run.contract == contract, or_(*ranges)).limit(most * 4)
            ).scalars()
            return [run for run in rows if caller.may_see(run.org_id, run.user_id)][:most]

    def page(
        self, caller: Caller, contract: Contract, after: int | None, limit: int | None
    ) -> tuple[list[Run], int | None]:
        """One page of the caller's runs filed through `contract` (an admin's: everyone's), oldest first;
        the id to page on from when more follow."""
        size = page_size(limit, default=limits.PAGE_SIZE_DEFAULT, cap=limits.PAGE_SIZE_MAX)
        with self.db.reading() as session:
            query = select(Run).where(Run.contract == contract)
            if not caller.is_admin:
                query = query.where(Run.user_id == caller.user_id)
            anchor = None
            if after is not None:
                found = session.get(Run, after)
                if found is None or not caller.may_see(found.org_id, found.user_id):
                    raise bad_request(f"after: {after:x} is no submission of yours to page from")
                anchor = (found.received_at, found.id)
            rows, more = keyset_page(session, query, order=(Run.received_at, Run.id), after=anchor, size=size)
        return rows, (rows[-1].id if more and rows else None)

    def active_on(self, org_id: int, benchmark_refs: Collection[str]) -> list[Run]:
        """The org's runs, waiting or playing, on any of these benchmark references (a registered benchmark's
        versions), oldest first."""
        if not benchmark_refs:
            return []
        with self.db.reading() as session:
            return list(
                session.execute(
                    select(Run)
                    .where(
                        Run.org_id == org_id,
                        Run.status.in_(ACTIVE_RUNS),
                        Run.benchmark.in_(list(benchmark_refs)),
                    )
                    .order_by(Run.received_at, Run.id)
                ).scalars()
            )

    def played_by(self, org_id: int, hosted_specs: Collection[str]) -> int:
        """How many of the org's runs named any of these hosted policy versions (by their spec)."""
        if not hosted_specs:
            return 0
        with self.db.reading() as session:
            return sum(
                1
                for (endpoints,) in session.execute(select(Run.endpoints).where(Run.org_id == org_id))
                if any(
                    target.kind == TargetKind.HOSTED and target.spec in hosted_specs
                    for target in (EndpointTarget.from_json(name, kept) for name, kept in endpoints.items())
                )
            )

    def queue_position(self, run_id: int) -> int:
        return self.queue.position(run_id)

    def workers_alive(self) -> bool:
        return self.liveness.workers_alive()

    def episodes(self, run_id: int) -> list[RunEpisode]:
        with self.db.reading() as session:
            return list(
                session.execute(
                    select(RunEpisode).where(RunEpisode.submission_id == run_id).order_by(RunEpisode.index)
                ).scalars()
            )

    # --- cancelling ------------------------------------------------------------------------------------

    def cancel(self, caller: Caller, run_id: int) -> tuple[RunStatus, bool]:
        """Cancel a run that has not ended: its quota is given back only if nothing had started; what
        landed is charged and the rest of its hold released (an episode in play now is not charged).

        The cancel locks the run and then its episodes, and a worker landing an episode of the same run at
        that moment may hold them in the other order: PostgreSQL then ends one transaction as a deadlock's
        victim. That one is this cancel, done again once the worker's transaction has gone (its answer
        then reads the run as it is)."""
        for attempt in range(DEADLOCK_TRIES):
            try:
                return self._cancel(caller, run_id)
            except OperationalError as exc:
                if getattr(exc.orig, "sqlstate", None) != DEADLOCK or attempt == DEADLOCK_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _cancel(self, caller: Caller, run_id: int) -> tuple[RunStatus, bool]:
        with self.db.writing() as session:
            row = session.get(Run, run_id)
            if row is None or not caller.may_see(row.org_id, row.user_id):
                raise not_found(f"id: no submission {run_id:x} that you can see")
            if row.status not in ACTIVE_RUNS:
                raise bad_request(f"id: submission {run_id:x} is already {row.status}")
            refunded = row.status == RunStatus.PENDING
            now = utcnow()
            row.status, row.cancelled_at, row.ended_at = RunStatus.CANCELLED, now, now
            if refunded:
                admission.refund(session, row)
            self.ledger.settle(session, row.id, charged=True)
            stop_episodes(session, row.id)
        return RunStatus.CANCELLED, refunded


def _shown_to(caller: Caller, run: Run, contract: Contract | None) -> bool:
    """Whether `caller` may see `run` (through `contract`, when one is named)."""
    return caller.may_see(run.org_id, run.user_id) and contract in (None, run.contract)


def org_for(caller: Caller, slug: str | None, field: str = "org") -> Org:
    """The org a run is filed for: the one named in `field` (the caller must belong to it), else the
    caller's first."""
    if slug is not None:
        org = caller.org_by_slug(slug)
        if org is None:
            raise forbidden(
                f"{field}: {slug!r} is not an organization you belong to",
                listed=[Listed("organizations", tuple(o.slug for o in caller.orgs))],
            )
        return org
    if not caller.orgs:
        raise forbidden("you belong to no organization; an admin adds you to one (yardstick admin user)")
    return caller.orgs[0]


def _by_key(session: Session, user_id: int, key: str, digest: str) -> Run | None:
    earlier = session.execute(
        select(Run).where(Run.user_id == user_id, Run.transaction_key == key)
    ).scalar_one_or_none()
    if earlier is not None and earlier.plan_digest != digest:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"transaction_key {key!r} already filed another plan (submission {earlier.id:x})",
        )
    return earlier


def _eval_id(session: Session, slug: str | None) -> int | None:
    if slug is None:
        return None
    return session.execute(select(Eval.id).where(Eval.slug == slug)).scalar_one_or_none()
