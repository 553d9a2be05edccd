"""The 3D replay of a benchmark that hands its frames over itself (`replay={"engine": "own"}`, the Sequences
contract's `seq.Replay(engine="own")`): the receiver `yardstick.sdk.replay` sends them to while a run plays.

The benchmark calls `scene(slot, glb)` and `frame(slot, ...)` inside its own reset and step, before the loop
knows the episode has begun: the receiver keeps what a slot was handed until the episode's recorder takes it
(`track`, right after the reset), then the episode's later frames go into the same track, and the track's
close ends it (what the slot is handed next is the next episode's). A benchmark of one world may name any
slot: its frames are its one world's. The scene is kept per slot across episodes, for a benchmark that hands
it once. Nothing here raises into the benchmark: a bad scene or frame is kept as the replay's error (the
episode's `recording_error`) and ends that episode's replay, never the episode.

A frame's `step` left out is the number of frames handed before it in the episode (0: the reset's), which
is the loop's count of steps when the benchmark hands one frame after its reset and one after every step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from yardstick.engine.files_ahead import FileAhead
from yardstick.engine.replay_track import SaidLooks, write_scene
from yardstick.replay3d.format import ReplayWriter
from yardstick.sdk import replay as sdk_replay

GLB_MAGIC = b"glTF"


class _Handed:
    """What one episode of a slot was handed: the scene, and the frames in a writer once the first arrives."""

    def __init__(self, scene: tuple[bytes, str] | None, hz: float) -> None:
        self.scene = scene  # the glb and its sha256
        self.hz = hz
        self.writer: ReplayWriter | None = None
        self.error: str | None = None

    def frame(
        self,
        t: float,
        nodes: list[str],
        pos: Any,
        quat: Any,
        step: int | None,
        looks: Mapping[str, Mapping[str, Any]] | None,
    ) -> None:
        if self.error is not None:
            return
        try:
            writer = self.writer
            if writer is None:
                sha = self.scene[1] if self.scene is not None else None
                meta = {"hz": self.hz}
                writer = self.writer = ReplayWriter(nodes, engine="own", scene_sha256=sha, meta=meta)
            elif nodes != writer.nodes:
                raise ValueError(
                    f"nodes: the same names every frame of an episode; frame {writer.frames} names "
                    f"{nodes[:8]}, the first named {writer.nodes[:8]}"
                )
            writer.frame(float(t), writer.frames if step is None else int(step), pos, quat, looks)
        except Exception as exc:  # the benchmark's frame is refused, never the benchmark's step
            self.error = f"seq.replay.frame: {type(exc).__name__}: {' '.join(str(exc).split())}"


class HandedTrack:
    """One episode's handed replay as its recorder drives it (`replay_track.Track`). `looks`, where the
    benchmark names a looks method beside its own frames, is asked after each frame handed, as an adapter's
    replay asks it after each step: what it says that differs from what shows (its own answers and the
    frames' own looks) holds from that frame on, after the frame's own looks."""

    def __init__(
        self, receiver: HandedReplays, slot: int, handed: _Handed, looks: Callable[[], Any] | None = None
    ) -> None:
        self._receiver, self._slot, self.handed = receiver, slot, handed
        self._looks = SaidLooks(looks) if looks is not None else None
        self._asked_at = 0  # the frames handed when the looks method was last asked
        self._heard = 0  # the frames' own looks already told to it

    @property
    def notes(self) -> list[str]:
        """Nothing: a handed replay is what the benchmark said."""
        return []

    def frame(self, step: int, robot_time: float) -> None:
        """No poses to read: the benchmark has handed this step's frame already (or hands none). Its looks
        method, where it names one, is asked once a frame handed (a step that handed none waits for the
        next, so a change lands on the frame that first shows it); what goes wrong is the replay's error,
        kept as the frames' are."""
        handed, looks = self.handed, self._looks
        writer = handed.writer
        if looks is None or handed.error is not None or writer is None or writer.frames == self._asked_at:
            return
        self._asked_at = writer.frames
        try:
            # The frames' own looks first: where one changed what the method says, its answer is said again.
            looks.heard(writer.looks[self._heard :])
            writer.look(looks.changed())
            self._heard = len(writer.looks)
        except Exception as exc:
            handed.error = f"seq.Replay(looks=...): {type(exc).__name__}: {' '.join(str(exc).split())}"

    def close(self, file: FileAhead, root: Path) -> list[Path]:
        """Write the replay into `file` and its scene under `root`; the paths of both. The slot's next
        frames are the next episode's. Raises (the recorder notes it) what went wrong with what was handed."""
        handed = self.handed
        self._receiver.release(self._slot, handed)
        if handed.error is not None:
            raise ValueError(handed.error)
        if handed.writer is None:
            raise ValueError(
                'replay={"engine": "own"}: the benchmark handed no frame (seq.replay.frame after its reset '
                "and after every step)"
            )
        written = [file.write(handed.writer.to_bytes())]
        if handed.scene is not None:
            glb, sha = handed.scene
            written.append(write_scene(root, sha, glb))
        return written


class HandedReplays:
    """The receiver of a run's handed replays (`sdk.replay.Receiver`), one slot a world."""

    def __init__(self, worlds: int, hz: float) -> None:
        self._one = worlds == 1
        self._hz = hz
        self._open: dict[int, _Handed] = {}
        self._scenes: dict[int, tuple[bytes, str]] = {}  # a slot's scene and its sha256, hashed once

    def __enter__(self) -> HandedReplays:
        self._before = sdk_replay.install(self)
        return self

    def __exit__(self, *exc: object) -> None:
        sdk_replay.install(self._before)

    def scene(self, slot: int, glb: bytes) -> None:
        """A new episode begins in `slot`, drawn in `glb`."""
        at = self._at(slot)
        kept = self._scenes.get(at)
        if kept is None or kept[0] != glb:  # the same scene again (an episode each) is not hashed again
            kept = (glb, hashlib.sha256(glb).hexdigest())
        handed = self._open[at] = _Handed(kept, self._hz)
        if glb.startswith(GLB_MAGIC):
            self._scenes[at] = kept
        else:
            handed.error = "seq.replay.scene: a scene is a glTF binary (.glb, starting b'glTF')"

    def frame(
        self,
        slot: int,
        t: float,
        nodes: list[str],
        pos: Any,
        quat: Any,
        *,
        step: int | None = None,
        looks: dict[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self._handed(self._at(slot)).frame(t, nodes, pos, quat, step, looks)

    def track(self, slot: int, looks: Callable[[], Any] | None = None) -> HandedTrack:
        """The episode beginning in world `slot`: what was handed in its reset, and what comes next; `looks`
        the benchmark's looks method for that world, where it names one."""
        return HandedTrack(self, slot, self._handed(self._at(slot)), looks)

    def release(self, slot: int, handed: _Handed) -> None:
        if self._open.get(self._at(slot)) is handed:
            del self._open[self._at(slot)]

    def _handed(self, at: int) -> _Handed:
        handed = self._open.get(at)
        if handed is None:
            handed = self._open[at] = _Handed(self._scenes.get(at), self._hz)
        return handed

    def _at(self, slot: int) -> int:
        return 0 if self._one else slot
