"""A robot's episodes on an act worker: the observations it posts, by number, and the wire session each
episode plays its acts on.

The SDK numbers an episode's observations from 0 and posts them on connections of their own, several at once,
so they arrive in any order and an act may come before the observations it follows: an act numbered `n` is
served once every observation before `n` that this worker has not handed on yet is here (or was left out by
the robot), waiting up to `FRAMES_WAIT_S` for them; past that it is refused `frames_missing` from the first
it lacks, and the SDK posts them again. An episode counts from the first number it is sent (a robot moved
here from another worker begins its new episode anew). The newest observation before an act is what the
policy answers from; an episode's wire session is opened at its first act with the parameters the act
carries, so they change only at an episode's boundary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from yardstick.wire.session import Session

__all__ = ["FRAMES_WAIT_S", "KEPT_FRAMES", "Episode", "Episodes", "FramesMissing", "TooManyFrames"]

FRAMES_WAIT_S: Final = 3.0
# The most observations kept for an episode between two acts: past it a post is refused (the robot leaves
# them out and says so once).
KEPT_FRAMES: Final = 4096
# The most plans an episode keeps (the contract keeps as many of a planner's records).
KEPT_PLANS: Final = 256
# An episode with no call for this long is ended by the worker (a robot that vanished mid-episode).
EPISODE_IDLE_S: Final = 120.0


class FramesMissing(Exception):
    def __init__(self, first: int) -> None:
        super().__init__(f"the observations from number {first} have not reached this worker")
        self.first = first


class TooManyFrames(Exception):
    pass


@dataclass
class Episode:
    """One robot's episode on this worker."""

    id: str
    session: str  # the robot's SDK session: an episode is its robot's alone
    start: int | None = None  # the first number it was sent
    handed: int = 0  # every number below this has been used by an act
    frames: dict[int, Any] = field(default_factory=dict)
    arriving: set[int] = field(default_factory=set)  # posted, being journaled: no act sees them yet
    skipped: set[int] = field(default_factory=set)
    latest: Any = None
    wire: Session | None = None
    acts: int = 0
    used_at: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)  # one act at a time per episode
    # What a planner wrote for this robot: all of it (what the planner reads back of the robot), and
    # what its next act has not handed the policy yet.
    plans: list[dict[str, Any]] = field(default_factory=list)
    unhanded: list[dict[str, Any]] = field(default_factory=list)

    def planned(self, value: Any) -> dict[str, Any]:
        """Keep one plan for this episode's next act, at the step of its newest observation."""
        entry = {"step": max(self.through() - 1, 0), "value": value}
        self.plans.append(entry)
        del self.plans[:-KEPT_PLANS]
        self.unhanded.append(entry)
        return entry

    def take_plans(self) -> list[dict[str, Any]]:
        taken, self.unhanded = self.unhanded, []
        return taken

    def through(self) -> int:
        """The number before which every observation is here (the answer to a post)."""
        n = self.handed
        while n in self.frames or n in self.skipped:
            n += 1
        return n

    def missing_before(self, n: int) -> int | None:
        """The first number below `n` this worker lacks and has not handed on; None when none is missing.
        Looked for among the `KEPT_FRAMES` after the last act at most: an act numbered past those asks for
        more than a worker keeps (a robot's bug, or a hostile number), and the first past them is missing."""
        for k in range(self.handed, min(n, self.handed + KEPT_FRAMES)):
            if k not in self.frames and k not in self.skipped:
                return k
        return None if n <= self.handed + KEPT_FRAMES else self.handed + KEPT_FRAMES


