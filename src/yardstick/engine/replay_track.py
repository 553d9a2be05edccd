"""An episode's 3D replay as its recorder keeps it: the simulator read each frame, the files at the end.

Beside the episode's other files (`recording.episode_folder`):

    episodes/000003/replay.seqreplay   each frame's poses of the scene's recorded nodes (replay3d.format)
    scenes/<sha256>.glb                the scene they are drawn in, once for the whole run folder

The simulator's state is asked for once, at the episode's first frame (the reset's), from the method the
benchmark's `replay` names; what it answers (an env, a Physics) holds the live model and data, read again at
each frame. Its `looks` method, where it names one, is asked at every frame, and the replay keeps what it
says that changed since the frame before. A scene already in the folder is not written again: episodes of
one model share it, and its name is its content's hash.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from yardstick.engine.files_ahead import FileAhead
from yardstick.replay3d.mujoco_poses import MujocoPoses
from yardstick.replay3d.scene_cache import write_whole

REPLAY = "replay.seqreplay"
SCENES = "scenes"
SCENE_SUFFIX = ".glb"
# A scene as a run names it among an episode's files: scenes/<its sha256>.glb.
SCENE_FILE = re.compile(r"scenes/(?P<sha>[0-9a-f]{64})\.glb")


class Track(Protocol):
    """One episode's replay as its recorder drives it: a frame after the reset and every step, then close;
    `notes`, after close, what the written replay does not show right (the episode's recording error says
    it)."""

    @property
    def notes(self) -> list[str]: ...

    def frame(self, step: int, robot_time: float) -> None: ...

    def close(self, file: FileAhead, root: Path) -> list[Path]: ...


class ReplayTrack:
    """One episode's replay read from a MuJoCo simulation, from its first frame to `close`. `looks`, when the
    benchmark names a looks method, answers what the simulation does not say at each frame (colours,
    visibility); the replay keeps what changed since the frame before (the first frame: all it says)."""

    def __init__(self, state: Callable[[], Any], hz: float, looks: Callable[[], Any] | None = None) -> None:
        self._state = state
        self._hz = hz
        self._looks = SaidLooks(looks) if looks is not None else None
        self._poses: MujocoPoses | None = None

    def frame(self, step: int, robot_time: float) -> None:
        poses = self._poses
        if poses is None:
            poses = self._poses = MujocoPoses(self._state(), meta={"hz": self._hz})
        if self._looks is None:
            poses.take(step, robot_time)
        else:
            poses.capture(step, robot_time, looks=self._looks.changed())

    @property
    def notes(self) -> list[str]:
        """What the written replay does not show right (its poses' notes)."""
        return self._poses.notes if self._poses is not None else []

    def close(self, file: FileAhead, root: Path) -> list[Path]:
        """Write the replay into `file` and its scene under `root`; the paths of both."""
        poses = self._poses
        if poses is None:
            return []
        replay = file.write(poses.finished().to_bytes())
        scene = poses.scene
        return [replay, write_scene(root, scene.sha256, scene.glb, scene.kept)]


class SaidLooks:
    """A benchmark's looks method as a replay asks it, once a frame: `changed` is what it says now that it
    had not said (a node or a part of a look it leaves out holds as it was), so a replay keeps each change
    once, at the frame it happened."""

    def __init__(self, method: Callable[[], Any]) -> None:
        self._method = method
        self._said: dict[str, dict[str, Any]] = {}  # each node's looks as last said

    def heard(self, looks: Iterable[tuple[int, str, Mapping[str, Any]]]) -> None:
        """Looks said otherwise (a frame's own): an answer that differs from them is a change again."""
        for _, node, look in looks:
            self._said.setdefault(node, {}).update(look)

    def changed(self) -> dict[str, dict[str, Any]]:
        try:
            answer = self._method()
        except Exception as exc:
            raise LooksFailed(f"the looks method raised {type(exc).__name__}: {exc}") from exc
        changed: dict[str, dict[str, Any]] = {}
        for node, look in _plain_looks(answer).items():
            said = self._said.setdefault(node, {})
            new = {key: value for key, value in look.items() if key not in said or said[key] != value}
            if new:
                said.update(new)
                changed[node] = new
        return changed


class LooksFailed(Exception):
    """A benchmark's looks method raised, or answered something other than looks."""


LOOKS_SHAPE = "{node: {'rgba': [r, g, b, a]}} or {node: {'visible': False}}"


def _plain_looks(answer: Any) -> dict[str, dict[str, Any]]:
    """A looks method's answer with its values as plain lists, to compare with what it said before (the
    replay's writer checks the names and numbers)."""
    if not isinstance(answer, Mapping):
        raise LooksFailed(f"the looks method answers {LOOKS_SHAPE}, not a {type(answer).__name__}")
    plain: dict[str, dict[str, Any]] = {}
    for node, look in answer.items():
        if not isinstance(node, str):
            raise LooksFailed(
                f"the looks method answers {LOOKS_SHAPE}: a node is named by a string, not {node!r}"
            )
        if not isinstance(look, Mapping):
            raise LooksFailed(f"the looks method answers {LOOKS_SHAPE}; {node!r} is a {type(look).__name__}")
        plain[node] = {key: _plain(value) for key, value in look.items()}
    return plain


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [_plain(part) for part in value]
    return value.item() if isinstance(value, np.generic) else value


def write_scene(root: Path, sha256: str, glb: bytes, kept: Path | None = None) -> Path:
    """The scene `glb` (whose sha256 is `sha256`) under `root`, written unless it is there already: a hard
    link to `kept` (the disk cache's file of the same bytes) where it can be, 50 µs where a copy of a
    Meta-World scene's 1.6 MB took 1.5 ms."""
    scene = Path(os.path.join(root, SCENES, sha256 + SCENE_SUFFIX))
    if not os.path.exists(scene):
        scene.parent.mkdir(parents=True, exist_ok=True)
        if kept is not None:
            try:
                os.link(kept, scene)
                return scene
            except FileExistsError:
                return scene  # another worker put it there first
            except OSError:
                pass  # another file system, or the cache's file gone: a copy below
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
