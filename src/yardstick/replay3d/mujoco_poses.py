"""Recording a MuJoCo simulation's replay: each frame, the world pose of every body that may move.

`mujoco_pair` finds the (MjModel, MjData) in whatever a benchmark's state method hands back: the pair itself,
a gymnasium MuJoCo env (Meta-World's), dm_control's Physics (ALOHA's), robosuite's MjSim (LIBERO's), or any
object with `model` and `data` holding those. `MujocoPoses` then costs a frame two copies of MjData's whole
`xpos` and `xquat` (every body, in one memcpy each: a gather of the moving bodies' rows took twice as long
in the loop, numpy's indexing code cold after mj_step) into arrays of its own, against the milliseconds a
rendered frame takes; one call into `_columns.c` makes them (~1 µs in the loop against numpy's ~2). The
scene's recorded bodies are picked out once, at the end: 56 bytes a body a frame held meanwhile (Meta-World's
34 bodies, 500 frames: under 1 MB).

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


class MujocoPoses:
    """Reads one episode's frames from a MuJoCo simulation; `finished` hands them over as a ReplayWriter."""

    def __init__(self, state: Any, *, meta: Mapping[str, Any] | None = None, capacity: int = 512) -> None:
        self.model, self.data = mujoco_pair(state)
        self.meta = dict(meta or {})
        # A scene this process has already (a model's later episodes) is taken at once: waking the scene
        # thread would cost the episode's thread the interpreter's lock for a while (~0.2 ms).
        known = known_scene(self.model)
        self._scene: Scene | Future[Scene] = known if known is not None else scenes_soon(self.model)
        self._xpos, self._xquat = self.data.xpos, self.data.xquat  # views MuJoCo writes in place
        count = self.model.nbody
        self._t = np.empty(capacity)
        self._step = np.empty(capacity, dtype=np.int32)
        self._pos = np.empty((capacity, count, 3))
        self._quat = np.empty((capacity, count, 4))
        self._frames = 0
        self._looks: list[tuple[int, str, Mapping[str, Any]]] = []
        self.notes: list[str] = []  # what the replay does not show right, said at `finished`

    @property
    def scene(self) -> Scene:
        """The model's scene (waiting for its thread: an export that failed raises here)."""
        scene = self._scene
        return scene.result() if isinstance(scene, Future) else scene

    def capture(self, t: float, step: int, looks: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """Every body's world pose now, as frame `step` at `t` s after the reset, and what `looks`
        changes of how nodes look from this frame on (checked when the frames are handed over)."""
        index = self._frames
        if index == len(self._t):
            self._grow()
        if _columns is not None:
            kept = self._pos, self._quat, self._t, self._step
            _columns.capture(*kept, index, self._xpos, self._xquat, t, step)
        else:
            self._pos[index] = self._xpos
            self._quat[index] = self._xquat
            self._t[index] = t
            self._step[index] = step
        self._frames = index + 1
        if looks:
            self._looks.extend((index, str(node), change) for node, change in looks.items())

    def finished(self) -> ReplayWriter:
        """The episode's frames in a writer, the scene's recorded nodes' columns only."""
        scene = self.scene
        count = self._frames
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
        # The picked columns are new arrays and this episode's frames end here: the writer keeps them.
        pos, quat = self._pos[:count, scene.recorded_bodies], self._quat[:count, scene.recorded_bodies]
        writer.extend(self._t[:count], self._step[:count], pos, quat, self._looks, handed=True)
        return writer

    def _grow(self) -> None:
        self._t, self._step, self._pos, self._quat = doubled(self._t, self._step, self._pos, self._quat)
