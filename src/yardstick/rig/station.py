"""The operator's side of a rig: what the station console shows and what the operator's buttons do.

One `Station` per rig process, shared by the loop that drives the robot and the console that serves the
operator (`console`), under one condition variable. An episode goes `layout` (the scene to lay out, Start)
→ `playing` (Stop, the progress ladder, End) → `verdict` (the vocabulary's verdicts in their order, item
counts, notes, Discard) → the next. Stop calls the robot's own `stop` from the console's thread at once: the
loop may be waiting on the policy, and a person pressing Stop does not wait for it.

What the station holds of a policy is the run's opaque token, never its name: the operator of a blind sample
is told nothing of which policy plays.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from eval_vocabulary.outcome import VERDICTS, Outcome
from eval_vocabulary.progress import LADDER, STAGE_LABELS, Stage

# The phases an episode passes through at the station, in order; `idle` between runs.
PHASES: Final = ("idle", "layout", "playing", "verdict")


@dataclass(frozen=True)
class Judgement:
    """What the operator said of an episode: a verdict (or Discard), the items delivered, notes."""

    outcome: Outcome
    successful_items: int | None = None
    notes: str | None = None


@dataclass
class _Episode:
    shown: dict[str, Any]
    started_at: float | None = None
    marks: list[tuple[float, Stage]] = field(default_factory=list)
    stopped: bool = False
    ended: bool = False
    judgement: Judgement | None = None
    why_ended: str | None = None


class Station:
    def __init__(self, rig: str, shape: str, cameras: tuple[str, ...]) -> None:
        self.rig, self.shape, self.cameras = rig, shape, cameras
        self._changed = threading.Condition()
        self._phase = "idle"
        self._episode: _Episode | None = None
        self._queue: list[dict[str, Any]] = []
        self._frames: dict[str, npt.NDArray[np.uint8]] = {}
        self._stop_robot: Callable[[], None] | None = None
        self._note = "waiting for a rig plan"

    # --- the loop's side -------------------------------------------------------------------------------

    def waiting(self, note: str, queue: list[dict[str, Any]] | None = None) -> None:
        with self._changed:
            self._phase, self._episode, self._note = "idle", None, note
            self._queue = list(queue or [])
            self._changed.notify_all()

    def show(
        self, episode: dict[str, Any], queue: list[dict[str, Any]], stop_robot: Callable[[], None]
    ) -> None:
        """Put `episode` up to be laid out: its instruction and scene, never its policy's name."""
        with self._changed:
            self._phase, self._episode = "layout", _Episode(shown=dict(episode))
            self._queue, self._stop_robot = list(queue), stop_robot
            self._frames = {}  # the last episode's views are not this one's
            self._changed.notify_all()

    def wait_start(self, timeout: float) -> bool:
        """Whether the operator pressed Start within `timeout` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self._phase == "playing", timeout=timeout)

    def should_end(self) -> str | None:
        """Why the episode must end now: `stop` (the operator's Stop), `end` (the operator's End), or None."""
        with self._changed:
            episode = self._episode
            if episode is None:
                return None
            return "stop" if episode.stopped else "end" if episode.ended else None

    def ended(self, why: str) -> None:
        """The episode ended (`why`: stop, end, cap, policy, fault): the operator gives the verdict now."""
        with self._changed:
            if self._episode is not None:
                self._episode.why_ended = why
            self._phase = "verdict"
            self._changed.notify_all()

    def wait_judgement(self, timeout: float) -> Judgement | None:
        """The operator's judgement, or None when none came within `timeout` (the episode stays unscored)."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._episode is not None and self._episode.judgement is not None, timeout=timeout
            )
            return self._episode.judgement if self._episode is not None else None

    def marks(self) -> list[tuple[float, Stage]]:
        with self._changed:
            return list(self._episode.marks) if self._episode is not None else []

    def frame(self, camera: str, image: npt.NDArray[np.uint8]) -> None:
        """The camera's latest image, kept as it is (a copy: a robot may reuse its buffer); the console
        encodes it when the page asks, never the loop that drives the robot."""
        copied = np.array(image, copy=True)
        with self._changed:
            self._frames[camera] = copied

    def latest(self, camera: str) -> npt.NDArray[np.uint8] | None:
        with self._changed:
            return self._frames.get(camera)

    # --- the operator's side ---------------------------------------------------------------------------

    def start(self) -> bool:
        with self._changed:
            if self._phase != "layout" or self._episode is None:
                return False
            self._phase, self._episode.started_at = "playing", time.monotonic()
            self._changed.notify_all()
            return True

    def stop(self) -> bool:
        """Stop the robot now, whatever the loop is doing: the episode ends `Safety`."""
        with self._changed:
            if self._phase != "playing" or self._episode is None:
                return False
            self._episode.stopped = True
            stop_robot = self._stop_robot
        if stop_robot is not None:
            stop_robot()  # outside the lock: the robot's stop takes the time it takes, the page does not wait
        return True

    def end(self) -> bool:
        with self._changed:
            if self._phase != "playing" or self._episode is None:
                return False
            self._episode.ended = True
            return True

    def mark(self, stage: Stage) -> bool:
        with self._changed:
            episode = self._episode
            if self._phase != "playing" or episode is None or episode.started_at is None:
                return False
            episode.marks.append((time.monotonic() - episode.started_at, stage))
            return True

    def judge(self, judgement: Judgement) -> bool:
        with self._changed:
            if self._phase != "verdict" or self._episode is None or self._episode.judgement is not None:
                return False
            if judgement.outcome not in (*VERDICTS, Outcome.DISCARDED):
                return False
            self._episode.judgement = judgement
            self._changed.notify_all()
            return True

    def snapshot(self) -> dict[str, Any]:
        """What the console page draws, as JSON."""
        with self._changed:
            episode = self._episode
            return {
                "rig": self.rig,
                "shape": self.shape,
                "phase": self._phase,
                "note": self._note,
                "cameras": list(self.cameras),
                "episode": None
                if episode is None
                else {
                    **episode.shown,
                    "marks": [{"seconds": round(s, 2), "stage": str(stage)} for s, stage in episode.marks],
                    "why_ended": episode.why_ended,
                    "judged": episode.judgement is not None,
                },
                "queue": self._queue,
                "ladder": [{"code": str(stage), "label": STAGE_LABELS[stage]} for stage in LADDER],
                "verdicts": [str(v) for v in VERDICTS],
            }
