"""One rig episode, written as the episode folder that the Positronic vocabulary (`eval_vocabulary`) defines.

    static.json              the statics, one JSON object (what each key holds: `_statics`)
    meta.json                the episode's uid, and the rig, shape, rate and start that recorded it
    robot.joints.parquet     a file per signal: its `value` column and each sample's times, int64
    robot.gripper.parquet    nanoseconds, on the world clock (0 at the episode's start) and the wall
    action.parquet           clock (the Unix epoch), each under two timelines: `ts.harness.world` and
                             `ts.harness.wall` (the rig is the harness that records; what a reader
                             picks by `recording_timeline`) and `ts.emitted.world` and `ts.emitted.wall`
                             (what `positronic_evals`' labelers read a trial's span from)
    eval.instruction.parquet the instruction the policy got: one sample, at the first observation
    progress.state.parquet   the operator's ladder marks, each value a `Stage` code ("reaching")
    <camera>.mp4             a H.264 video per camera, one frame per sample
    <camera>.frames.parquet  each frame's times, row i for frame i: Positronic's index of a video signal

Every name a labeler reads comes from the vocabulary, so this writer and `positronic_evals`' labelers cannot
disagree; the keys under `yardstick.` are ours. A labeler times an event from the first sample of any signal,
so the rig samples the robot at world time 0, when the episode starts.

Files are written under a `.partial` name and renamed once whole, `static.json` last: a folder that has its
statics is complete. Samples stay in memory until `close` (a rig episode is minutes at tens of hertz: a few
thousand rows); frames are encoded as they come.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from eval_vocabulary.episode import (
    BENCHMARK_TASK,
    ENDED_BY,
    ENDED_BY_OPERATOR,
    ENDED_BY_POLICY,
    INSTRUCTION,
    META_FILE,
    POLICY_END,
    SEED,
    SIGNAL_FILE_SUFFIX,
    STATIC_FILE,
    SUCCESS,
    TASK,
    TERMINATED,
    TIMESTAMP_COLUMN_PREFIX,
    UID,
    VALUE_COLUMN,
    PolicyEnd,
)
from eval_vocabulary.outcome import OUTCOME, SUCCESSFUL_ITEMS, TOTAL_ITEMS, Outcome, is_scored
from eval_vocabulary.progress import STATE_SIGNAL, Stage
from eval_vocabulary.timeline import EMITTED_WALL, EMITTED_WORLD, HARNESS_WALL, HARNESS_WORLD

# The engine's encoder, so a rig episode's video is made exactly as a simulated one's (libx264, yuv420p,
# faststart, odd sides padded, a frame of another size fitted to the first).
from yardstick.engine.recording import PARTIAL, VIDEO_SUFFIX, Image, _Video

# The robot's state and the action rows: the signals every rig records, under the names the rig plans use.
ROBOT_JOINTS = "robot.joints"
ROBOT_GRIPPER = "robot.gripper"
ACTION = "action"

WORLD_TIME_COLUMN = f"{TIMESTAMP_COLUMN_PREFIX}{EMITTED_WORLD}"
WALL_TIME_COLUMN = f"{TIMESTAMP_COLUMN_PREFIX}{EMITTED_WALL}"
HARNESS_WORLD_COLUMN = f"{TIMESTAMP_COLUMN_PREFIX}{HARNESS_WORLD}"
HARNESS_WALL_COLUMN = f"{TIMESTAMP_COLUMN_PREFIX}{HARNESS_WALL}"
# A camera's frame index beside its video, as Positronic's dataset pairs `<name>.mp4` with it.
FRAMES_SUFFIX = f".frames{SIGNAL_FILE_SUFFIX}"

# Our statics, beside the vocabulary's.
# Which endpoint played: an opaque token that only the run maps to an endpoint, so a folder handed to a
# reviewer names no policy.
ENDPOINT_TOKEN = "yardstick.endpoint_token"
SCENE = "yardstick.scene"  # the scene as laid out at the station: a JSON object, the plan's scene fields
NOTES = "yardstick.notes"  # the operator's notes
# When the rig ended the episode, in seconds of world time. A labeler reads the end from the signals' span,
# as the vocabulary's labelers do; this is the rig's own reading, at most one control step later.
SECONDS_TO_END = "yardstick.seconds_to_end"

# Our meta, beside the uid.
RIG = "yardstick.rig"
SHAPE = "yardstick.shape"
HZ = "yardstick.hz"  # the rate the rig samples at, and its videos play at
STARTED_WALL_NS = "yardstick.started_wall_ns"
CAMERAS = "yardstick.cameras"  # the cameras a video was written for
PROBLEMS = "yardstick.problems"  # what went wrong with a video, a line a problem; absent when nothing did

# A signal's or camera's name is its file's name: no path, no space.
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
_RESERVED = frozenset({ACTION, STATE_SIGNAL, INSTRUCTION})
_ENDERS = (ENDED_BY_OPERATOR, ENDED_BY_POLICY)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """How an episode ended and what the operator made of it: what `EpisodeWriter.close` records."""

    outcome: Outcome  # `Outcome.UNSCORED` when nobody judged the episode
    seconds_to_end: float  # the world time the episode ended at
    ended_by: str | None = None  # ENDED_BY_OPERATOR or ENDED_BY_POLICY; None: it ran to its cap
    policy_end: PolicyEnd | None = None  # the policy's claim, when the policy ended the episode
    successful_items: int | None = None  # items delivered, where the task has items
    total_items: int | None = None
    notes: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.outcome, Outcome):
            raise ValueError(f"outcome: one of {', '.join(Outcome)}, not {self.outcome!r}")
        _seconds(self.seconds_to_end, "seconds_to_end")
        if self.ended_by is not None and self.ended_by not in _ENDERS:
            raise ValueError(f"ended_by: {' or '.join(_ENDERS)}, or None for the cap; not {self.ended_by!r}")
        if self.policy_end is not None and (
            not isinstance(self.policy_end, PolicyEnd) or self.ended_by != ENDED_BY_POLICY
        ):
            raise ValueError("policy_end: a PolicyEnd, and only where the policy ended the episode")
        for name, count, least in (
            ("successful_items", self.successful_items, 0),
            ("total_items", self.total_items, 1),
        ):
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < least):
                raise ValueError(f"{name}: a whole number from {least}, not {count!r}")
        if self.successful_items is not None and (
            self.total_items is None or self.successful_items > self.total_items
        ):
            raise ValueError(
                f"successful_items: {self.successful_items} of a total_items of {self.total_items}, "
                "which it may not exceed"
            )
        if self.notes is not None and not isinstance(self.notes, str):
            raise ValueError(f"notes: text, not {type(self.notes).__name__}")


def _statics(
    task: str,
    benchmark_task: str,
    seed: int | None,
    verdict: Verdict,
    endpoint_token: str | None,
    scene: Mapping[str, object] | None,
) -> dict[str, object]:
    """`static.json`: the vocabulary's keys as its labelers read them, then ours."""
    static: dict[str, object] = {TASK: task, BENCHMARK_TASK: benchmark_task, OUTCOME: str(verdict.outcome)}
    if seed is not None:
        static[SEED] = seed
    if verdict.ended_by is not None:
        static[ENDED_BY] = verdict.ended_by
    if verdict.policy_end is not None:
        static[POLICY_END] = str(verdict.policy_end)
    # The time ran out where the rig's cap ended the episode, or where the operator's verdict says so.
    static[TERMINATED] = verdict.ended_by is not None and verdict.outcome is not Outcome.OUT_OF_TIME
    if is_scored(verdict.outcome):
        static[SUCCESS] = verdict.outcome is Outcome.SUCCESS
    if verdict.successful_items is not None:
        static[SUCCESSFUL_ITEMS] = verdict.successful_items
    if verdict.total_items is not None:
        static[TOTAL_ITEMS] = verdict.total_items
    if endpoint_token is not None:
        static[ENDPOINT_TOKEN] = endpoint_token
    if scene is not None:
        static[SCENE] = dict(scene)
    if verdict.notes is not None:
        static[NOTES] = verdict.notes
    static[SECONDS_TO_END] = verdict.seconds_to_end
    return static


