"""Rigs: an org's robots, each with the rig process at it, and the runs they play.

A rig plan is a run that waits for a robot of its shape (`Run.rig_shape`); workers never lease its episodes.
A rig process, holding its rig's key, dials out to the platform (no port opens on the lab's network) and
claims the next such run of its org, oldest first; it then plays the run's episodes one at a time with an
operator. `begin` marks the episode the robot is playing (leased to the rig's process, with no expiry: only
the rig knows when a person has judged it), `land` records it. Each rig process names itself with a `session`
token: a claim from a new process of a rig (restarted after a crash or a power cut) finds the episode the old
one left mid-play and records it `System` — the rig's fault, never scored against the policy — and the run
goes on from the next episode, so every episode is recorded once. A run whose rig has gone silent for
`LOST_S` is claimed by another rig of its shape in the same way.

The race: two rig processes claiming at once must not take one run twice — the claim is a conditional update
of the run row (`rig_id` still what was read), so the loser reads again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import case, func, select, update
from sqlalchemy.orm import Session

from yardstick.core.refusals import bad_request, not_found
from yardstick.store.db import Database
from yardstick.store.models import Org, Rig, Run, RunEpisode, utcnow
from yardstick.store.queue import Completion, EpisodeQueue
from yardstick.store.states import ACTIVE_RUNS, EpisodeState, RunStatus

__all__ = [
    "LOST_S",
    "ONLINE_S",
    "RIG_KEY_MARK",
    "SHAPES",
    "SYSTEM",
    "Claim",
    "RigCaller",
    "RigKey",
    "Rigs",
    "register",
    "revoke",
]

RIG_KEY_MARK: Final = "ysr_"
PREFIX_LEN: Final = 13  # the mark and 9 characters: enough to find the row, too few to matter
# The shapes a rig may have: the Positronic contract's embodiments that are robots (`sim` is none).
SHAPES: Final = ("franka", "yam")
# A rig that spoke within this long is online: its process says hello at least this often while it waits.
ONLINE_S: Final = 30.0
# A rig silent this long has lost the run it holds: another rig of its shape may take it on.
LOST_S: Final = 120.0
# What an episode is recorded as when its rig dropped while it played: the vocabulary's `System`.
SYSTEM: Final = "System"
RIG_NAME: Final = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


@dataclass(frozen=True)
class RigKey:
    """A rig's key, the only time its plaintext exists."""

    plaintext: str
    rig_id: int
    name: str
    shape: str


@dataclass(frozen=True)
class RigCaller:
    """A rig process that presented a live key: its rig, org, shape, and the session it names itself by."""

    rig_id: int
    org_id: int
    name: str
    shape: str
    session: str

    @property
    def owner(self) -> str:
        """The lease owner of the episode this process plays."""
        return f"rig:{self.rig_id}:{self.session}"


@dataclass(frozen=True)
class Claim:
    """The run a rig holds, and the episodes its earlier process left mid-play (recorded `System` now)."""

    run_id: int
    dropped: tuple[int, ...] = ()


