"""The act plane: robots driving a deployment live, as the Sequences SDK's `connect` does it.

Two planes, kept apart. The gateway's (`connect`, `ready`, `keepalive`, `release`) is a few transactions on
three tables: a robot's seat (`ActSeat`, named by the session its SDK made), the worker that serves a
deployment to robots (`ActWorker`), the robot keys (`core.robot_keys`). The data plane is that worker: a
process a platform worker starts (`worker/act_server`), which the robot reaches directly over TLS pinned to
the certificate the worker made for itself, with a secret derived from the install's and the worker's id
(`direct_secret`), so the gateway hands it out without storing it and the worker checks it without asking.

A connect that finds no live worker for its deployment files one as wanted and answers "warming": a
platform worker takes it (`claim`, a conditional update, so two never start one), starts the deployment's
policy in its box and the TLS server in front of it, and says where it listens (`serving`); the SDK asks
again and is seated. A worker beats every `BEAT_S`; one silent for `LOST_S` is gone — its seats with it — and
the next connect files another (the SDK reconnects by itself when its acts find the old one dead). A seat
lasts
`seat_ttl_s` past its last keepalive; the worker refuses an act of a session with no live seat on it (401),
which sends the SDK back here: that is how a revoked key or a stopped deployment reaches a robot at once.

The race: two robots connecting at once to a deployment with no worker must not file two — filing takes
the deployment's row in an update first (PostgreSQL's row lock; SQLite has one writer), then reads again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from dataclasses import dataclass
from typing import Final

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from yardstick.core.captures import Captures
from yardstick.store.db import Database
from yardstick.store.models import ActSeat, ActWorker, Hosted, HostedVersion, utcnow

__all__ = [
    "BEAT_S",
    "LEASE_TTL_S",
    "LOST_S",
    "ActPlane",
    "Claimed",
    "Connected",
    "Robot",
    "Warming",
    "direct_secret",
    "platform_secret",
]

BEAT_S: Final = 2.0
# A worker silent this long is gone: several beats missed, generous for a loaded machine.
LOST_S: Final = 12.0
# How long a connect's lease lasts before the SDK renews it (a connect that keeps its worker).
LEASE_TTL_S: Final = 300.0
# How long a wanted worker may take to serve before a connect says the start is slow.
START_S: Final = 120.0


def direct_secret(install_secret: bytes, worker_id: int) -> str:
    """The secret a robot presents to worker `worker_id`: the gateway and the worker each derive it."""
    return hmac.new(install_secret, f"act-worker\n{worker_id}".encode(), hashlib.sha256).hexdigest()


def platform_secret(install_secret: bytes, worker_id: int) -> str:
    """The secret the platform's own calls to worker `worker_id` present (a planner reading its robots'
    episodes and writing their plans): never handed to a robot, which holds `direct_secret` alone."""
    return hmac.new(install_secret, f"act-worker-platform\n{worker_id}".encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Robot:
    """Who connects: an org's account key (its digest) or a robot key (its id)."""

    org_id: int
    robot_key_id: int | None = None
    api_key_digest: str | None = None


@dataclass(frozen=True)
class Connected:
    """Where a seated robot acts, and how long its lease and seat last."""

    worker_id: int
    url: str
    fingerprint: str
    secret: str
    lease_expires: dt.datetime
    seat_ttl_s: float