class _Signal:
    """One signal's samples: a value at each pair of times, all values of one shape."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.world: list[int] = []
        self.wall: list[int] = []
        self.values: list[Any] = []
        self.shape: tuple[int, ...] | None = None

    @property
    def last_ns(self) -> int | None:
        return self.world[-1] if self.world else None

    def check(self, value: npt.NDArray[Any]) -> None:
        """ValueError when `value` is not of the shape this signal's first value had."""
        if self.shape is not None and value.shape != self.shape:
            raise ValueError(f"{self.name}: a value of shape {value.shape}, where its first had {self.shape}")

    def append(self, world_ns: int, wall_ns: int, value: Any) -> None:
        self.world.append(world_ns)
        self.wall.append(wall_ns)
        self.values.append(value)
        if isinstance(value, np.ndarray):
            self.shape = value.shape

    def table(self) -> Any:
        """The signal as Positronic stores one: `value`, and its times on the world and the wall timelines."""
        return pa.table({VALUE_COLUMN: _column(self.values), **_times(self.world, self.wall)})


def _times(world: Sequence[int], wall: Sequence[int]) -> dict[str, Any]:
    """The time columns of a signal or a frame index: the same two clocks under the harness's timelines and
    the emitter's, since the rig both emits the samples and records them."""
    world_ns, wall_ns = pa.array(world, type=pa.int64()), pa.array(wall, type=pa.int64())
    return {
        HARNESS_WORLD_COLUMN: world_ns,
        HARNESS_WALL_COLUMN: wall_ns,
        WORLD_TIME_COLUMN: world_ns,
        WALL_TIME_COLUMN: wall_ns,
    }


