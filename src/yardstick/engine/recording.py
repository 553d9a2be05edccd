"""Recording of episodes: a video per camera (H.264 in mp4), the trajectory (gzip JSON lines), the 3D replay.

A run that records writes, under its recording folder, one folder per episode (`episode_folder`):

    episodes/000003/image.corner.mp4     one video per camera found in the observations
    episodes/000003/trajectory.jsonl.gz  one JSON line per step: step, robot_time, action, done,
                                         success, metrics
    episodes/000003/replay.seqreplay     the 3D replay: every frame's poses of the scene's moving nodes
    scenes/<sha256>.glb                  the scene replays are drawn in, once a model (`replay_track`)

A camera is any key of an observation dict that starts with `image` and holds a uint8 H×W×3 array
(`image.corner`, Meta-World's form). Every video of an episode starts at the episode's first frame (the
reset observation) and ends at its last, so an episode's cameras play together. Frames are stamped with
the robot's clock (a tick is one step, 1/hz s): the videos last as long as the episode did on the robot,
whatever the recording rate. At a recording rate below the policy's, one frame every round(hz/fps) steps
is kept, plus always the first and the last (the moment the episode ended is what a researcher looks
for). A camera seen first after the reset starts with a black frame; one missing from a later
observation holds its last image.

Recording never costs an episode its result: whatever fails (a full disk, an odd frame) is written into
the recorder's `errors`, the part that failed stops, and the episode goes on. Files are written under a
`.partial` name and renamed when complete, so a file that exists under its own name is whole. A replay's
file (and its folder, when nothing else recorded needs it sooner) is made while the episode plays, on a
thread of its own (`files_ahead`): the episode's end only fills and renames it.

Encoding: libx264 at preset veryfast, crf 23, one thread, yuv420p, faststart (the index first, so a
browser plays while the file still arrives). At 224×224 a frame costs about 0.9 ms here (0.15 ms to
copy it in, 0.3 ms to convert to YUV, 0.5 ms to encode) against about 0.65 ms at ultrafast, whose files
are four times larger (a 300-step Meta-World episode: 38 KiB against 155 KiB). One thread: a pool
already runs a worker per core, and at these sizes x264's threads buy nothing.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from yardstick.engine import mp4
from yardstick.engine.files_ahead import FileAhead
from yardstick.engine.replay_track import REPLAY, ReplayTrack, Track

if TYPE_CHECKING:
    from av.container import OutputContainer
    from av.video.frame import VideoFrame
    from av.video.stream import VideoStream

TRAJECTORY = "trajectory.jsonl.gz"
VIDEO_SUFFIX = ".mp4"
PARTIAL = ".partial"
VIDEO_PRESET = "veryfast"
VIDEO_CRF = 23
NO_IMAGES = (
    "video: no observation held an image (a uint8 H×W×3 array under a key starting with 'image', "
    "e.g. image.<camera>): no video was written"
)

Image = npt.NDArray[np.uint8]


def episode_folder(root: str | Path, index: int) -> Path:
    """Where episode `index` of a run recording into `root` keeps its files. The one place this is said."""
    return Path(root) / "episodes" / f"{index:06d}"


@dataclass(frozen=True)
class Recording:
    """What a run records of each episode, and where. `fps` None keeps every step's frame (the policy's
    rate); a lower rate keeps one frame every round(hz / fps) steps. `replay_if_declared`: a replay only of
    a benchmark that declares one, and nothing said of one that does not (the platform's runs, where a
    replay is on by default); off, a benchmark declaring none is told how in each episode's recording error.
    Picklable: it travels to workers."""

    video: bool = False
    trajectory: bool = False
    folder: str | None = None
    replay: bool = False
    fps: float | None = None
    replay_if_declared: bool = False

    def __post_init__(self) -> None:
        fps = self.fps
        if fps is not None and (
            isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0
        ):
            raise ValueError(f"fps: frames a second is a number above 0 (or None: one a step), not {fps!r}")
        if self.active and not self.folder:
            raise ValueError("folder: a recording needs the folder its episode folders go in")

    @property
    def active(self) -> bool:
        return self.video or self.trajectory or self.replay

    def every(self, hz: float) -> int:
        """Steps between kept frames at a policy rate of `hz`."""
        if self.fps is None or self.fps >= hz:
            return 1
        return max(1, round(hz / self.fps))


def cameras(observation: Any) -> list[tuple[str, Image]]:
    """The images of an observation: (key, uint8 H×W×3 array) for each key starting with `image`."""
    if not isinstance(observation, Mapping):
        return []
    found: list[tuple[str, Image]] = []
    for key, value in observation.items():
        if (
            isinstance(key, str)
            and key.startswith("image")
            and isinstance(value, np.ndarray)
            and value.dtype == np.uint8
            and value.ndim == 3
            and value.shape[2] == 3
            and value.shape[0] > 0
            and value.shape[1] > 0
        ):
            found.append((key, value))
    return found


class _Video:
    """One camera's mp4: frames stamped in steps of the robot's clock."""

    def __init__(self, path: Path, height: int, width: int, hz: Fraction, every: int) -> None:
        import av

        self.path = path
        self.partial = path.with_name(path.name + PARTIAL)
        self.height, self.width = height, width
        self.last_pts = -1
        self.last_frame: VideoFrame | None = None
        self.held: Image | None = None  # the camera's latest image, when it was not kept
        self.resized = False
        self._tick = 1 / hz
        self._container: OutputContainer = av.open(
            str(self.partial), "w", format="mp4", container_options={"movflags": "+faststart"}
        )
        try:
            stream: VideoStream = self._container.add_stream("libx264", rate=hz / every)
            # yuv420p halves the chroma both ways: its sides must be even.
            stream.width = width + width % 2
            stream.height = height + height % 2
            stream.pix_fmt = "yuv420p"
            stream.options = {"preset": VIDEO_PRESET, "crf": str(VIDEO_CRF)}
            stream.codec_context.thread_count = 1
            stream.codec_context.time_base = self._tick
        except BaseException:
            self.abort()
            raise
        self._stream = stream

    def write(self, image: Image, pts: int) -> None:
        from av.video.frame import VideoFrame

        if image.shape[0] != self.height or image.shape[1] != self.width:
            image = _fit(image, self.height, self.width)
            self.resized = True
        if self.height % 2 or self.width % 2:
            image = np.pad(image, ((0, self.height % 2), (0, self.width % 2), (0, 0)), mode="edge")
        frame = VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
        self._encode(frame, pts)

    def repeat(self, pts: int) -> None:
        if self.last_frame is not None and pts > self.last_pts:
            self._encode(self.last_frame, pts)

    def _encode(self, frame: VideoFrame, pts: int) -> None:
        frame.pts = pts
        frame.time_base = self._tick
        self._container.mux(self._stream.encode(frame))
        self.last_pts, self.last_frame = pts, frame

    def close(self) -> Path:
        """Flush the encoder, finish the file and give it its name."""
        self._container.mux(self._stream.encode(None))
        self._container.close()
        os.replace(self.partial, self.path)
        return self.path

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._container.close()
        with contextlib.suppress(OSError):
            self.partial.unlink()


def _fit(image: Image, height: int, width: int) -> Image:
    """`image` cropped or padded (black) to height × width, its top-left corner kept."""
    fitted = np.zeros((height, width, 3), dtype=np.uint8)
    rows, cols = min(height, image.shape[0]), min(width, image.shape[1])
    fitted[:rows, :cols] = image[:rows, :cols]
    return fitted


class _Replay(NamedTuple):
    """An episode's replay: its frames as they come, and the file they go in at the end."""

    track: Track
    file: FileAhead


