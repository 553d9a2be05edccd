"""The leased episode queue.

Workers lease a batch of one submission's queued episodes (`SELECT … FOR UPDATE SKIP LOCKED` on
PostgreSQL, so two workers never take the same row; the single write lock on SQLite), renew the lease while
they play them, and complete each with its result. A lease that runs out puts its episodes back, so a
worker killed mid-batch loses nothing; a result from a worker that lost its lease is discarded, so nothing is
counted twice. An episode whose leases keep running out fails as the platform's fault after
`max_attempts`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, aliased

from yardstick.store import rounds
from yardstick.store.db import Database
from yardstick.store.models import Artifact, Run, RunEpisode, utcnow
from yardstick.store.states import ACTIVE_RUNS, UNPLAYED_EPISODES, EpisodeState, RunStatus

# How long after its last episode landed a run still being active counts as one nobody finished.
UNFINISHED_GRACE_S = 10.0


@dataclass(frozen=True)
class LeasedEpisode:
    id: int
    submission_id: int
    index: int
    task_id: str
    benchmark_task: str
    endpoint: str
    trial: int
    seed: int
    attempt: int
    cap_s: float | None = None


@dataclass(frozen=True)
class Completion:
    """What completing an episode did: `accepted` False when the lease was lost (the result is discarded);
    `last` True for the one completion that landed a submission's final episode; `active` False once the
    submission has ended (cancelled, or failed elsewhere)."""

    accepted: bool
    last: bool = False
    active: bool = True


class EpisodeQueue:
    def __init__(self, db: Database, *, lease_s: float = 60.0, max_attempts: int = 3) -> None:
        self.db = db
        self.lease_s = lease_s
        self.max_attempts = max_attempts

    def lease(self, owner: str, limit: int, warm: frozenset[str] = frozenset()) -> list[LeasedEpisode]:
        """Up to `limit` queued episodes of one task of a submission that has any, leased to `owner`: of the
        org playing the fewest episodes now, its oldest submission first — so one org's long eval does not
        hold every worker while another's waits — and of it a task in `warm` (what the worker has built
        already) if one has episodes left, else the task with the most left, so a benchmark that builds a
        world per task builds it in as few workers as it can."""
        now = utcnow()
        with self.db.writing() as session:
            self._reclaim(session, now)
            playing = aliased(Run)
            busy = (
                select(func.count(RunEpisode.id))
                .join(playing, playing.id == RunEpisode.submission_id)
                .where(RunEpisode.state == EpisodeState.LEASED, playing.org_id == Run.org_id)
                .correlate(Run)
                .scalar_subquery()
            )
            candidates = (
                session.execute(
                    select(Run.id)
                    .where(Run.status.in_(ACTIVE_RUNS), Run.rig_shape.is_(None))  # a rig plays a rig's
                    .where(
                        select(RunEpisode.id)
                        .where(RunEpisode.submission_id == Run.id, RunEpisode.state == EpisodeState.QUEUED)
                        .exists()
                    )
                    .order_by(busy, Run.received_at, Run.id)
                    .limit(8)
                )
                .scalars()
                .all()
            )
            for submission_id in candidates:
                task = self._task_for(session, submission_id, warm)
                if task is None:
                    continue
                rows = select(RunEpisode).where(
                    RunEpisode.submission_id == submission_id,
                    RunEpisode.state == EpisodeState.QUEUED,
                    RunEpisode.task_id == task,
                )
                rows = rows.order_by(RunEpisode.index).limit(limit)
                if not self.db.is_sqlite:
                    rows = rows.with_for_update(skip_locked=True)
                episodes = session.execute(rows).scalars().all()
                if not episodes:
                    continue
                expires = now + dt.timedelta(seconds=self.lease_s)
                for episode in episodes:
                    episode.state = EpisodeState.LEASED
                    episode.lease_owner = owner
                    episode.lease_expires_at = expires
                    episode.attempt += 1
                session.execute(
                    update(Run)
                    .where(Run.id == submission_id, Run.status == RunStatus.PENDING)
                    .values(status=RunStatus.RUNNING, started_at=now)
                )
                return [
                    LeasedEpisode(
                        e.id,
                        e.submission_id,
                        e.index,
                        e.task_id,
                        e.benchmark_task,
                        e.endpoint,
                        e.trial,
                        e.seed,
                        e.attempt,
                        e.cap_s,
                    )
                    for e in episodes
                ]
        return []

    @staticmethod
    def _task_for(session: Session, submission_id: int, warm: frozenset[str]) -> str | None:
        left = session.execute(
            select(RunEpisode.task_id, func.count())
            .where(RunEpisode.submission_id == submission_id, RunEpisode.state == EpisodeState.QUEUED)
            .group_by(RunEpisode.task_id)
        ).all()
        if not left:
            return None
        preferred = [row for row in left if row[0] in warm]
        return str(max(preferred or left, key=lambda row: (row[1], row[0]))[0])

    def _reclaim(self, session: Session, now: dt.datetime) -> None:
        """Put back episodes whose lease ran out; fail those that ran out too often."""
        expired = (RunEpisode.state == EpisodeState.LEASED) & (RunEpisode.lease_expires_at < now)
        session.execute(
            update(RunEpisode)
            .where(expired, RunEpisode.attempt < self.max_attempts)
            .values(state=EpisodeState.QUEUED, lease_owner=None, lease_expires_at=None)
        )
        session.execute(
            update(RunEpisode)
            .where(expired)
            .values(
                state=EpisodeState.FAILED,
                lease_owner=None,
                lease_expires_at=None,
                finished_at=now,
                error=f"its worker was lost {self.max_attempts} times running it",
            )
        )

    def queued(self) -> int:
        """How many episodes wait to be leased: a read of the queue's index, cheap enough for an idle worker
        to ask many times a second (a lease is a write)."""
        waiting = (
            select(func.count())
            .select_from(RunEpisode)
            .join(Run, Run.id == RunEpisode.submission_id)
            .where(RunEpisode.state == EpisodeState.QUEUED, Run.rig_shape.is_(None))
        )
        with self.db.reading() as session:
            return int(session.execute(waiting).scalar_one())

    def unfinished(self, grace_s: float = UNFINISHED_GRACE_S) -> list[int]:
        """Active submissions whose every episode is done, the last more than `grace_s` ago: the worker that
        landed it did not get to finish the run (its connection cut, or the process killed, between the two
        transactions). The grace leaves a worker that is finishing it now to do so alone."""
        left = select(RunEpisode.id).where(
            RunEpisode.submission_id == Run.id,
            (RunEpisode.state != EpisodeState.DONE)
            | (RunEpisode.finished_at > utcnow() - dt.timedelta(seconds=grace_s)),
        )
        played = select(RunEpisode.id).where(RunEpisode.submission_id == Run.id)
        with self.db.reading() as session:
            return list(
                session.execute(
                    select(Run.id).where(
                        Run.status.in_(ACTIVE_RUNS), Run.rig_shape.is_(None), played.exists(), ~left.exists()
                    )
                ).scalars()
            )

    def abandoned(self) -> list[tuple[int, str]]:
        """Active submissions with an episode that failed for being lost: (submission id, error)."""
        with self.db.reading() as session:
            rows = session.execute(
                select(RunEpisode.submission_id, RunEpisode.error)
                .join(Run, Run.id == RunEpisode.submission_id)
                .where(Run.status.in_(ACTIVE_RUNS), RunEpisode.state == EpisodeState.FAILED)
            ).all()
        return [(row[0], row[1] or "") for row in rows]

    def renew(self, owner: str, episode_ids: list[int]) -> int:
        """Extend `owner`'s lease on those episodes it still holds; returns how many it holds."""
        if not episode_ids:
            return 0
        with self.db.writing() as session:
            held = session.execute(
                update(RunEpisode)
                .where(
                    RunEpisode.id.in_(episode_ids),
                    RunEpisode.lease_owner == owner,
                    RunEpisode.state == EpisodeState.LEASED,
                )
                .values(lease_expires_at=utcnow() + dt.timedelta(seconds=self.lease_s))
            )
            return int(held.rowcount)  # type: ignore[attr-defined]

    def release(self, owner: str, episode_ids: list[int]) -> None:
        """Hand episodes back unplayed (a graceful shutdown): queued again, the attempt not counted."""
        if not episode_ids:
            return
        with self.db.writing() as session:
            session.execute(
                update(RunEpisode)
                .where(
                    RunEpisode.id.in_(episode_ids),
                    RunEpisode.lease_owner == owner,
                    RunEpisode.state == EpisodeState.LEASED,
                )
                .values(
                    state=EpisodeState.QUEUED,
                    lease_owner=None,
                    lease_expires_at=None,
                    attempt=RunEpisode.attempt - 1,
                )
            )

    def release_all(self, owner: str) -> int:
        """Hand back every episode `owner` holds, unplayed (a worker stopped before it could say which):
        queued again, the attempt not counted. Returns how many."""
        with self.db.writing() as session:
            held = session.execute(
                update(RunEpisode)
                .where(RunEpisode.lease_owner == owner, RunEpisode.state == EpisodeState.LEASED)
                .values(
                    state=EpisodeState.QUEUED,
                    lease_owner=None,
                    lease_expires_at=None,
                    attempt=RunEpisode.attempt - 1,
                )
            )
            return int(held.rowcount)  # type: ignore[attr-defined]

    def expire(self, owner: str) -> int:
        """End `owner`'s leases now (a worker that died): the next lease puts its episodes back, the attempt
        counted, as a lease that ran out would — without waiting for it to run out. Returns how many."""
        with self.db.writing() as session:
            held = session.execute(
                update(RunEpisode)
                .where(RunEpisode.lease_owner == owner, RunEpisode.state == EpisodeState.LEASED)
                .values(lease_expires_at=utcnow() - dt.timedelta(seconds=1))
            )
            return int(held.rowcount)  # type: ignore[attr-defined]

    def complete(
        self,
        owner: str,
        episode_id: int,
        result: dict[str, Any],
        artifacts: Sequence[tuple[str, int, str]] = (),
    ) -> Completion:
        """Record a finished episode, if `owner` still holds it, and the artifacts (key, size, content type)
        already written for it: one transaction, so a worker lost between the two leaves no half."""
        with self.db.writing() as session:
            landed = session.execute(
                update(RunEpisode)
                .where(
                    RunEpisode.id == episode_id,
                    RunEpisode.lease_owner == owner,
                    RunEpisode.state == EpisodeState.LEASED,
                )
                .values(
                    state=EpisodeState.DONE,
                    result=result,
                    lease_owner=None,
                    lease_expires_at=None,
                    finished_at=utcnow(),
                )
                .returning(RunEpisode.submission_id)
            ).scalar_one_or_none()
            if landed is None:
                return Completion(accepted=False)
            record_artifacts(session, landed, artifacts)
            done, total, status, stopping = session.execute(
                update(Run)
                .where(Run.id == landed)
                .values(episodes_done=Run.episodes_done + 1)
                .returning(Run.episodes_done, Run.episodes_total, Run.status, Run.stopping)
            ).one()
            active = status in ACTIVE_RUNS
            # The round's last episode: the rule looks, under the run row this update locked.
            round_over = stopping is not None and active and done == rounds.released(session, landed)
            if round_over and rounds.after_round(session, landed, stopping):
                total = done
            return Completion(accepted=True, last=done == total, active=active)

    def fail(self, owner: str, episode_id: int, error: str, result: dict[str, Any] | None = None) -> bool:
        """Record an episode that failed; False if `owner` no longer held it."""
        with self.db.writing() as session:
            landed = session.execute(
                update(RunEpisode)
                .where(
                    RunEpisode.id == episode_id,
                    RunEpisode.lease_owner == owner,
                    RunEpisode.state == EpisodeState.LEASED,
                )
                .values(
                    state=EpisodeState.FAILED,
                    error=error,
                    result=result,
                    lease_owner=None,
                    lease_expires_at=None,
                    finished_at=utcnow(),
                )
            )
            return bool(landed.rowcount)  # type: ignore[attr-defined]

    def stop_submission(self, submission_id: int) -> None:
        """Take a run's unplayed episodes off the queue (it errored or was cancelled)."""
        with self.db.writing() as session:
            stop_episodes(session, submission_id)

    def position(self, submission_id: int) -> int:
        """1-based place of a pending submission among pending ones, by arrival."""
        with self.db.reading() as session:
            received = session.execute(select(Run.received_at).where(Run.id == submission_id)).scalar_one()
            ahead = session.execute(
                select(func.count())
                .select_from(Run)
                .where(Run.status == RunStatus.PENDING, Run.rig_shape.is_(None), Run.received_at < received)
            ).scalar_one()
        return int(ahead) + 1


def stop_episodes(session: Session, submission_id: int) -> None:
    """Take a submission's unplayed episodes off the queue, in the caller's transaction (the one that ends
    the submission)."""
    session.execute(
        update(RunEpisode)
        .where(RunEpisode.submission_id == submission_id, RunEpisode.state.in_(UNPLAYED_EPISODES))
        .values(state=EpisodeState.CANCELLED, lease_owner=None, lease_expires_at=None)
    )


def record_artifacts(session: Session, submission_id: int, artifacts: Sequence[tuple[str, int, str]]) -> None:
    """Record objects already in the artifact store, as (key, size, content type): a key recorded before
    is updated in place. One read for all of them."""
    if not artifacts:
        return
    known = {
        row.key: row
        for row in session.execute(
            select(Artifact).where(
                Artifact.submission_id == submission_id, Artifact.key.in_([key for key, _, _ in artifacts])
            )
        ).scalars()
    }
    now = utcnow()
    for key, size, content_type in artifacts:
        row = known.get(key)
        if row is None:
            session.add(Artifact(submission_id=submission_id, key=key, size=size, content_type=content_type))
        else:
            row.size, row.created_at = size, now
