"""A planner's rounds, on the platform worker that took its act worker (`ActHost`).

Every `every_s` (from one round's start to the next; at once when an observation arrives holding one of
its `wake_on` keys) while a robot is connected anywhere below it, the loop gathers the round — each policy
member's robots read from the act workers serving them (their open episodes: newest observation, step,
the plans they hold), each planner member's own record, what was observed into this planner and what the
planner above wrote for it since the last round — asks the planner's box over our wire, and writes what
its plan returned: a robot's part to that robot's act worker (appended to its episode's `seq.plans`,
handed to its policy with its next act), a planner member's part into that planner's records, the
planner's own state for its next round. A robot with no episode open yet is "unwritten" this round, and
planned again the next.

The act workers are reached as robots reach them, over TLS pinned to the certificate each made for itself,
with the platform's own secret for that worker (`act_plane.platform_secret`), which no robot holds.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from sqlalchemy import select

from yardstick.core import planners
from yardstick.core.act_plane import platform_secret
from yardstick.core.planners import PlannerSpec
from yardstick.store.db import Database
from yardstick.store.models import ActSeat, ActWorker, Hosted, PlannerState, RobotKey, utcnow
from yardstick.wire.address import RemoteEndpoint
from yardstick.wire.errors import PeerDisconnected, ProtocolError, RemoteError, WireError
from yardstick.wire.session import open_session
from yardstick.worker.act_server import seq_msgpack

__all__ = ["PlannerLoop"]

log = logging.getLogger(__name__)

LOOK_S: Final = 0.25
CALL_TIMEOUT_S: Final = 10.0
ROBOT_ID: Final = "robot:"
POLICY_ID: Final = "policy:"
PLANNER_ID: Final = "planner:"
# The platform's keys of a planner's group.state, as the planner's own class names them.
OBSERVATIONS: Final = "seq.observations"
PLANS: Final = "seq.plans"


@dataclass
class _Worker:
    id: int
    url: str
    fingerprint: str


@dataclass
class _Member:
    name: str
    kind: str
    hosted_id: int
    workers: list[_Worker] = field(default_factory=list)
    seats: dict[str, str] = field(default_factory=dict)  # a robot's session -> its name
    state: dict[str, Any] | None = None


class PlannerLoop:
    """The rounds of planner `planner_id`, whose box serves at `policy`."""

    def __init__(
        self,
        db: Database,
        install_secret: bytes,
        planner_id: int,
        spec: PlannerSpec,
        policy: RemoteEndpoint,
        *,
        request_timeout_s: float,
    ) -> None:
        self.db = db
        self.install_secret = install_secret
        self.planner_id = planner_id
        self.spec = spec
        self.policy = policy
        self.request_timeout_s = request_timeout_s
        self.failed: str | None = None
        self.last_act = time.monotonic()  # the last round a robot was below it
        self.rounds = 0
        self._looked = 0  # the newest record `_woken` has looked at (a round reads them all anew)
        self.fingerprint = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"planner-{planner_id}", daemon=True)

    # --- what the act host asks of what it serves -------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.request_timeout_s + 10)

    def busy(self) -> bool:
        return False

    def sweep(self) -> None:
        pass

    # --- the rounds -------------------------------------------------------------------------------------

    def _run(self) -> None:
        wire = None
        try:
            wire = open_session(self.policy, reply_timeout=self.request_timeout_s, startup_timeout=60.0)
            next_at = time.monotonic()
            while not self._stop.is_set():
                self._wait_for_round(next_at)
                if self._stop.is_set():
                    return
                began = time.monotonic()
                try:
                    self._round(wire)
                except RemoteError as exc:  # the plan raised: noted, and called again next tick
                    log.warning("planner %s: its plan raised: %s", self.planner_id, exc)
                next_at = began + self.spec.every_s
        except (PeerDisconnected, ProtocolError, WireError, OSError, TimeoutError) as exc:
            self.failed = f"its planner's server went away ({exc})"
        except Exception as exc:  # a bug of ours must not leave the worker serving a dead planner
            log.exception("planner %s: its rounds stopped", self.planner_id)
            self.failed = f"its rounds stopped: {exc}"
        finally:
            if wire is not None:
                wire.close()

    def _wait_for_round(self, next_at: float) -> None:
        """Until the next tick, or an observation that wakes the planner, whichever comes first."""
        while not self._stop.is_set():
            left = next_at - time.monotonic()
            if left <= 0 or (self.spec.wake_on and self._woken()):
                return
            self._stop.wait(min(LOOK_S, left))

    def _woken(self) -> bool:
        """Whether a record come since the last look holds a `wake_on` key (each record looked at once)."""
        with self.db.reading() as session:
            fresh = planners.records_after(session, self.planner_id, self._looked)
        self._looked = max([self._looked, *(row.id for row in fresh)])
        for row in fresh:
            data = row.data if row.kind == "observation" else {PLANS: row.data}
            if isinstance(data, dict) and any(key in data for key in self.spec.wake_on):
                return True
        return False

    def _round(self, wire: Any) -> None:
        with self.db.writing() as session:
            planner = session.get(Hosted, self.planner_id)
            if planner is None:
                raise OSError("the planner was removed")
            state = planners.state_of(session, self.planner_id)
            own, seen = dict(state.state or {}), state.seen
            records = planners.records_after(session, self.planner_id, seen)
            members = self._members(session, planner.org_id)
        if not any(m.seats for m in members):
            return  # no robot below it: nothing to plan; the host stops it once that lasts
        self.last_act = time.monotonic()
        robots = {m.name: self._robots_of(m) for m in members if m.kind == "policy"}
        asked = {
            "state": {
                **own,
                OBSERVATIONS: [_shown(r) for r in records if r.kind == "observation"],
                PLANS: [_shown(r) for r in records if r.kind == "plan"],
            },
            "members": [
                {
                    "id": (POLICY_ID if m.kind == "policy" else PLANNER_ID) + m.name,
                    "name": m.name,
                    "kind": m.kind,
                    "robots": [
                        {"id": rid, "name": name, "state": robot_state}
                        for rid, (name, robot_state, _) in robots.get(m.name, {}).items()
                    ],
                    "state": m.state,
                }
                for m in members
            ],
        }
        wire.ask(asked)
        answer, _ = wire.answer()
        self.rounds += 1
        plans = answer.get("plans") if isinstance(answer, dict) else None
        kept = answer.get("state") if isinstance(answer, dict) else None
        self._write(planner, members, robots, plans if isinstance(plans, dict) else {})
        with self.db.writing() as session:
            state = planners.state_of(session, self.planner_id)
            state.state = kept if isinstance(kept, dict) else own
            state.seen = max([seen, *(r.id for r in records)])
            state.planned_at = utcnow()

    def _members(self, session: Any, org_id: int) -> list[_Member]:
        """The planner's members now: each policy's live act workers and seated robots, each planner's own
        record and whether robots sit below it."""
        ready = planners.serving(session, org_id)
        found: list[_Member] = []
        for name in self.spec.members:
            if name not in ready:
                continue  # removed, or no version serves it now
            hosted, version = ready[name]
            if planners.spec_of(version) is None:
                member = _Member(name, "policy", hosted.id)
                member.workers = [
                    _Worker(w.id, w.url, w.fingerprint)
                    for w in session.execute(
                        select(ActWorker).where(
                            ActWorker.hosted_id == hosted.id,
                            ActWorker.ended_at.is_(None),
                            ActWorker.url.is_not(None),
                        )
                    ).scalars()
                    if w.url and w.fingerprint
                ]
                member.seats = _seated(session, [hosted.id])
            else:
                held = session.get(PlannerState, hosted.id)
                member = _Member(name, "planner", hosted.id, state=dict(held.state or {}) if held else {})
                member.seats = _seated(session, planners.policies_below(hosted, ready))
            found.append(member)
        return found

    def _robots_of(self, member: _Member) -> dict[str, tuple[str, dict[str, Any], _Worker]]:
        """{robot id: (its name, its episode as the planner reads it, its worker)} of a policy member."""
        robots: dict[str, tuple[str, dict[str, Any], _Worker]] = {}
        for worker in member.workers:
            secret = platform_secret(self.install_secret, worker.id)
            try:
                body = seq_msgpack.unpack(_pinned(worker, "GET", "/robots", secret))
            except (OSError, ValueError, ssl.SSLError, http.client.HTTPException) as exc:
                log.info("planner %s: worker %s could not be read: %s", self.planner_id, worker.id, exc)
                continue
            for robot in body.get("robots") or []:
                session = next((s for s in member.seats if s.startswith(str(robot["session"]))), None)
                if session is None:
                    continue  # an episode whose seat went meanwhile
                state = {
                    "episode": robot.get("episode"),
                    "step": robot.get("step"),
                    "observation": robot.get("observation"),
                    PLANS: robot.get("plans") or [],
                }
                robots[ROBOT_ID + str(robot["session"])] = (member.seats[session], state, worker)
        return robots

    def _write(
        self,
        planner: Hosted,
        members: list[_Member],
        robots: dict[str, dict[str, tuple[str, dict[str, Any], _Worker]]],
        plans: dict[str, Any],
    ) -> None:
        by_robot = {rid: entry for of_member in robots.values() for rid, entry in of_member.items()}
        by_planner = {PLANNER_ID + m.name: m for m in members if m.kind == "planner"}
        for target, value in plans.items():
            if value is None:
                continue
            if target in by_robot:
                worker = by_robot[target][2]
                secret = platform_secret(self.install_secret, worker.id)
                path = f"/robots/plans?session={target.removeprefix(ROBOT_ID)}"
                try:
                    _pinned(worker, "POST", path, secret, seq_msgpack.pack({"value": value}))
                except (OSError, ValueError, ssl.SSLError, http.client.HTTPException) as exc:
                    log.info("planner %s: %s unwritten this round: %s", planner.name, target, exc)
            elif target in by_planner:
                with self.db.writing() as session:
                    planners.record(session, by_planner[target].hosted_id, "plan", planner.name, value)
            else:
                log.info("planner %s: its plan named %r, no member of it now", planner.name, target)


def _shown(row: Any) -> dict[str, Any]:
    if row.kind == "observation":
        return {"id": row.id, "at": row.at.isoformat(), "by": row.by, "data": row.data}
    return {"id": row.id, "at": row.at.isoformat(), "by": row.by or "", "value": row.data}


def _seated(session: Any, hosted_ids: list[int]) -> dict[str, str]:
    """The live seats on `hosted_ids`: each robot's session and its name (its robot key's last four, or
    "robot" when the account's key connected it)."""
    if not hosted_ids:
        return {}
    rows = session.execute(
        select(ActSeat, RobotKey)
        .outerjoin(RobotKey, RobotKey.id == ActSeat.robot_key_id)
        .where(ActSeat.hosted_id.in_(hosted_ids), ActSeat.kept_until > utcnow())
    ).all()
    return {seat.session: f"robot-{key.last_four}" if key is not None else "robot" for seat, key in rows}


def _pinned(worker: _Worker, method: str, path: str, secret: str, body: bytes | None = None) -> bytes:
    """One call to an act worker over TLS, refused unless its certificate is the one it made for itself."""
    where = urlsplit(worker.url)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # verified below, by the pinned fingerprint
    connection = http.client.HTTPSConnection(
        where.hostname or "", where.port, context=context, timeout=CALL_TIMEOUT_S
    )
    try:
        connection.connect()
        der = connection.sock.getpeercert(binary_form=True) if connection.sock else None
        if der is None or hashlib.sha256(der).hexdigest() != worker.fingerprint:
            raise ssl.SSLError(f"worker {worker.id} presented a certificate other than its own")
        headers = {"Authorization": f"Bearer {secret}", "Content-Type": seq_msgpack.MEDIA_TYPE}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        if response.status >= 400:
            raise OSError(f"{response.status}: {json.loads(data or b'{}').get('detail', '')}")
        return data
    finally:
        connection.close()
