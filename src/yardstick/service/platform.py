"""The platform's use-cases, contract-neutral: catalogue, submissions (resolve, admit under quota, read,
list, cancel), artifacts and boards. The front doors (`positronic.py`) translate their wire models to
these calls and the rows back; workers (`worker.py`) play the episodes this admits."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from platform_client.enums import ErrorCode
from platform_client.eval_plan import EvalPlan, NebiusCompetition, PrivateEval
from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from yardstick.service import billing, catalog_seed, keys, plans
from yardstick.service.artifacts import LocalArtifactStore, UrlSigner, load_secret, page
from yardstick.service.errors import ApiError, bad_request, forbidden, not_found
from yardstick.service.identity import Caller, caller_for_key
from yardstick.service.settings import Settings
from yardstick.store.db import Database
from yardstick.store.models import (
    ApiKey,
    Artifact,
    Baseline,
    Board,
    Episode,
    Eval,
    Org,
    PolicySpec,
    QuotaEvent,
    Submission,
    Task,
    User,
    WorkerBeat,
    utcnow,
)
from yardstick.store.queue import ACTIVE, EpisodeQueue, stop_episodes

LIST_LIMIT, LIST_CAP = 50, 200
ARTIFACT_PAGE, ARTIFACT_CAP = 100, 1000
# A worker that has not beaten this long is gone; a pending run with none says it waits for one.
WORKER_ALIVE_S = 30.0
AUTH_CACHE_S, AUTH_CACHE_SIZE = 10.0, 4096


@dataclass(frozen=True)
class Quota:
    key: str
    window: str
    subject: str
    limit: int
    used: int
    resets_at: dt.datetime | None
    on_exhausted: str = "block"


@dataclass(frozen=True)
class RunView:
    """What a run's page shows: the run, its eval, its episodes (in index order), the board it ranks on,
    and who filed it as a board shows them."""

    submission: Submission
    eval: Eval | None
    episodes: list[Episode]
    board: Board | None
    tag: str
    display_name: str


@dataclass(frozen=True)
class BoardRow:
    rank: int | None
    display_name: str
    tag: str
    primary: float | None
    submission_id: int
    submitted_at: dt.datetime
    baseline_publisher: str | None
    replay_token: str | None = None
    scores: dict[str, Any] = field(default_factory=dict)  # the run's, with the primary's interval


class Platform:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.db = Database(settings.database)
        self.db.upgrade()
        with self.db.writing() as session:
            catalog_seed.install(session)
        self.store = LocalArtifactStore(settings.artifact_root)
        # The install's one secret: links, board tags and sign-in keys are each derived from it.
        self.secret = load_secret(settings.secret_file)
        self.signer = UrlSigner(self.secret, ttl_s=settings.artifact_ttl_s)
        self._tag_secret = hashlib.sha256(b"board-tags" + self.secret).digest()
        self.queue = EpisodeQueue(self.db, lease_s=settings.lease_s, max_attempts=settings.max_attempts)
        self.billing = billing.Billing(self.db, settings.billing_terms(), billing.AdminSettles())
        self._auth_cache: dict[str, tuple[Caller, float]] = {}

    def close(self) -> None:
        self.db.close()

    # --- who ---------------------------------------------------------------------------------

    def authenticate(self, bearer: str | None) -> Caller | None:
        """The caller a key names. Answers are kept for `AUTH_CACHE_S` (by the key's digest, never the
        key): three queries a request cost more than the rest of a read, and a revoked key stops working
        within that time in every gateway process."""
        if not bearer:
            return None
        cache_key = keys.digest(bearer)
        cached = self._auth_cache.get(cache_key)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        with self.db.reading() as session:
            found = caller_for_key(session, bearer)
        if found is None:
            self._auth_cache.pop(cache_key, None)
            return None
        caller, stale_key = found
        if stale_key is not None:
            with self.db.writing() as session:
                session.execute(update(ApiKey).where(ApiKey.id == stale_key).values(last_used_at=utcnow()))
        if len(self._auth_cache) > AUTH_CACHE_SIZE:
            self._auth_cache.clear()
        self._auth_cache[cache_key] = (caller, now + AUTH_CACHE_S)
        return caller

    def forget_keys(self, digests: list[str]) -> None:
        """Drop revoked keys (by their stored SHA-256 hex) from this process's cache at once; other gateway
        processes stop taking them within `AUTH_CACHE_S`."""
        for digest in digests:
            self._auth_cache.pop(digest, None)

    # --- catalogue -----------------------------------------------------------------------------

    def catalog(self, session: Session, caller: Caller, org: Org | None = None) -> plans.Catalog:
        """What `caller` may name (for `org`, else for any org of theirs): the evals of no org or of theirs,
        the policy specs served, and whether they may compose plans of tasks."""
        visible = (
            session.execute(
                select(Eval)
                .where((Eval.org_id.is_(None)) | (Eval.org_id.in_(caller.org_ids or {0})))
                .order_by(Eval.slug)
            )
            .scalars()
            .all()
        )
        tasks: dict[int, list[Task]] = {row.id: [] for row in visible}
        for task in session.execute(
            select(Task).where(Task.eval_id.in_(list(tasks))).order_by(Task.position)
        ).scalars():
            tasks[task.eval_id].append(task)
        evals = [
            plans.CatalogEval(
                slug=row.slug,
                benchmark=row.benchmark,
                embodiment=row.embodiment,
                trials_per_task=row.trials_per_task,
                composable=row.composable,
                accepting=row.accepting,
                description=row.description,
                tasks=tuple(
                    plans.CatalogTask(
                        task_id=t.task_id,
                        benchmark_task=t.benchmark_task,
                        description=t.description,
                        default_cap_sec=t.default_cap_sec,
                        seeds=tuple(t.seeds),
                        scene=dict(t.scene),
                    )
                    for t in tasks[row.id]
                ),
            )
            for row in visible
        ]
        specs = session.execute(select(PolicySpec.name)).scalars()
        may_compose = org.may_compose if org is not None else any(o.may_compose for o in caller.orgs)
        return plans.catalog_of(evals, policy_specs=specs, may_compose=may_compose)

    def offer(self, caller: Caller) -> plans.Catalog:
        """The catalogue `catalog.evals` and `catalog.tasks` list to `caller`."""
        with self.db.reading() as session:
            return self.catalog(session, caller)

    # --- submissions ---------------------------------------------------------------------------

    def org_for(self, caller: Caller, plan: EvalPlan) -> Org:
        """The org a plan runs for: the one a private eval names (the caller must belong to it), else the
        caller's first."""
        request = plan.request_type
        if isinstance(request, PrivateEval):
            org = caller.org_by_slug(request.org)
            if org is None:
                raise forbidden(
                    f"request_type.org: {request.org!r} is not an organization you belong to",
                    organizations=[o.slug for o in caller.orgs],
                )
            return org
        if not caller.orgs:
            raise forbidden("you belong to no organization; an admin adds you to one (yardstick admin user)")
        return caller.orgs[0]

    def resolve(self, caller: Caller, plan: EvalPlan) -> plans.Resolution:
        org = self.org_for(caller, plan)
        with self.db.reading() as session:
            resolution = plans.resolve(
                plan, self.catalog(session, caller, org), transaction_key=plan.transaction_key
            )
            return self.billing.quoted(self.billing.mode_of(session, org.id), resolution)

    def create(self, caller: Caller, plan: EvalPlan) -> tuple[Submission, bool]:
        """Admit a plan: resolved, within quota, its episodes queued. The same transaction key with the same
        plan returns the first submission (not charged again); with another plan it is a conflict."""
        org = self.org_for(caller, plan)
        body = plan.model_dump(mode="json")
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        key = plan.transaction_key
        try:
            with self.db.writing() as session:
                if key is not None:
                    earlier = self._by_key(session, caller.user_id, key, digest)
                    if earlier is not None:
                        return earlier, False
                resolution = plans.resolve(plan, self.catalog(session, caller, org), transaction_key=key)
                locked = self._admit(session, caller, org)
                resolution = self.billing.quoted(locked.billing_mode, resolution)
                now = utcnow()
                submission = Submission(
                    org_id=org.id,
                    user_id=caller.user_id,
                    eval_id=self._eval_id(session, resolution.eval.slug if resolution.eval else None),
                    alias=plan.alias,
                    transaction_key=key,
                    replay_token=secrets.token_urlsafe(18),
                    plan_digest=digest,
                    plan=body,
                    resolved=resolution.resolved.model_dump(mode="json"),
                    sampled=resolution.sampled,
                    request_type="nebius_competition"
                    if isinstance(plan.request_type, NebiusCompetition)
                    else "private_eval",
                    episodes_total=resolution.resolved.episodes_total,
                    received_at=now,
                )
                session.add(submission)
                session.flush()
                if resolution.resolved.credit_quote is not None:
                    billing.reserve(session, locked, submission.id, resolution.resolved.credit_quote)
                session.add_all(
                    Episode(
                        submission_id=submission.id,
                        index=e.index,
                        task_pos=e.task_pos,
                        task_id=e.task_id,
                        benchmark_task=e.benchmark_task,
                        endpoint=e.endpoint,
                        trial=e.trial,
                        seed=e.seed,
                    )
                    for e in resolution.episodes
                )
                session.add(
                    QuotaEvent(
                        org_id=org.id,
                        user_id=caller.user_id,
                        submission_id=submission.id,
                        kind="charge",
                        at=now,
                    )
                )
                return submission, True
        except IntegrityError:
            # Two creates raced on one transaction key: the other won; answer as a replay would.
            with self.db.reading() as session:
                earlier = self._by_key(session, caller.user_id, key or "", digest)
            if earlier is None:
                raise
            return earlier, False

    def _by_key(self, session: Session, user_id: int, key: str, digest: str) -> Submission | None:
        earlier = session.execute(
            select(Submission).where(Submission.user_id == user_id, Submission.transaction_key == key)
        ).scalar_one_or_none()
        if earlier is not None and earlier.plan_digest != digest:
            raise ApiError(
                ErrorCode.transaction_conflict,
                f"transaction_key {key!r} already filed another plan (submission {earlier.id:x})",
            )
        return earlier

    @staticmethod
    def _eval_id(session: Session, slug: str | None) -> int | None:
        if slug is None:
            return None
        return session.execute(select(Eval.id).where(Eval.slug == slug)).scalar_one_or_none()

    def _admit(self, session: Session, caller: Caller, org: Org) -> Org:
        """Refuse a create over the day's or the concurrent quota (an org that meters lets it through and
        counts past the limit). The org's row is locked first, so concurrent creates count one after
        another (PostgreSQL; SQLite has one writer anyway); the lock is FOR NO KEY UPDATE so that rows
        referring to the org (ledger entries, quota events) can still be written meanwhile."""
        locked = select(Org).where(Org.id == org.id)
        if not self.db.is_sqlite:
            locked = locked.with_for_update(key_share=True)
        row = session.execute(locked).scalar_one()
        for quota in self._quotas(session, caller.user_id, row):
            if quota.used >= quota.limit and row.on_exhausted != "meter":
                what = (
                    "submissions today"
                    if quota.key == "submissions.day"
                    else "submissions running or queued at once"
                )
                raise ApiError(
                    ErrorCode.quota_exceeded,
                    f"{quota.key}: {quota.used} of {quota.limit} {what}",
                    quota=quota_dict(quota),
                )
        return row

    def quotas(self, caller: Caller) -> list[Quota]:
        if not caller.orgs:
            return []
        with self.db.reading() as session:
            # Read afresh: the caller's cached org may be seconds behind an admin's change.
            org = session.get(Org, caller.orgs[0].id) or caller.orgs[0]
            return self._quotas(session, caller.user_id, org)

    def _quotas(self, session: Session, user_id: int, org: Org) -> list[Quota]:
        now = utcnow()
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        counted = session.execute(
            select(QuotaEvent.kind, func.count())
            .where(QuotaEvent.user_id == user_id, QuotaEvent.org_id == org.id, QuotaEvent.at >= midnight)
            .group_by(QuotaEvent.kind)
        ).all()
        by_kind = {kind: int(count) for kind, count in counted}
        day_used = by_kind.get("charge", 0) - by_kind.get("refund", 0)
        active = session.execute(
            select(func.count())
            .select_from(Submission)
            .where(Submission.org_id == org.id, Submission.status.in_(ACTIVE))
        ).scalar_one()
        return [
            Quota(
                "submissions.day",
                "day",
                "user",
                org.submissions_per_day,
                day_used,
                midnight + dt.timedelta(days=1),
                org.on_exhausted,
            ),
            Quota(
                "submissions.concurrent",
                "concurrent",
                "tenant",
                org.concurrent_submissions,
                int(active),
                None,
                org.on_exhausted,
            ),
        ]

    def submission(self, caller: Caller, submission_id: int) -> Submission:
        with self.db.reading() as session:
            row = session.get(Submission, submission_id)
        if row is None or not caller.may_see(row.org_id, row.user_id):
            raise not_found(f"id: no submission {submission_id:x} that you can see")
        return row

    def queue_position(self, submission_id: int) -> int:
        return self.queue.position(submission_id)

    def workers_alive(self) -> bool:
        with self.db.reading() as session:
            since = utcnow() - dt.timedelta(seconds=WORKER_ALIVE_S)
            return bool(
                session.execute(
                    select(func.count()).select_from(WorkerBeat).where(WorkerBeat.seen_at >= since)
                ).scalar_one()
            )

    def list_submissions(
        self, caller: Caller, after: int | None, limit: int | None
    ) -> tuple[list[Submission], int | None]:
        size = min(limit or LIST_LIMIT, LIST_CAP)
        with self.db.reading() as session:
            query = select(Submission)
            if not caller.is_admin:
                query = query.where(Submission.user_id == caller.user_id)
            if after is not None:
                anchor = session.get(Submission, after)
                if anchor is None or not caller.may_see(anchor.org_id, anchor.user_id):
                    raise bad_request(f"after: {after:x} is no submission of yours to page from")
                query = query.where(
                    (Submission.received_at > anchor.received_at)
                    | ((Submission.received_at == anchor.received_at) & (Submission.id > anchor.id))
                )
            rows = list(
                session.execute(
                    query.order_by(Submission.received_at, Submission.id).limit(size + 1)
                ).scalars()
            )
        more = len(rows) > size
        rows = rows[:size]
        return rows, (rows[-1].id if more and rows else None)

    def cancel(self, caller: Caller, submission_id: int) -> tuple[str, bool]:
        """Cancel a run that has not ended: its quota is given back only if nothing had started."""
        with self.db.writing() as session:
            row = session.get(Submission, submission_id)
            if row is None or not caller.may_see(row.org_id, row.user_id):
                raise not_found(f"id: no submission {submission_id:x} that you can see")
            if row.status not in ACTIVE:
                raise bad_request(f"id: submission {submission_id:x} is already {row.status}")
            refunded = row.status == "pending"
            now = utcnow()
            row.status, row.cancelled_at, row.ended_at = "cancelled", now, now
            if refunded:
                session.add(
                    QuotaEvent(org_id=row.org_id, user_id=row.user_id, submission_id=row.id, kind="refund")
                )
            # Credits: what landed is charged, the rest of the hold released (an episode in play now is not).
            billing.settle(session, row.id, platform_fault=False)
            stop_episodes(session, row.id)
        return "cancelled", refunded

    # --- artifacts -----------------------------------------------------------------------------

    def artifact_page(
        self,
        caller: Caller,
        submission_id: int,
        prefix: str | None,
        after: str | None,
        limit: int | None,
        base_url: str,
    ) -> tuple[list[tuple[str, int, str]], str | None]:
        row = self.submission(caller, submission_id)
        if row.status != "finished":
            raise bad_request(
                f"id: submission {submission_id:x} is {row.status}: artifacts are listed for a finished"
                " run (a failed run's records are linked from submissions.get)"
            )
        with self.db.reading() as session:
            entries = [
                (a.key, a.size)
                for a in session.execute(
                    select(Artifact).where(Artifact.submission_id == submission_id)
                ).scalars()
            ]
        rows, after_key = page(
            entries, prefix=prefix, after=after, limit=limit, cap=ARTIFACT_CAP, default=ARTIFACT_PAGE
        )
        return [
            (key, size, self.signer.sign(submission_id, key, base_url=base_url)) for key, size in rows
        ], after_key

    def artifact_urls(self, submission_id: int, keys: tuple[str, ...], base_url: str) -> dict[str, str]:
        """Signed URLs of those of `keys` the run wrote, in one query."""
        with self.db.reading() as session:
            found = (
                session.execute(
                    select(Artifact.key).where(
                        Artifact.submission_id == submission_id, Artifact.key.in_(keys)
                    )
                )
                .scalars()
                .all()
            )
        return {key: self.signer.sign(submission_id, key, base_url=base_url) for key in found}

    # --- pages ----------------------------------------------------------------------------------

    def run_by_token(self, token: str) -> RunView | None:
        """A run by its page's token (the token is the credential: whoever holds the link may look)."""
        with self.db.reading() as session:
            row = session.execute(
                select(Submission).where(Submission.replay_token == token)
            ).scalar_one_or_none()
            if row is None:
                return None
            catalog_eval = session.get(Eval, row.eval_id) if row.eval_id else None
            episodes = list(
                session.execute(
                    select(Episode).where(Episode.submission_id == row.id).order_by(Episode.index)
                ).scalars()
            )
            board = None
            if catalog_eval is not None:
                board = (
                    session.execute(
                        select(Board).where(
                            Board.eval_id == catalog_eval.id,
                            (Board.visibility == "public")
                            if row.request_type == "nebius_competition"
                            else (Board.org_id == row.org_id),
                        )
                    )
                    .scalars()
                    .first()
                )
            user = session.get(User, row.user_id)
        return RunView(
            row,
            catalog_eval,
            episodes,
            board,
            self._tag(row.user_id),
            (user.alias if user else None) or "anonymous",
        )

    def recent_public_runs(self, limit: int = 20) -> list[tuple[Submission, Eval | None]]:
        """Finished runs on public boards, newest first: what the home page lists to anyone."""
        with self.db.reading() as session:
            rows = session.execute(
                select(Submission, Eval)
                .outerjoin(Eval, Eval.id == Submission.eval_id)
                .where(Submission.request_type == "nebius_competition", Submission.status == "finished")
                .order_by(Submission.received_at.desc())
                .limit(limit)
            ).all()
        return [(s, e) for s, e in rows]

    # --- boards ----------------------------------------------------------------------------------

    def boards(self, caller: Caller | None) -> list[tuple[Board, Eval]]:
        with self.db.reading() as session:
            rows = session.execute(
                select(Board, Eval).join(Eval, Eval.id == Board.eval_id).order_by(Board.slug)
            ).all()
        return [(board, ev) for board, ev in rows if self._may_read_board(caller, board)]

    @staticmethod
    def _may_read_board(caller: Caller | None, board: Board) -> bool:
        return board.visibility == "public" or (caller is not None and caller.may_see(board.org_id))

    def board(self, caller: Caller | None, slug: str) -> tuple[Board, Eval, list[BoardRow]]:
        with self.db.reading() as session:
            found = session.execute(
                select(Board, Eval).join(Eval, Eval.id == Board.eval_id).where(Board.slug == slug)
            ).one_or_none()
            if found is None or not self._may_read_board(caller, found[0]):
                raise not_found(f"board: no board {slug!r} that you can read")
            board, ev = found
            return board, ev, self._rows(session, board)

    def _rows(self, session: Session, board: Board) -> list[BoardRow]:
        ranked = (
            select(Submission, User)
            .join(User, User.id == Submission.user_id)
            .where(
                Submission.eval_id == board.eval_id,
                Submission.status == "finished",
                Submission.sampled.is_(False),
            )
        )
        if board.visibility == "public":
            ranked = ranked.where(Submission.request_type == "nebius_competition")
        else:
            ranked = ranked.where(
                Submission.org_id == board.org_id, Submission.request_type == "private_eval"
            )
        shown = session.execute(
            select(Baseline, Submission)
            .join(Submission, Submission.id == Baseline.submission_id)
            .where(Baseline.board_id == board.id)
        ).all()
        marked = {sub.id for _, sub in shown}
        best: dict[int, tuple[Submission, str]] = {}
        for submission, user in session.execute(ranked).all():
            if submission.id in marked:
                continue
            mine = best.get(user.id)
            if mine is None or _standing(submission) < _standing(mine[0]):
                best[user.id] = (submission, user.alias or "anonymous")
        # (run, name, publisher): a baseline is the row with a publisher.
        entries: list[tuple[Submission, str, str | None]] = [(s, name, None) for s, name in best.values()]
        entries += [(s, b.display_name, b.publisher) for b, s in shown if s.status == "finished"]
        entries.sort(key=lambda entry: _standing(entry[0]))
        out: list[BoardRow] = []
        rank = 0
        for sub, name, publisher in entries:
            if publisher is None:
                rank += 1
            out.append(
                BoardRow(
                    None if publisher is not None else rank,
                    name,
                    self._tag(sub.user_id),
                    primary_of(sub),
                    sub.id,
                    sub.received_at,
                    publisher,
                    sub.replay_token,
                    dict(sub.scores or {}),
                )
            )
        return out

    def _tag(self, user_id: int) -> str:
        """Six hex characters that tell two users of one alias apart, the same on every board."""
        return hashlib.sha256(self._tag_secret + user_id.to_bytes(8, "big")).hexdigest()[:6]


def page_url(base_url: str, token: str) -> str:
    """A run's page (its replay); `data.json` beside it is the object the page renders from."""
    return f"{base_url.rstrip('/')}/v/{token}/"


def primary_of(submission: Submission) -> float | None:
    value = (submission.scores or {}).get("primary")
    return float(value) if isinstance(value, (int, float)) else None


def _standing(submission: Submission) -> tuple[float, dt.datetime]:
    """Where a run stands on a board, first least: the higher primary score (none: below any), and of a tie
    the earlier run."""
    primary = primary_of(submission)
    return -(primary if primary is not None else -1.0), submission.received_at


def quota_dict(quota: Quota) -> dict[str, Any]:
    return {
        "key": quota.key,
        "meter": "submissions",
        "unit": "submissions",
        "scale": 1,
        "window": quota.window,
        "subject": quota.subject,
        "scope": [],
        "limit": quota.limit,
        "used": quota.used,
        "resets_at": quota.resets_at.isoformat() if quota.resets_at else None,
        "on_exhausted": quota.on_exhausted,
    }