def _column(values: list[Any]) -> Any:
    """Text as strings; numbers as numbers, or as fixed-size lists of them where each value is a vector."""
    if all(isinstance(value, str) for value in values):
        return pa.array(values, type=pa.string())
    stacked = np.stack(values)
    if stacked.ndim == 1:
        return pa.array(stacked)
    return pa.FixedSizeListArray.from_arrays(pa.array(stacked.reshape(-1)), stacked.shape[1])


class _Camera:
    """One camera's video, a frame per sample from its first image on, and the index of its frames' times.

    A sample without this camera's image holds its last one, and a camera first seen late starts black, so
    frame i of every camera is sample i. A failing encoder drops the video, not the episode: `problem` says
    why.
    """

    def __init__(self, name: str, folder: Path, rate: Fraction) -> None:
        self.name = name
        self.path = folder / f"{name}{VIDEO_SUFFIX}"
        self.index = folder / f"{name}{FRAMES_SUFFIX}"
        self.rate = rate
        self.video: _Video | None = None
        self.written = False  # the video and its index are whole under their names
        self.problem: str | None = None

    def frame(self, image: Image | None, samples: int) -> None:
        """The frame of sample `samples - 1`: `image`, or the last image where None."""
        if self.problem is not None:
            return
        try:
            if self.video is None:
                if image is None:
                    return
                self.video = _Video(self.path, image.shape[0], image.shape[1], self.rate, 1)
                black = np.zeros_like(image)
                for pts in range(samples - 1):
                    self.video.write(black, pts)
            if image is None:
                self.video.repeat(samples - 1)
            else:
                self.video.write(image, samples - 1)
        except Exception as exc:
            self.fail(exc)

    def close(self, world: Sequence[int], wall: Sequence[int]) -> list[Path]:
        """The video finished and its index written (the samples' times); none where no image came."""
        if self.video is None or self.problem is not None:
            return []
        try:
            frames = self.video.last_pts + 1
            if self.video.resized:
                self.problem = (
                    f"video {self.name}: frames of another size than its first "
                    f"({self.video.width}×{self.video.height}) were cropped or padded to it"
                )
            index = pa.table(_times(world[:frames], wall[:frames]))
            written = [self.video.close(), _publish_table(self.index, index)]
            self.written = True
            return written
        except Exception as exc:
            self.fail(exc)
            return []

    def fail(self, exc: BaseException) -> None:
        self.written = False
        said = " ".join(str(exc).split())
        self.problem = f"video {self.name}: {type(exc).__name__}: {said}"
        self.abort()

    def abort(self) -> None:
        if self.video is not None:
            self.video.abort()
        with contextlib.suppress(OSError):
            self.path.unlink()