def _digest(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


class Rigs:
    def __init__(self, db: Database, queue: EpisodeQueue) -> None:
        self.db = db
        self.queue = queue

    def authenticate(self, plaintext: str, session_token: str) -> RigCaller | None:
        """The rig whose live key `plaintext` is, marked seen now by `session_token`; None for any other
        string. The digest is compared in constant time."""
        if not plaintext.startswith(RIG_KEY_MARK) or len(plaintext) < PREFIX_LEN + 8:
            return None
        with self.db.writing() as session:
            rig = session.execute(
                select(Rig).where(Rig.prefix == plaintext[:PREFIX_LEN])
            ).scalar_one_or_none()
            if (
                rig is None
                or rig.revoked_at is not None
                or not hmac.compare_digest(rig.digest, _digest(plaintext))
            ):
                return None
            rig.session, rig.seen_at = session_token[:64], utcnow()
            return RigCaller(rig.id, rig.org_id, rig.name, rig.shape, rig.session)

    # --- what a run waits on ----------------------------------------------------------------------------

    def registered(self, session: Session, org_id: int, shape: str) -> bool:
        """Whether the org has a rig of `shape` at all: a plan for a shape it has none of is refused."""
        found = session.execute(
            select(Rig.id).where(Rig.org_id == org_id, Rig.shape == shape, Rig.revoked_at.is_(None)).limit(1)
        ).first()
        return found is not None

    def online(self, org_id: int, shape: str) -> list[str]:
        """The names of the org's rigs of `shape` that spoke within `ONLINE_S`."""
        since = utcnow() - dt.timedelta(seconds=ONLINE_S)
        with self.db.reading() as session:
            return list(
                session.execute(
                    select(Rig.name)
                    .where(Rig.org_id == org_id, Rig.shape == shape, Rig.revoked_at.is_(None))
                    .where(Rig.seen_at >= since)
                    .order_by(Rig.name)
                ).scalars()
            )

    def queue_position(self, run: Run) -> int:
        """1-based place of a waiting rig run among its org's runs waiting for a rig of its shape."""
        with self.db.reading() as session:
            ahead = session.execute(
                select(func.count())
                .select_from(Run)
                .where(
                    Run.org_id == run.org_id,
                    Run.rig_shape == run.rig_shape,
                    Run.status == RunStatus.PENDING,
                    Run.received_at < run.received_at,
                )
            ).scalar_one()
        return int(ahead) + 1

    # --- playing ----------------------------------------------------------------------------------------

    def claim(self, rig: RigCaller) -> Claim | None:
        """The run `rig` plays now: the one it holds, else the oldest of its org and shape that waits (or
        whose rig was lost), claimed for it. None: nothing to play."""
        lost = utcnow() - dt.timedelta(seconds=LOST_S)
        with self.db.writing() as session:
            held = (
                session.execute(
                    select(Run.id)
                    .where(Run.rig_id == rig.rig_id, Run.status.in_(ACTIVE_RUNS))
                    .order_by(Run.received_at)
                )
                .scalars()
                .first()
            )
            if held is None:
                silent = select(Rig.id).where(Rig.id == Run.rig_id, Rig.seen_at < lost).exists()
                waiting = session.execute(
                    select(Run.id, Run.rig_id)
                    .where(Run.org_id == rig.org_id, Run.rig_shape == rig.shape, Run.status.in_(ACTIVE_RUNS))
                    .where(Run.rig_id.is_(None) | silent)
                    .order_by(Run.received_at, Run.id)
                    .limit(1)
                ).first()
                if waiting is None:
                    return None
                taken = session.execute(
                    update(Run).where(Run.id == waiting[0], _same_rig(waiting[1])).values(rig_id=rig.rig_id)
                )
                if not taken.rowcount:  # type: ignore[attr-defined]
                    return None  # another rig took it between the read and the write: ask again
                session.execute(
                    update(Run)
                    .where(Run.id == waiting[0], Run.status == RunStatus.PENDING)
                    .values(status=RunStatus.RUNNING, started_at=utcnow())
                )
                held = int(waiting[0])
            dropped = self._drop_left(session, rig, held)
            return Claim(held, dropped)

    def _drop_left(self, session: Session, rig: RigCaller, run_id: int) -> tuple[int, ...]:
        """Record `System` for the episodes of `run_id` that another rig process began and never landed."""
        left = (
            session.execute(
                select(RunEpisode)
                .where(RunEpisode.submission_id == run_id, RunEpisode.state == EpisodeState.LEASED)
                .where(RunEpisode.lease_owner != rig.owner)
            )
            .scalars()
            .all()
        )
        for episode in left:
            episode.state, episode.lease_owner, episode.finished_at = EpisodeState.DONE, None, utcnow()
            episode.result = {
                "outcome": SYSTEM,
                "metrics": {},
                "reason": "the rig playing it dropped mid-episode (its process ended or lost the network)",
            }
        if left:
            session.execute(
                update(Run).where(Run.id == run_id).values(episodes_done=Run.episodes_done + len(left))
            )
        return tuple(episode.index for episode in left)

    def begin(self, rig: RigCaller, run_id: int, index: int) -> bool:
        """Mark episode `index` of the run `rig` holds as playing on it; False when it cannot be (not its
        run, no such episode, or the episode already recorded). Asking again for the one it plays is True."""
        with self.db.writing() as session:
            holder = select(Run.id).where(
                Run.id == run_id, Run.rig_id == rig.rig_id, Run.status.in_(ACTIVE_RUNS)
            )
            if session.execute(holder).first() is None:
                return False
            started = session.execute(
                update(RunEpisode)
                .where(RunEpisode.submission_id == run_id, RunEpisode.index == index)
                .where(
                    (RunEpisode.state == EpisodeState.QUEUED)
                    | ((RunEpisode.state == EpisodeState.LEASED) & (RunEpisode.lease_owner == rig.owner))
                )
                .values(
                    state=EpisodeState.LEASED,
                    lease_owner=rig.owner,
                    lease_expires_at=None,  # never reclaimed by the workers' queue: only the rig knows
                    # Asked again (its answer lost on the way): the same attempt, not another.
                    attempt=case(
                        (RunEpisode.state == EpisodeState.QUEUED, RunEpisode.attempt + 1),
                        else_=RunEpisode.attempt,
                    ),
                )
            )
            return bool(started.rowcount)  # type: ignore[attr-defined]

    def episode_id(self, run_id: int, index: int) -> int | None:
        with self.db.reading() as session:
            found = session.execute(
                select(RunEpisode.id).where(RunEpisode.submission_id == run_id, RunEpisode.index == index)
            ).scalar_one_or_none()
        return None if found is None else int(found)

    def land(
        self,
        rig: RigCaller,
        run_id: int,
        index: int,
        result: dict[str, Any],
        artifacts: list[tuple[str, int, str]],
    ) -> Completion:
        """Record episode `index`, which this rig process began; `accepted` False when it did not. The same
        episode landed again by the rig that holds the run, with the same result (the answer to the first
        landing was lost with its connection), is accepted and changes nothing."""
        episode_id = self.episode_id(run_id, index)
        if episode_id is None:
            return Completion(accepted=False)
        landed = self.queue.complete(rig.owner, episode_id, result, artifacts)
        if landed.accepted:
            return landed
        with self.db.reading() as session:
            episode, run = session.get(RunEpisode, episode_id), session.get(Run, run_id)
            again = (
                episode is not None
                and run is not None
                and run.rig_id == rig.rig_id
                and episode.state == EpisodeState.DONE
                and episode.lease_owner is None
                and episode.result == result
            )
        return Completion(accepted=again)

    def unplayed(self, run_id: int) -> list[int]:
        """The indices of the run's episodes not yet recorded, in play order."""
        with self.db.reading() as session:
            return list(
                session.execute(
                    select(RunEpisode.index)
                    .where(RunEpisode.submission_id == run_id, RunEpisode.state != EpisodeState.DONE)
                    .order_by(RunEpisode.index)
                ).scalars()
            )


def register(session: Session, org_slug: str, name: str, shape: str) -> RigKey:
    """A new rig of the org's, or a new key for the rig of that name (its old key stops working)."""
    if not RIG_NAME.fullmatch(name):
        raise bad_request(f"name: {name!r} is no rig name (lowercase letters, digits and hyphens, ≤ 63)")
    if shape not in SHAPES:
        raise bad_request(f"shape: {shape!r} is no rig shape ({', '.join(SHAPES)})")
    plaintext = RIG_KEY_MARK + secrets.token_urlsafe(32)
    org = session.execute(select(Org).where(Org.slug == org_slug)).scalar_one_or_none()
    if org is None:
        raise not_found(f"org: no organisation {org_slug!r}")
    rig = session.execute(select(Rig).where(Rig.org_id == org.id, Rig.name == name)).scalar_one_or_none()
    if rig is None:
        rig = Rig(org_id=org.id, name=name, shape=shape, prefix="", digest="")
        session.add(rig)
    elif rig.shape != shape:
        raise bad_request(f"shape: rig {name!r} is a {rig.shape}; name a new rig for a {shape}")
    rig.prefix, rig.digest, rig.revoked_at = plaintext[:PREFIX_LEN], _digest(plaintext), None
    session.flush()
    return RigKey(plaintext, rig.id, rig.name, rig.shape)


def revoke(session: Session, org_slug: str, name: str) -> bool:
    """Stop the rig's key working; False when there is no such live rig."""
    rig = session.execute(
        select(Rig).join(Org, Org.id == Rig.org_id).where(Org.slug == org_slug, Rig.name == name)
    ).scalar_one_or_none()
    if rig is None or rig.revoked_at is not None:
        return False
    rig.revoked_at = utcnow()
    return True


def _same_rig(rig_id: int | None) -> Any:
    return Run.rig_id.is_(None) if rig_id is None else Run.rig_id == rig_id