class EpisodeRecorder:
    """Records one episode into `folder`: `frame` after the reset and after every step, `action` for every
    step, `close` at the end. No method raises: a failure lands in `errors` and stops the part that failed.
    Paths it returns are absolute; `relative` gives them as the run names them (from `root`). `state`
    answers the simulator's state for a 3D replay (the run's recording asks for one), and `looks`, with it,
    what the benchmark says of how its nodes look (`ReplayTrack`); `track`, given instead, is the replay
    itself (one the benchmark hands over, `replay_own`)."""

    def __init__(
        self,
        recording: Recording,
        folder: Path,
        hz: float,
        root: Path | None = None,
        state: Callable[[], Any] | None = None,
        track: Track | None = None,
        looks: Callable[[], Any] | None = None,
    ) -> None:
        self.folder = folder
        self.root = root if root is not None else folder
        self.errors: list[str] = []
        self._video = recording.video
        self._every = recording.every(hz)
        self._hz = hz
        self._videos: dict[str, _Video] = {}
        self._names: set[str] = set()
        self._saw_image = False
        self._last_step = -1
        self._trajectory: gzip.GzipFile | None = None
        self._trajectory_path = folder / TRAJECTORY
        self._written: list[Path] = []
        if recording.replay and track is None and state is not None:
            track = ReplayTrack(state, hz, looks)
        # The replay's file (and the folder, when nothing else needs it sooner) made while the episode plays.
        self._replay = (
            _Replay(track, FileAhead(folder / REPLAY)) if recording.replay and track is not None else None
        )
        try:
            if recording.video or recording.trajectory:
                folder.mkdir(parents=True, exist_ok=True)
            if recording.trajectory:
                partial = self._trajectory_path.with_name(TRAJECTORY + PARTIAL)
                self._trajectory = gzip.GzipFile(partial, "wb", compresslevel=6)
        except Exception as exc:
            self._note("recording", exc)
            self._video = False

    @classmethod
    def open(
        cls,
        recording: Recording,
        index: int,
        hz: float,
        state: Callable[[], Any] | None = None,
        track: Track | None = None,
        looks: Callable[[], Any] | None = None,
    ) -> EpisodeRecorder:
        """The recorder of episode `index` of a run recording as `recording` says."""
        root = Path(recording.folder or ".")
        return cls(recording, episode_folder(root, index), hz, root, state, track, looks)

    def frame(self, step: int, robot_time: float, observation: Any) -> None:
        """The observation after `step` steps (0: the reset's) at `robot_time` seconds."""
        if self._replay is not None:
            try:
                self._replay.track.frame(step, robot_time)
            except Exception as exc:
                self._note("replay", exc)
                self._drop_replay()
        if not self._video:
            return
        try:
            self._last_step = step
            images = cameras(observation)
            if not images:
                return
            self._saw_image = True
            kept = step % self._every == 0
            for key, image in images:
                video = self._videos.get(key)
                if video is None:
                    video = self._open_video(key, image)
                    if step > 0:
                        # A camera seen late starts black at the episode's first frame, as the others do.
                        video.write(np.zeros_like(image), 0)
                if kept:
                    video.write(image, step)
                    video.held = None
                else:
                    # Not copied: the episode's last frame is written at close, before the benchmark can
                    # step this world again and touch an array it may reuse.
                    video.held = image
        except Exception as exc:
            self._note("video", exc)
            self._drop_videos()

    def action(
        self, step: int, robot_time: float, action: Any, success: bool, metrics: Any, *, done: bool = False
    ) -> None:
        """The action played at `step` (from `robot_time` seconds on) and what the step came to."""
        if self._trajectory is None:
            return
        try:
            line = {
                "step": step,
                "robot_time": round(robot_time, 9),
                "action": jsonable(action),
                "done": bool(done),
                "success": bool(success),
                "metrics": jsonable(metrics) if isinstance(metrics, Mapping) else {},
            }
            self._trajectory.write(json.dumps(line, allow_nan=False).encode() + b"\n")
        except Exception as exc:
            self._note("trajectory", exc)
            self._drop_trajectory()

    def close(self) -> list[Path]:
        """Finish every file (the encoders flushed) and return those written."""
        if self._replay is not None:
            try:
                self._written.extend(self._replay.track.close(self._replay.file, self.root))
                self.errors.extend(f"replay: {note}" for note in self._replay.track.notes)
            except Exception as exc:
                self._note("replay", exc)
            self._drop_replay()  # nothing once written
        if self._trajectory is not None:
            try:
                self._trajectory.close()
                self._trajectory = None
                os.replace(self._trajectory_path.with_name(TRAJECTORY + PARTIAL), self._trajectory_path)
                self._written.append(self._trajectory_path)
            except Exception as exc:
                self._note("trajectory", exc)
                self._drop_trajectory()
        if self._video:
            self._video = False
            if not self._saw_image:
                self.errors.append(NO_IMAGES)
            last = self._last_step
            for key, video in list(self._videos.items()):
                try:
                    if video.held is not None:
                        video.write(video.held, last)
                    video.repeat(last)  # a camera that left early still ends with the others
                    if video.resized:
                        self.errors.append(
                            f"video {key}: frames of another size than its first "
                            f"({video.width}×{video.height}) were cropped or padded to it"
                        )
                    self._written.append(video.close())
                except Exception as exc:
                    self._note(f"video {key}", exc)
                    video.abort()
                del self._videos[key]
        return list(self._written)

    def relative(self, paths: list[Path]) -> list[str]:
        """`paths` as the run names them: relative to its recording folder, with forward slashes."""
        return [
            (path.relative_to(self.root) if path.is_relative_to(self.root) else path).as_posix()
            for path in paths
        ]

    @property
    def error(self) -> str | None:
        """What went wrong, a line a problem; None when nothing did."""
        return "\n".join(self.errors) if self.errors else None

    def _open_video(self, key: str, image: Image) -> _Video:
        name = _file_name(key)
        stem, counter = name, 2
        while name in self._names:  # two keys that read the same as file names
            name, counter = f"{stem}-{counter}", counter + 1
        self._names.add(name)
        video = _Video(
            self.folder / (name + VIDEO_SUFFIX),
            image.shape[0],
            image.shape[1],
            Fraction(self._hz).limit_denominator(1_000_000),
            self._every,
        )
        self._videos[key] = video
        return video

    def _note(self, what: str, exc: BaseException) -> None:
        said = " ".join(str(exc).split())  # one line: `error` holds a line a problem
        self.errors.append(f"{what}: {type(exc).__name__}: {said}")

    def _drop_videos(self) -> None:
        self._video = False
        for video in self._videos.values():
            video.abort()
        self._videos.clear()

    def _drop_replay(self) -> None:
        if self._replay is not None:
            self._replay.file.abandon()
            self._replay = None

    def _drop_trajectory(self) -> None:
        if self._trajectory is not None:
            with contextlib.suppress(Exception):
                self._trajectory.close()
            self._trajectory = None
        with contextlib.suppress(OSError):
            self._trajectory_path.with_name(TRAJECTORY + PARTIAL).unlink()


