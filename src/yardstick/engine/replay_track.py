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

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yardstick.replay3d.format import PARTIAL
from yardstick.replay3d.mujoco_poses import MujocoPoses

REPLAY = "replay.seqreplay"
SCENES = "scenes"
SCENE_SUFFIX = ".glb"


class ReplayTrack:
    """One episode's replay, from its first frame to `close`."""

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
        scene = root / SCENES / (poses.scene.sha256 + SCENE_SUFFIX)
        if not scene.exists():
            scene.parent.mkdir(parents=True, exist_ok=True)
            # Another worker may write the same scene at the same moment: each writes its own partial file
            # and the rename of identical bytes is harmless.
            partial = scene.with_name(f"{scene.name}.{os.getpid()}{PARTIAL}")
            partial.write_bytes(poses.scene.glb)
            os.replace(partial, scene)
        return [replay, scene]
