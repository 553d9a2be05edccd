"""Recording a MuJoCo simulation's replay: each frame, the world pose of every body that may move.

`mujoco_pair` finds the (MjModel, MjData) in whatever a benchmark's state method hands back: the pair itself,
a gymnasium MuJoCo env (Meta-World's), dm_control's Physics (ALOHA's), robosuite's MjSim (LIBERO's), or any
object with `model` and `data` holding those. `MujocoPoses` then costs a frame one call, `take(step, t)`: a
copy of the scene's recorded bodies' rows of MjData's `xpos` and `xquat` into rows of its own that double as
they fill. `_columns.Frames` does it in C (~1 µs in the loop, MjData's arrays held once for the episode);
`_NumpyFrames` the same with numpy where the install built no C. A model's first episode in a process does
not know its scene's recorded bodies until the scene is found: it keeps every body (two memcpy a frame) and
picks them out once, at the end, in one pass (56 bytes a body a frame meanwhile: Meta-World's 34 bodies, 500
frames, under 1 MB).

The scene is not needed until the episode ends, so it is found on a thread of its own (`scenes_soon`) while
the episode plays: the model's key hashed and its .glb read from the disk cache (10 ms a Meta-World model),
or exported the first time a machine sees the model (0.1-0.5 s), no longer on the episode's clock. A model's
later episodes take the scene this process found already (`known_scene`) without waking that thread.

The poses are MjData's as the last mj_step left them, which is also what MuJoCo's renderer draws
(mjv_updateScene reads them as they are): a replay frame shows what the video frame of that step shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

import numpy as np

from yardstick.replay3d.format import ReplayWriter, doubled

try:  # the frame's copies in one compiled call where the install built it (setup.py), else numpy's four
    from yardstick.replay3d import _columns
except ImportError:  # pragma: no cover - an install without a C compiler
    _columns = None  # type: ignore[assignment]
from yardstick.replay3d.mujoco_scene import Scene, known_scene, scene_of
from yardstick.replay3d.process_thread import ProcessThread


class NotMujoco(TypeError):
    """A state handed for a MuJoCo replay holds no MjModel and MjData."""


def mujoco_pair(state: Any) -> tuple[Any, Any]:
    """The (mujoco.MjModel, mujoco.MjData) that `state` holds, or NotMujoco saying what it was."""
    import mujoco

    if isinstance(state, (tuple, list)) and len(state) == 2:
        model, data = (_unwrap(part) for part in state)
    else:
        holder = getattr(state, "unwrapped", state)  # a gymnasium env under its wrappers
        if isinstance(holder, mujoco.MjData):
            model, data = holder.model, holder
        else:
            model, data = _unwrap(getattr(holder, "model", None)), _unwrap(getattr(holder, "data", None))
    if isinstance(model, mujoco.MjModel) and isinstance(data, mujoco.MjData):
        return model, data
    raise NotMujoco(
        f"a MuJoCo replay reads an MjModel and MjData: the state method answered {type(state).__name__}, "
        "which holds neither as (model, data), .model/.data, a gymnasium env, dm_control's Physics nor "
        "robosuite's MjSim"
    )


def _unwrap(part: Any) -> Any:
    """MuJoCo's struct under a binding's wrapper: dm_control's `.ptr`, robosuite's `._model` / `._data`."""
    for attribute in ("ptr", "_model", "_data"):
        inner = getattr(part, attribute, None)
        if inner is not None and type(inner).__module__.startswith("mujoco"):
            return inner
    return part


# One thread a process finds scenes, one at a time: two episodes of one model share the first's export.
SCENES = ProcessThread("yardstick-scenes")


def scenes_soon(model: Any) -> Future[Scene]:
    """`scene_of(model)`, found on this process's scene thread."""
    return SCENES.submit(scene_of, model)