def camera_of(file: str | Path) -> str:
    """The camera a video shows, from its file name: `episodes/000003/image.corner.mp4` → `corner`."""
    name = Path(file).name.removesuffix(VIDEO_SUFFIX)
    return name.removeprefix("image.") if name != "image" else name


def describe_video(path: Path) -> dict[str, Any]:
    """What a page needs to lay a video out before it loads: camera, file name, width, height, duration.
    Read by `mp4.inspect`, which checks the file's structure first (a box may have written it): NotAVideo
    for a file that is no MP4 video."""
    info = mp4.inspect(path)
    return {
        "camera": camera_of(path),
        "file": path.name,
        "width": info.width,
        "height": info.height,
        "duration_s": info.duration_s,
    }


def _file_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip(".") or "image"


_DROP = object()


def jsonable(value: Any) -> Any:
    """`value` as JSON can hold it: numpy arrays and numbers as lists and numbers, non-finite numbers as
    null; what JSON cannot hold is dropped (a mapping's key left out, a list's item null)."""
    found = _json(value)
    return None if found is _DROP else found


def _json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind not in "biufU":
            return _DROP
        return _json(value.tolist())
    if isinstance(value, Mapping):
        kept = {}
        for key, item in value.items():
            converted = _json(item)
            if converted is not _DROP and isinstance(key, (str, int, float, bool)):
                kept[str(key)] = converted
        return kept
    if isinstance(value, (list, tuple)):
        return [None if (item := _json(v)) is _DROP else item for v in value]
    return _DROP