class EpisodeWriter:
    """Writes one rig episode into `folder`: `sample` at every control step from world time 0, `mark` at each
    of the operator's ladder marks, then `close` with the verdict (or `abort`).

    The clocks are the caller's: `world_s` is the episode's world clock in seconds, `wall_ns` the Unix time in
    nanoseconds at which the rig read the robot (or the operator marked). A call the episode cannot take (time
    going backwards, a value of another shape, an unknown camera) raises ValueError and records nothing.
    """

    def __init__(
        self,
        folder: Path,
        *,
        uid: str,
        task: str,
        benchmark_task: str,
        hz: float,
        started_wall_ns: int,
        cameras: Sequence[str] = (),
        endpoint_token: str | None = None,
        scene: Mapping[str, object] | None = None,
        rig: str | None = None,
        shape: str | None = None,
        seed: int | None = None,
    ) -> None:
        if not isinstance(uid, str) or not uid.strip():
            raise ValueError(f"uid: the episode's id, some text, not {uid!r}")
        for name, text in (("task", task), ("benchmark_task", benchmark_task)):
            if not isinstance(text, str):
                raise ValueError(f"{name}: text, not {type(text).__name__}")
        if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not math.isfinite(hz) or hz <= 0:
            raise ValueError(f"hz: the samples a second, above 0, not {hz!r}")
        _wall(started_wall_ns, "started_wall_ns")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed: the trial's seed, a whole number, not {seed!r}")
        for camera in cameras:
            _check_name(camera, "camera")
            if camera in _RESERVED:
                raise ValueError(f"camera {camera!r}: the name of a signal the writer records itself")
        if len(set(cameras)) != len(cameras):
            raise ValueError(f"cameras: each named once, not {list(cameras)}")
        if scene is not None:
            # Copied through JSON now: a scene that static.json could not hold is refused before the episode.
            scene = json.loads(json.dumps(dict(scene), allow_nan=False))
        if folder.exists() and any(folder.iterdir()):
            raise FileExistsError(f"{folder} already holds files: an episode folder is written once")
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._uid, self._task, self._benchmark_task = uid, task, benchmark_task
        self._hz, self._started_wall_ns = float(hz), started_wall_ns
        self._endpoint_token, self._scene = endpoint_token, scene
        self._rig, self._shape, self._seed = rig, shape, seed
        rate = Fraction(hz).limit_denominator(1_000_000)
        self._cameras = {camera: _Camera(camera, folder, rate) for camera in cameras}
        self._signals: dict[str, _Signal] = {}
        self._marks = _Signal(STATE_SIGNAL)
        self._instruction = _Signal(INSTRUCTION)
        self._samples = _Signal("samples")  # the times of every sample: the frames' index
        self._closed = False

    def sample(
        self,
        world_s: float,
        state: Mapping[str, npt.ArrayLike],
        images: Mapping[str, Image],
        action: npt.ArrayLike | None,
        *,
        wall_ns: int,
    ) -> None:
        """The robot at `world_s`: its state by signal name (`ROBOT_JOINTS`, `ROBOT_GRIPPER`), a frame of each
        camera that has one now, and the action row played from now on (None before the policy gave one)."""
        self._check_open()
        world_ns = _nanoseconds(world_s, "world_s")
        _wall(wall_ns, "wall_ns")
        last = self._samples.last_ns
        if last is not None and world_ns <= last:
            raise ValueError(f"world_s: {world_s} s is not after the last sample, at {last / 1e9} s")
        # Everything is checked before anything is kept, so a refused sample leaves no trace.
        values: dict[str, npt.NDArray[Any]] = {}
        for name, value in state.items():
            _check_name(name, "state signal")
            if name in _RESERVED or name in self._cameras:
                # Positronic reads `<name>.mp4` and `<name>.parquet` as one signal: a name is one of them.
                raise ValueError(f"state: {name!r} is the name of a camera or of a signal the writer records")
            values[name] = _numbers(value, name)
        if action is not None:
            values[ACTION] = _numbers(action, ACTION)
        for name, value in values.items():
            if name in self._signals:
                self._signals[name].check(value)
        unknown = sorted(set(images) - set(self._cameras))
        if unknown:
            raise ValueError(f"images: no camera {', '.join(unknown)}; the cameras are {list(self._cameras)}")
        for camera, image in images.items():
            _check_image(image, camera)
        if not self._samples.world:
            # The rig's instruction never changes within an episode: its one sample is at the first
            # observation.
            self._instruction.append(world_ns, wall_ns, self._task)
        self._samples.append(world_ns, wall_ns, None)
        for name, value in values.items():
            self._signals.setdefault(name, _Signal(name)).append(world_ns, wall_ns, value)
        for camera, video in self._cameras.items():
            video.frame(images.get(camera), len(self._samples.world))

    def mark(self, world_s: float, stage: Stage, *, wall_ns: int) -> None:
        """The operator marked that the arm reached `stage` at `world_s`."""
        self._check_open()
        try:
            code = Stage(stage)
        except ValueError:
            raise ValueError(f"stage: one of {', '.join(Stage)}, not {stage!r}") from None
        world_ns = _nanoseconds(world_s, "world_s")
        _wall(wall_ns, "wall_ns")
        last = self._marks.last_ns
        if last is not None and world_ns < last:
            raise ValueError(f"world_s: a mark at {world_s} s, before the last one at {last / 1e9} s")
        # Two marks within one reading of the world clock keep their order a nanosecond apart: a signal's
        # times rise strictly.
        if last is not None:
            world_ns = max(world_ns, last + 1)
        self._marks.append(world_ns, wall_ns, str(code))

    def close(self, verdict: Verdict) -> list[Path]:
        """Finish the folder with `verdict` and return the files written, `static.json` last.

        ValueError, with nothing written and the writer still open, when the verdict ends the episode before
        its last sample or mark. Once the files are being written, an OSError leaves the folder without its
        statics: incomplete, as a reader can tell.
        """
        self._check_open()
        if not isinstance(verdict, Verdict):
            raise ValueError(f"verdict: a Verdict, not {type(verdict).__name__}")
        end_ns = _nanoseconds(verdict.seconds_to_end, "seconds_to_end")
        recorded = [signal.last_ns for signal in (self._samples, self._marks) if signal.last_ns is not None]
        if recorded and end_ns < max(recorded):
            raise ValueError(
                f"seconds_to_end: {verdict.seconds_to_end} s is before the last sample or mark, "
                f"at {max(recorded) / 1e9} s"
            )
        self._closed = True
        written: list[Path] = []
        try:
            signals = [*self._signals.values(), self._marks, self._instruction]
            for signal in sorted((s for s in signals if s.world), key=lambda s: s.name):
                path = self.folder / f"{signal.name}{SIGNAL_FILE_SUFFIX}"
                written.append(_publish_table(path, signal.table()))
            for camera in self._cameras.values():
                written += camera.close(self._samples.world, self._samples.wall)
            written.append(_publish_json(self.folder / META_FILE, self._meta()))
            static = _statics(
                self._task, self._benchmark_task, self._seed, verdict, self._endpoint_token, self._scene
            )
            written.append(_publish_json(self.folder / STATIC_FILE, static))
        except BaseException:
            for camera in self._cameras.values():
                camera.abort()
            raise
        return written

    def abort(self) -> None:
        """Stop without a folder worth reading: the videos under way are removed, nothing more is written."""
        if self._closed:
            return
        self._closed = True
        for camera in self._cameras.values():
            camera.abort()

    @property
    def problems(self) -> list[str]:
        """What went wrong with the videos so far, a line a problem; meta.json keeps them too."""
        return [camera.problem for camera in self._cameras.values() if camera.problem is not None]

    def _meta(self) -> dict[str, object]:
        meta: dict[str, object] = {
            UID: self._uid,
            HZ: self._hz,
            STARTED_WALL_NS: self._started_wall_ns,
            CAMERAS: [name for name, camera in self._cameras.items() if camera.written],
        }
        if self._rig is not None:
            meta[RIG] = self._rig
        if self._shape is not None:
            meta[SHAPE] = self._shape
        if self.problems:
            meta[PROBLEMS] = self.problems
        return meta

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the episode in {self.folder} is closed")


