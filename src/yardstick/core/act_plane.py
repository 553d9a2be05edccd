"""The act plane: robots driving a deployment live, as the Sequences SDK's `connect` does it.

Two planes, kept apart. The gateway's (`connect`, `ready`, `keepalive`, `release`) is a few transactions on
three tables: a robot's seat (`ActSeat`, named by the session its SDK made), the worker that serves a
deployment to robots (`ActWorker`), the robot keys (`core.robot_keys`). The data plane is that worker: a
process a platform worker starts (`worker/act_server`), which the robot reaches directly over TLS pinned to
the certificate the worker made for itself, with a secret derived from the install's and the worker's id
(`direct_secret`), so the gateway hands it out without storing it and the worker checks it without asking.

A deployment may be served by several workers (its scaling, `core.act_scaling`: workers kept warm, spares
while robots are connected, a most, robots a worker): a connect seats its robot on the least busy worker
that listens, filing more as that scaling says.
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

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from yardstick.core.act_scaling import Scaling, scaling_of
from yardstick.core.captures import Captures
from yardstick.core.hosting import serving_policies
from yardstick.core.planners import policies_below
from yardstick.core.planners import spec_of as planners_spec
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
        """Seat `session_id` on a worker serving `hosted` (kept where it already sits): the least busy of
        those that listen, more filed as its scaling says (`core.act_scaling`); Warming while none listens
        (the filings kept: the Warming is raised once they are written)."""
        scaling = scaling_of(hosted.settings or {}, version.declared or {})
        with self.db.writing() as session:
            self._take(session, hosted.id)
            workers = self._workers(session, hosted.id, serving=version.id)
            loads = self._loads(session, workers, but=session_id)
            seat = session.get(ActSeat, session_id)
            sitting = next((w for w in workers if seat is not None and w.id == seat.worker_id), None)
            if sitting is not None and sitting.url is not None:
                return self._seat(session, robot, hosted, sitting, session_id)
            listening = [w for w in workers if w.url is not None and w.fingerprint is not None]
            roomy = [w for w in listening if loads[w.id] < scaling.seats_per_worker]
            wanted = max(1, scaling.floor(sum(loads.values()) + 1))
            if listening and not roomy and len(listening) == len(workers):
                # Every worker full and none starting: one more for this robot, within the most.
                wanted = max(wanted, min(len(workers) + 1, scaling.max_workers))
            workers += self._grow(session, hosted.id, version.id, len(workers), wanted)
            if listening:  # seated now, on a full worker if none has room, until another listens
                least = min(roomy or listening, key=lambda w: loads[w.id])
                return self._seat(session, robot, hosted, least, session_id)
            starting = _starting(hosted.name, workers[0])
            assert starting is not None  # none listens
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
        """A worker serving `hosted`, or starting for it: those its scaling keeps, at least one, filed now
        if missing (a ready poll starts one as a connect does). A listening one if there is one."""
        scaling = scaling_of(hosted.settings or {}, version.declared or {})
        with self.db.writing() as session:
            workers, _ = self._fill(session, hosted.id, version.id, scaling, at_least=1)
            return next((w for w in workers if w.url is not None), workers[0])

    def keep_floors(self) -> int:
        """File the workers each deployment keeps serving, robot or not: a policy's `min_workers`, and one
        for a planner while a robot is seated anywhere below it (it plans only then). How many were filed;
        a platform worker calls it every few seconds. Read first: a deployment takes its row (a write) only
        when it is short."""
        now = utcnow()
        short: list[tuple[Hosted, HostedVersion, int]] = []
        with self.db.reading() as session:
            serving = serving_policies(session)
            # Counted by version: a redeployed policy's workers of an earlier version serve it no more.
            live = {
                (hosted_id, version_id): count
                for hosted_id, version_id, count in session.execute(
                    select(ActWorker.hosted_id, ActWorker.version_id, func.count())
                    .where(ActWorker.ended_at.is_(None))
                    .group_by(ActWorker.hosted_id, ActWorker.version_id)
                ).all()
            }
            seated = dict(
                session.execute(
                    select(ActSeat.hosted_id, func.count())
                    .where(ActSeat.kept_until > now)
                    .group_by(ActSeat.hosted_id)
                ).all()
            )
            by_org: dict[int, dict[str, tuple[Hosted, HostedVersion]]] = {}
            for hosted, version in serving.values():
                by_org.setdefault(hosted.org_id, {})[hosted.name] = (hosted, version)
            for hosted, version in serving.values():
                if hosted.stopped:
                    continue
                if planners_spec(version) is not None:
                    below = policies_below(hosted, by_org[hosted.org_id])
                    floor = 1 if any(seated.get(policy, 0) for policy in below) else 0
                else:
                    floor = scaling_of(hosted.settings or {}, version.declared or {}).min_workers
                if floor > live.get((hosted.id, version.id), 0):
                    short.append((hosted, version, floor))
        filed = 0
        for hosted, version, floor in short:
            scaling = scaling_of(hosted.settings or {}, version.declared or {})
            with self.db.writing() as session:
                filed += len(self._fill(session, hosted.id, version.id, scaling, at_least=floor)[1])
        return filed

    def may_idle(self, worker_id: int) -> bool:
        """Whether worker `worker_id` may stop for idling: its deployment keeps more workers serving than its
        scaling wants with the robots connected now."""
        with self.db.reading() as session:
            worker = session.get(ActWorker, worker_id)
            hosted = session.get(Hosted, worker.hosted_id) if worker is not None else None
            version = session.get(HostedVersion, worker.version_id) if worker is not None else None
            if worker is None or hosted is None or version is None:
                return True
            workers = self._workers(session, hosted.id, end_silent=False)
            robots = sum(self._loads(session, workers).values())
            return len(workers) > scaling_of(hosted.settings or {}, version.declared or {}).floor(robots)

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
        """The newest worker of `hosted_id` not ended."""
        workers = self._workers(session, hosted_id)
        return workers[0] if workers else None

    def _workers(
        self, session: Session, hosted_id: int, end_silent: bool = True, serving: int | None = None
    ) -> list[ActWorker]:
        """The workers of `hosted_id` not ended, newest first; those whose beats stopped are ended here,
        their seats given back, and so are those of another version than `serving` (the deployment's
        version now, where given): a robot seated on one connects again, to the version deployed."""
        now = utcnow()
        workers = session.execute(
            select(ActWorker)
            .where(ActWorker.hosted_id == hosted_id, ActWorker.ended_at.is_(None))
            .order_by(ActWorker.created_at.desc(), ActWorker.id.desc())
        ).scalars()
        live = []
        for worker in workers:
            silent = worker.beat_at is not None and (now - worker.beat_at).total_seconds() > LOST_S
            if silent and end_silent:
                self._end(session, worker, f"its beats stopped ({LOST_S:g} s without one)")
                continue
            if serving is not None and worker.version_id != serving:
                self._end(session, worker, "its deployment serves another version now")
                continue
            live.append(worker)
        return live

    @staticmethod
    def _loads(session: Session, workers: list[ActWorker], but: str | None = None) -> dict[int, int]:
        """{worker id: its live seats}, the seat of session `but` left out."""
        loads = {w.id: 0 for w in workers}
        if not workers:
            return loads
        seated = session.execute(
            select(ActSeat.worker_id, ActSeat.session).where(
                ActSeat.worker_id.in_(list(loads)), ActSeat.kept_until > utcnow()
            )
        ).all()
        for worker_id, seat_session in seated:
            if seat_session != but and worker_id in loads:
                loads[worker_id] += 1
        return loads

    @staticmethod
    def _take(session: Session, hosted_id: int) -> None:
        """Take the deployment's row: connects filing workers at once are one after the other, the second
        finding the first's."""
        session.execute(update(Hosted).where(Hosted.id == hosted_id).values(settings_rev=Hosted.settings_rev))

    def _fill(
        self, session: Session, hosted_id: int, version_id: int, scaling: Scaling, at_least: int
    ) -> tuple[list[ActWorker], list[ActWorker]]:
        """The deployment's live workers and those filed now, until there are as many as its scaling keeps
        with the robots seated now, and `at_least` (its row taken first)."""
        self._take(session, hosted_id)
        workers = self._workers(session, hosted_id, serving=version_id)
        robots = sum(self._loads(session, workers).values())
        filed = self._grow(session, hosted_id, version_id, len(workers), max(at_least, scaling.floor(robots)))
        return workers + filed, filed

    @staticmethod
    def _grow(session: Session, hosted_id: int, version_id: int, have: int, wanted: int) -> list[ActWorker]:
        """File workers of `hosted_id` until it has `wanted` (the row taken first)."""
        filed = [ActWorker(hosted_id=hosted_id, version_id=version_id) for _ in range(max(0, wanted - have))]
        session.add_all(filed)
        session.flush()
        return filed

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
