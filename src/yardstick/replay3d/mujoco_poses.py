"""Recording a MuJoCo simulation's replay: each frame, the world pose of every moving body.

`mujoco_pair` finds the (MjModel, MjData) in whatever a benchmark's state method hands back: the pair itself,
a gymnasium MuJoCo env (Meta-World's), dm_control's Physics (ALOHA's), robosuite's MjSim (LIBERO's), or any
object with `model` and `data` holding those. `MujocoPoses` then costs a frame two gathers of float64 rows
into the writer's float32 arrays (`xpos`, `xquat` of the moving bodies): a few microseconds, against the
milliseconds a rendered frame takes.

The poses are MjData's as the last mj_step left them, which is also what MuJoCo's renderer draws
(mjv_updateScene reads them as they are): a replay frame shows what the video frame of that step shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from yardstick.replay3d.format import ReplayWriter
from yardstick.replay3d.mujoco_scene import Scene, scene_of


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


class MujocoPoses:
    """Reads one episode's frames from a MuJoCo simulation into a ReplayWriter."""

    def __init__(self, state: Any, *, meta: Mapping[str, Any] | None = None) -> None:
        self.model, self.data = mujoco_pair(state)
        self.scene: Scene = scene_of(self.model)
        self._bodies = self.scene.moving_bodies
        self.writer = ReplayWriter(
            self.scene.moving_names,
            engine="mujoco",
            scene_sha256=self.scene.sha256,
            meta=meta,
            parents=self.scene.moving_parents,
        )
        # One scratch row block a kind, so a frame allocates nothing but what the writer keeps.
        self._pos = np.empty((len(self._bodies), 3))
        self._quat = np.empty((len(self._bodies), 4))

    def capture(self, t: float, step: int, looks: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """The moving bodies' world poses now, as frame `step` at `t` s after the reset, and what `looks`
        changes of how nodes look from this frame on."""
        np.take(self.data.xpos, self._bodies, axis=0, out=self._pos)
        np.take(self.data.xquat, self._bodies, axis=0, out=self._quat)
        self.writer.frame(t, step, self._pos, self._quat, looks)