class Episodes:
    """Every episode on the worker, their observations and the waits of acts for them."""

    def __init__(self) -> None:
        self._episodes: dict[str, Episode] = {}
        self._changed = threading.Condition()

    def of(self, episode_id: str, session: str) -> Episode:
        with self._changed:
            episode = self._episodes.get(episode_id)
            if episode is None or episode.session != session:
                episode = Episode(episode_id, session)
                self._episodes[episode_id] = episode
            episode.used_at = time.monotonic()
            return episode

    def observed(
        self,
        episode_id: str,
        session: str,
        frames: Iterable[tuple[int, Any]],
        skipped: Iterable[int],
        kept: Callable[[str, list[tuple[int, Any]]], None] | None = None,
    ) -> tuple[Episode, list[tuple[int, Any]]]:
        """Keep posted observations; the episode and those that are new (each kept once). `kept` is handed
        the new ones before an act can take them: an act's thread runs as soon as it is woken, so a journal
        written after the observations were seen could write the act before the observation it answered.
        `kept` runs outside the lock every episode shares (an observation's images may be megabytes to
        write, and every robot's posts and acts wait on that lock): the new observations are `arriving`
        meanwhile, neither missing to a resend nor there to an act."""
        fresh: list[tuple[int, Any]] = []
        with self._changed:
            episode = self.of(episode_id, session)
            frames, skipped = list(frames), list(skipped)
            if episode.start is None and (frames or skipped):
                episode.start = min([n for n, _ in frames] + skipped)
                episode.handed = max(episode.handed, episode.start) if episode.acts == 0 else episode.handed
            taken: set[int] = set()
            for number, inputs in frames:
                known = number in episode.frames or number in episode.arriving or number in taken
                if number >= episode.handed and not known:
                    taken.add(number)
                    fresh.append((number, inputs))
            # Counted once each: a resend of what is here or on its way adds nothing.
            if len(episode.frames) + len(episode.arriving) + len(fresh) > KEPT_FRAMES:
                raise TooManyFrames(f"more than {KEPT_FRAMES} observations between two acts")
            episode.arriving.update(taken)
            episode.skipped.update(n for n in skipped if n >= episode.handed)
            if not fresh:
                self._changed.notify_all()  # what it skipped may be what an act waits for
                return episode, fresh
        journaled = False
        try:
            if kept is not None:
                kept(episode_id, fresh)
            journaled = True
        finally:
            with self._changed:
                episode.arriving.difference_update(taken)
                # Not journaled (`kept` raised): not kept either, so the robot's resend is new again and
                # journaled then; no act answers from an observation its journal lacks.
                for number, inputs in fresh if journaled else ():
                    if number >= episode.handed:  # not passed by an act meanwhile (it was skipped too)
                        episode.frames[number] = inputs
                self._changed.notify_all()
        return episode, fresh

    def take_before(
        self, episode: Episode, n: int, wait_s: float = FRAMES_WAIT_S
    ) -> tuple[list[tuple[int, Any]], Any]:
        """Once every observation before act `n` is here (FramesMissing past `wait_s`): those not handed on
        yet but the newest, as (number, observation), and the newest, which the act is answered from."""
        deadline = time.monotonic() + wait_s
        with self._changed:
            while (first := episode.missing_before(n)) is not None:
                left = deadline - time.monotonic()
                # More than a worker keeps between two acts can never all be here: no wait for them.
                if left <= 0 or n > episode.handed + KEPT_FRAMES:
                    raise FramesMissing(first)
                self._changed.wait(left)
            kept = sorted(k for k in episode.frames if k < n)
            taken = [(k, episode.frames.pop(k)) for k in kept]
            if taken:
                episode.latest = taken[-1][1]
            episode.skipped = {k for k in episode.skipped if k >= n}
            episode.handed = max(episode.handed, n)
            episode.used_at = time.monotonic()
            return taken[:-1], episode.latest

    def end(self, episode_id: str) -> Episode | None:
        with self._changed:
            return self._episodes.pop(episode_id, None)

    def idle(self, now: float | None = None) -> list[Episode]:
        """The episodes no call touched for `EPISODE_IDLE_S`, taken out."""
        now = time.monotonic() if now is None else now
        with self._changed:
            gone = [e for e in self._episodes.values() if now - e.used_at > EPISODE_IDLE_S]
            for episode in gone:
                del self._episodes[episode.id]
            return gone

    def of_session(self, prefix: str) -> Episode | None:
        """The open episode of the robot whose session begins `prefix` (as a planner names a robot), its
        newest if it has several."""
        with self._changed:
            found = [e for e in self._episodes.values() if e.session.startswith(prefix)]
            return max(found, key=lambda e: e.used_at) if found else None

    def all(self) -> list[Episode]:
        with self._changed:
            return list(self._episodes.values())

    def drop_sessions(self, keep: Callable[[str], bool]) -> list[Episode]:
        """Take out the episodes of robots whose seat went."""
        with self._changed:
            gone = [e for e in self._episodes.values() if not keep(e.session)]
            for episode in gone:
                del self._episodes[episode.id]
            return gone