class Warming(Exception):
    """No worker serves the deployment yet: one is starting (`why`), ask again in `retry_after_s`."""

    def __init__(self, why: str, retry_after_s: float = 1.0, eta_s: float | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.retry_after_s = retry_after_s
        self.eta_s = eta_s


@dataclass(frozen=True)
class Claimed:
    """A wanted worker a platform worker took: the deployment and version it is to serve."""

    worker_id: int
    hosted_id: int
    version_id: int


def _starting(name: str, worker: ActWorker) -> Warming | None:
    """Why a robot waits for `worker` (None once it listens)."""
    if worker.url is not None and worker.fingerprint is not None:
        return None
    waited = (utcnow() - worker.created_at).total_seconds()
    eta = None if waited > START_S else max(1.0, 10.0 - waited)
    if worker.claimed_by is None:
        return Warming(
            f"{name}: a worker to serve it is wanted; no platform worker has taken it yet ({waited:.0f} s)",
            eta_s=eta,
        )
    return Warming(f"{name}: its worker is starting ({waited:.0f} s)", eta_s=eta)


class ActPlane:
    def __init__(self, db: Database, install_secret: bytes, seat_ttl_s: float, captures: Captures) -> None:
        self.db = db
        self.install_secret = install_secret
        self.seat_ttl_s = seat_ttl_s
        self.captures = captures  # where an ended worker's episodes say they broke

    # --- the gateway's plane ----------------------------------------------------------------------------

    def connect(self, robot: Robot, hosted: Hosted, version: HostedVersion, session_id: str) -> Connected:
        """Seat `session_id` on the worker serving `hosted` (kept if it already sits there); Warming while
        none serves, a worker filed for it (the filing kept: the Warming is raised once it is written)."""
        with self.db.writing() as session:
            worker = self._live(session, hosted.id) or self._file(session, hosted.id, version.id)
            starting = _starting(hosted.name, worker)
            if starting is None:
                return self._seat(session, robot, hosted, worker, session_id)
        raise starting

    def _seat(
        self, session: Session, robot: Robot, hosted: Hosted, worker: ActWorker, session_id: str
    ) -> Connected:
        assert worker.url is not None and worker.fingerprint is not None  # a worker that listens
        now = utcnow()
        seat = session.get(ActSeat, session_id)
        if seat is None:
            seat = ActSeat(session=session_id, hosted_id=hosted.id)
            session.add(seat)
        seat.hosted_id = hosted.id
        seat.worker_id = worker.id
        seat.robot_key_id = robot.robot_key_id
        seat.api_key_digest = robot.api_key_digest
        seat.kept_until = now + dt.timedelta(seconds=self.seat_ttl_s)
        return Connected(
            worker.id,
            worker.url,
            worker.fingerprint,
            direct_secret(self.install_secret, worker.id),
            now + dt.timedelta(seconds=LEASE_TTL_S),
            self.seat_ttl_s,
        )

    def serving(self, hosted: Hosted) -> ActWorker | None:
        """The live worker serving `hosted` to robots, if one serves."""
        with self.db.writing() as session:
            worker = self._live(session, hosted.id)
            return worker if worker is not None and worker.url is not None else None

    def worker_of(self, session_id: str, hosted_id: int) -> ActWorker | None:
        """The live worker `session_id` is seated on, if it is."""
        with self.db.reading() as session:
            found = session.execute(
                select(ActWorker)
                .join(ActSeat, ActSeat.worker_id == ActWorker.id)
                .where(
                    ActSeat.session == session_id,
                    ActSeat.hosted_id == hosted_id,
                    ActWorker.ended_at.is_(None),
                )
            ).scalar_one_or_none()
            return found

    def want(self, hosted: Hosted, version: HostedVersion) -> ActWorker:
        """The worker serving `hosted`, or starting for it: filed now if there is none (a ready poll starts
        one as a connect does)."""
        with self.db.writing() as session:
            return self._live(session, hosted.id) or self._file(session, hosted.id, version.id)

    def keepalive(self, hosted: Hosted, session_id: str) -> str | None:
        """Keep `session_id`'s seat on `hosted` `seat_ttl_s` more; None when kept, else why it is gone."""
        now = utcnow()
        with self.db.writing() as session:
            if hosted.stopped:
                session.execute(delete(ActSeat).where(ActSeat.session == session_id))
                return "stopped"
            kept = session.execute(
                update(ActSeat)
                .where(
                    ActSeat.session == session_id,
                    ActSeat.hosted_id == hosted.id,
                    ActSeat.kept_until > now,
                    ActSeat.worker_id.is_not(None),
                )
                .values(kept_until=now + dt.timedelta(seconds=self.seat_ttl_s))
            )
            if kept.rowcount:  # type: ignore[attr-defined]
                return None
            session.execute(delete(ActSeat).where(ActSeat.session == session_id))
            return "expired"

    def release(self, hosted: Hosted, session_id: str) -> bool:
        """Give back `session_id`'s seat; whether it held one."""
        with self.db.writing() as session:
            gone = session.execute(
                delete(ActSeat).where(ActSeat.session == session_id, ActSeat.hosted_id == hosted.id)
            )
            return bool(gone.rowcount)  # type: ignore[attr-defined]

    def seats(self, hosted_id: int) -> list[ActSeat]:
        """The live seats on `hosted_id`'s act plane."""
        now = utcnow()
        with self.db.reading() as session:
            return list(
                session.execute(
                    select(ActSeat).where(ActSeat.hosted_id == hosted_id, ActSeat.kept_until > now)
                ).scalars()
            )

    def stop(self, hosted: Hosted) -> int:
        """A stopped deployment: its workers end and its seats go; how many workers were serving."""
        with self.db.writing() as session:
            session.execute(delete(ActSeat).where(ActSeat.hosted_id == hosted.id))
            workers = session.execute(
                select(ActWorker).where(ActWorker.hosted_id == hosted.id, ActWorker.ended_at.is_(None))
            ).scalars()
            ended = 0
            for worker in workers:
                self._end(session, worker, "the deployment was stopped")
                ended += 1
            return ended

    def _live(self, session: Session, hosted_id: int) -> ActWorker | None:
        """The newest worker of `hosted_id` not ended; one whose beats stopped is ended here, its seats
        given back."""
        now = utcnow()
        workers = session.execute(
            select(ActWorker)
            .where(ActWorker.hosted_id == hosted_id, ActWorker.ended_at.is_(None))
            .order_by(ActWorker.created_at.desc(), ActWorker.id.desc())
        ).scalars()
        for worker in workers:
            silent = worker.beat_at is not None and (now - worker.beat_at).total_seconds() > LOST_S
            if silent:
                self._end(session, worker, f"its beats stopped ({LOST_S:g} s without one)")
                continue
            return worker
        return None

    def _file(self, session: Session, hosted_id: int, version_id: int) -> ActWorker:
        # Take the deployment's row first: two connects filing at once are one after the other, the second
        # finding the first's worker.
        session.execute(update(Hosted).where(Hosted.id == hosted_id).values(settings_rev=Hosted.settings_rev))
        found = self._live(session, hosted_id)
        if found is not None:
            return found
        worker = ActWorker(hosted_id=hosted_id, version_id=version_id)
        session.add(worker)
        session.flush()
        return worker

    def _end(self, session: Session, worker: ActWorker, why: str) -> None:
        worker.ended_at = utcnow()
        worker.why_ended = why[:500]
        session.execute(delete(ActSeat).where(ActSeat.worker_id == worker.id))
        self.captures.broke(worker.hosted_id, worker.id, f"its worker ended: {why}")

    # --- the worker's side ------------------------------------------------------------------------------

    def claim(self, claimer: str) -> Claimed | None:
        """The oldest wanted worker, taken by `claimer`; None when none is wanted."""
        with self.db.writing() as session:
            wanted = session.execute(
                select(ActWorker)
                .where(ActWorker.claimed_by.is_(None), ActWorker.ended_at.is_(None))
                .order_by(ActWorker.created_at, ActWorker.id)
                .limit(1)
            ).scalar_one_or_none()
            if wanted is None:
                return None
            taken = session.execute(
                update(ActWorker)
                .where(ActWorker.id == wanted.id, ActWorker.claimed_by.is_(None))
                .values(claimed_by=claimer, beat_at=utcnow())
            )
            if not taken.rowcount:  # type: ignore[attr-defined]
                return None
            return Claimed(wanted.id, wanted.hosted_id, wanted.version_id)

    def listening(self, worker_id: int, url: str, fingerprint: str) -> None:
        with self.db.writing() as session:
            session.execute(
                update(ActWorker)
                .where(ActWorker.id == worker_id)
                .values(url=url, fingerprint=fingerprint, beat_at=utcnow())
            )

    def beat(self, worker_id: int) -> bool:
        """Say worker `worker_id` is alive; False when it was ended meanwhile (it stops)."""
        with self.db.writing() as session:
            beaten = session.execute(
                update(ActWorker)
                .where(ActWorker.id == worker_id, ActWorker.ended_at.is_(None))
                .values(beat_at=utcnow())
            )
            return bool(beaten.rowcount)  # type: ignore[attr-defined]

    def ended(self, worker_id: int, why: str) -> None:
        with self.db.writing() as session:
            worker = session.get(ActWorker, worker_id)
            if worker is not None and worker.ended_at is None:
                self._end(session, worker, why)

    def seated(self, worker_id: int) -> frozenset[str]:
        """The sessions with a live seat on worker `worker_id`."""
        now = utcnow()
        with self.db.reading() as session:
            return frozenset(
                session.execute(
                    select(ActSeat.session).where(ActSeat.worker_id == worker_id, ActSeat.kept_until > now)
                ).scalars()
            )