def _seconds(value: float, name: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name}: seconds of world time from the episode's start, 0 or more, not {value!r}")
    return float(value)


def _nanoseconds(value: float, name: str) -> int:
    return round(_seconds(value, name) * 1e9)


def _wall(value: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}: nanoseconds since the Unix epoch, a whole number, not {value!r}")


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.endswith(".frames"):
        raise ValueError(
            f"{what} {name!r}: a name is a file's name (letters, digits, '.', '_', '-'), not ending '.frames'"
        )


def _numbers(value: npt.ArrayLike, name: str) -> npt.NDArray[Any]:
    """`value` as an array of numbers, a scalar or a vector: the shapes a signal's `value` column holds."""
    array = np.array(value)
    if array.dtype.kind not in "biuf" or array.ndim > 1:
        raise ValueError(f"{name}: a number or a vector of numbers, not {array.dtype} of shape {array.shape}")
    return array


def _check_image(image: Image, camera: str) -> None:
    if not (
        isinstance(image, np.ndarray)
        and image.dtype == np.uint8
        and image.ndim == 3
        and image.shape[2] == 3
        and image.shape[0] > 0
        and image.shape[1] > 0
    ):
        raise ValueError(f"images[{camera!r}]: a uint8 H×W×3 array")


def _publish(path: Path, write: Callable[[Path], object]) -> Path:
    """`path`, written whole under a `.partial` name by `write` and then renamed."""
    partial = path.with_name(path.name + PARTIAL)
    try:
        write(partial)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    return path


def _publish_table(path: Path, table: Any) -> Path:
    return _publish(path, lambda partial: pq.write_table(table, str(partial)))


def _publish_json(path: Path, value: Mapping[str, object]) -> Path:
    text = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return _publish(path, lambda partial: partial.write_text(text, encoding="utf-8"))