class _NumpyFrames:
    """`_columns.Frames` in numpy, for an install without a C compiler: the same frames, a few µs slower."""

    def __init__(self, xpos: np.ndarray, xquat: np.ndarray, rows: np.ndarray, capacity: int = 512) -> None:
        self._xpos, self._xquat = xpos, xquat  # views MuJoCo writes in place
        self._rows = rows
        capacity = max(1, capacity)
        self._t = np.empty(capacity)
        self._step = np.empty(capacity, dtype=np.int32)
        self._pos = np.empty((capacity, len(rows), 3))
        self._quat = np.empty((capacity, len(rows), 4))
        self.count = 0

    def take(self, step: int, t: float) -> None:
        index = self.count
        if index == len(self._t):
            self._t, self._step, self._pos, self._quat = doubled(self._t, self._step, self._pos, self._quat)
        self._pos[index], self._quat[index] = self._xpos[self._rows], self._xquat[self._rows]
        self._t[index], self._step[index] = t, step
        self.count = index + 1

    def picked(self, rows: np.ndarray | None) -> tuple[bytearray, bytearray, bytearray, bytearray]:
        count, which = self.count, slice(None) if rows is None else rows
        kept = self._t[:count], self._step[:count], self._pos[:count, which], self._quat[:count, which]
        return tuple(bytearray(np.ascontiguousarray(column)) for column in kept)  # type: ignore[return-value]


class MujocoPoses:
    """Reads one episode's frames from a MuJoCo simulation; `finished` hands them over as a ReplayWriter.
    `take(step, t)` keeps a frame (one compiled call where the install built `_columns`); `capture` does
    with what a benchmark's looks method said of it too."""

    def __init__(self, state: Any, *, meta: Mapping[str, Any] | None = None, capacity: int = 512) -> None:
        self.model, self.data = mujoco_pair(state)
        self.meta = dict(meta or {})
        # A scene this process has already (a model's later episodes) is taken at once: waking the scene
        # thread would cost the episode's thread the interpreter's lock for a while (~0.2 ms).
        known = known_scene(self.model)
        self._scene: Scene | Future[Scene] = known if known is not None else scenes_soon(self.model)
        # The scene's recorded bodies each frame where the scene is known; else every body, picked at the end.
        self._picked_as_kept = known is not None
        rows = known.recorded_bodies if known is not None else np.arange(self.model.nbody)
        kept = _columns.Frames if _columns is not None else _NumpyFrames
        self._frames = kept(self.data.xpos, self.data.xquat, np.asarray(rows, dtype=np.int64), capacity)
        self.take = self._frames.take
        self._looks: list[tuple[int, str, Mapping[str, Any]]] = []
        self.notes: list[str] = []  # what the replay does not show right, said at `finished`

    @property
    def scene(self) -> Scene:
        """The model's scene (waiting for its thread: an export that failed raises here)."""
        scene = self._scene
        return scene.result() if isinstance(scene, Future) else scene

    def capture(self, step: int, t: float, looks: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """`take(step, t)`, and what `looks` changes of how nodes look from this frame on (checked when the
        frames are handed over)."""
        self.take(step, t)
        if looks:
            index = self._frames.count - 1
            self._looks.extend((index, str(node), change) for node, change in looks.items())

    def finished(self) -> ReplayWriter:
        """The episode's frames in a writer, the scene's recorded nodes' columns only."""
        scene = self.scene
        changed = scene.changed(self.model)
        if changed:
            self.notes.append(
                f"the model's {', '.join(changed)} changed since its scene was exported, in this process's "
                "first episode of it: the replay draws what they hold as that episode had it (a scene "
                "follows the nodes' poses and a fixture's placement, not a model's other changes)"
            )
        writer = ReplayWriter(
            scene.recorded_names,
            engine="mujoco",
            scene_sha256=scene.sha256,
            meta=self.meta,
            parents=scene.recorded_parents,
            capacity=0,
        )
        rows = None if self._picked_as_kept else np.asarray(scene.recorded_bodies, dtype=np.int64)
        t, step, pos, quat = self._frames.picked(rows)
        count, width = self._frames.count, len(scene.recorded_bodies)
        # New arrays of this episode's frames, which end here: the writer keeps them.
        writer.extend(
            np.frombuffer(t, dtype=np.float64),
            np.frombuffer(step, dtype=np.int32),
            np.frombuffer(pos, dtype=np.float64).reshape(count, width, 3),
            np.frombuffer(quat, dtype=np.float64).reshape(count, width, 4),
            self._looks,
            handed=True,
        )
        return writer
