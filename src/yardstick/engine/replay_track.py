"""An episode's 3D replay as its recorder keeps it: the simulator read each frame, the files at the end.

Beside the episode's other files (`recording.episode_folder`):

    episodes/000003/replay.seqreplay   the poses of the scene's moving nodes at every frame (replay3d.format)
    scenes/<sha256>.glb                the scene they are drawn in, once for the whole run folder

The simulator's state is asked for once, at the episode's first frame (the reset's), from the method the
benchmark's `replay` names; what it answers (an env, a Physics) holds the live model and data, read again at
each frame. A scene already in the folder is not written again: episodes of one model share it, and its
name is its content's hash.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from yardstick.replay3d.mujoco_poses import MujocoPoses
from yardstick.replay3d.scene_cache import write_whole

REPLAY = "replay.seqreplay"
SCENES = "scenes"
SCENE_SUFFIX = ".glb"
# A scene as a run names it among an episode's files: scenes/<its sha256>.glb.
SCENE_FILE = re.compile(r"scenes/(?P<sha>[0-9a-f]{64})\.glb")


class Track(Protocol):
    """One episode's replay as its recorder drives it: a frame after the reset and every step, then close."""

    def frame(self, step: int, robot_time: float) -> None: ...

    def close(self, folder: Path, root: Path) -> list[Path]: ...


class ReplayTrack:
    """One episode's replay read from a MuJoCo simulation, from its first frame to `close`."""

    def __init__(self, state: Callable[[], Any], hz: float) -> None:
        self._state = state
        self._hz = hz
        self._poses: MujocoPoses | None = None

    def frame(self, step: int, robot_time: float) -> None:
        poses = self._poses
        if poses is None:
            poses = self._poses = MujocoPoses(self._state(), meta={"hz": self._hz})
        poses.capture(robot_time, step)

    def close(self, folder: Path, root: Path) -> list[Path]:
        """Write the replay into `folder` and its scene under `root`; the paths of both."""
        poses = self._poses
        if poses is None:
            return []
        replay = poses.writer.write(folder / REPLAY)
        return [replay, write_scene(root, poses.scene.sha256, poses.scene.glb)]


def write_scene(root: Path, sha256: str, glb: bytes) -> Path:
    """The scene `glb` (whose sha256 is `sha256`) under `root`, written unless it is there already."""
    scene = root / SCENES / (sha256 + SCENE_SUFFIX)
    if not scene.exists():
        scene.parent.mkdir(parents=True, exist_ok=True)
        # Another worker may write the same scene at once: the rename of identical bytes is harmless.
        write_whole(scene, glb)
    return scene


def replay_of(artifacts: list[str]) -> tuple[str, str | None] | None:
    """An episode's replay among the files it recorded (as the run names them): the replay's name and the
    sha256 of the scene it is drawn in; None when it has none."""
    replay = next((name for name in artifacts if name.rsplit("/", 1)[-1] == REPLAY), None)
    if replay is None:
        return None
    scenes = (SCENE_FILE.fullmatch(name) for name in artifacts)
    return replay, next((found["sha"] for found in scenes if found is not None), None)
