"""LIBERO's five standard suites as Yardstick benchmarks, played as the field's evaluations play them.

The protocol (openvla's LIBERO evaluation, which later work reports against):
- a task starts at one of its 50 fixed initial states (the seed is its index), after a hard reset;
- 10 settle steps of `[0, 0, 0, 0, 0, 0, -1]` (hold still, gripper open) let objects come to rest: they are
  part of the reset, not of the episode;
- the policy then plays at 20 Hz for at most the suite's cap: spatial 220 steps, object 280, goal 300,
  libero_10 520, libero_90 400 (`max_seconds` is the cap / 20);
- an episode succeeds, and ends, when the task's BDDL goal predicates hold (`check_success`).

Observations: `prompt` (the task's language instruction), `state` (8 floats: end-effector position, its
orientation as an axis-angle, the two gripper finger positions: the layout openpi's LIBERO policies read),
`eef_pos`, `eef_quat` (x, y, z, w), `gripper_qpos`, `joint_pos`, and `image.agentview`, `image.wrist` (uint8
H×W×3) for the cameras asked. Images are upright by default. `orientation="openvla"` gives them as openvla and
openpi LIBERO policies were trained on them (robosuite's upside-down frames turned half a turn, which leaves
them upright but mirrored left to right); `orientation="robosuite"` as robosuite and LIBERO's datasets store
them (upside down).

One environment is kept per task and process. LIBERO's reset rebuilds the MuJoCo model (~2 s), so the
renderer, tied to the model, is rebuilt after it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from yardstick.catalog.extras import LIBERO, require
from yardstick.catalog.libero_tasks import TASKS, LiberoTask
from yardstick.catalog.rendering import CameraRig
from yardstick.sdk.decorators import benchmark, reset, step
from yardstick.sdk.timing import timed

HZ = 20.0  # robosuite's control_freq for LIBERO: the OSC controller's rate
SETTLE_STEPS = 10
SETTLE_ACTION = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])
# Steps the policy may play, per suite (openvla's run_libero_eval.py).
STEP_CAPS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
INIT_STATES = 50
ACTION_SIZE = 7
# Our camera names and the model's.
CAMERAS = {"agentview": "agentview", "wrist": "robot0_eye_in_hand"}
# How each orientation turns MuJoCo's upright frames: (reverse rows, reverse columns).
ORIENTATIONS = {"upright": (False, False), "openvla": (False, True), "robosuite": (True, False)}
# LIBERO's collision meshes are geom group 0; drawn, they cover the visual meshes.
COLLISION_GROUP = 0


def quat_to_axis_angle(quat: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """An (x, y, z, w) quaternion as an axis-angle 3-vector (robosuite's quat2axisangle)."""
    x, y, z, w = (float(v) for v in quat)
    w = min(1.0, max(-1.0, w))
    den = math.sqrt(1.0 - w * w)
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return np.array([x, y, z]) * (2.0 * math.acos(w)) / den


@dataclass
class _World:
    env: Any  # LIBERO's ControlEnv
    init_states: npt.NDArray[np.float64]
    cameras: CameraRig | None = None


class _Libero:
    """The body of the five suites: one LIBERO env per task, built on first use."""

    SUITE: ClassVar[str]
    TABLE: ClassVar[tuple[LiberoTask, ...]]

    def __init__(
        self,
        hz: float = HZ,
        cameras: Sequence[str] = ("agentview", "wrist"),
        image_size: int = 224,
        orientation: str = "upright",
    ) -> None:
        if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not math.isclose(hz, HZ):
            raise ValueError(
                f"hz: LIBERO plays at {HZ:g} Hz (its controller's rate; the suites' caps are counted in its "
                f"steps), so the policy must play at {HZ:g} Hz, not {hz!r}"
            )
        chosen = (cameras,) if isinstance(cameras, str) else tuple(cameras)
        unknown = [c for c in chosen if c not in CAMERAS]
        if unknown:
            raise ValueError(f"cameras: {unknown} are not LIBERO cameras; choose among {list(CAMERAS)}")
        if isinstance(image_size, bool) or not isinstance(image_size, int) or not 16 <= image_size <= 2048:
            raise ValueError(
                f"image_size: an image is image_size × image_size pixels, 16 to 2048, not {image_size!r}"
            )
        if orientation not in ORIENTATIONS:
            raise ValueError(
                f"orientation: images are {', '.join(map(repr, ORIENTATIONS))}, not {orientation!r}"
            )
        require(LIBERO, type(self).__name__)
        self.cameras = tuple(dict.fromkeys(chosen))
        self.image_size = image_size
        self.orientation = orientation
        self._by_id = {task.id: task for task in self.TABLE}
        self._worlds: dict[str, _World] = {}
        self._world: _World | None = None
        self._task: LiberoTask | None = None

    @reset
    def reset(self, task: str, seed: int) -> dict[str, Any]:
        """Start `task` at its initial state number `seed` (0-49), settled."""
        chosen = self._by_id.get(task)
        if chosen is None:
            raise ValueError(
                f"task: {task!r} is not a task of {type(self).__name__}; "
                f"its tasks are {', '.join(self._by_id)}"
            )
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < INIT_STATES:
            raise ValueError(
                f"seed: a LIBERO seed is the index of one of a task's {INIT_STATES} initial states, "
                f"0 to {INIT_STATES - 1}, not {seed!r}"
            )
        self._world = None  # a reset that fails leaves no episode to step on
        world = self._worlds.get(task)
        if world is None:
            world = self._worlds[task] = self._build(chosen)
        env = world.env
        # What LIBERO's evaluations do: a hard reset (it draws object placements from numpy's global
        # generator, seeded here so the draw is the same every time; the initial state then overrides it),
        # the fixed initial state, the settle steps.
        env.seed(0)
        env.reset()
        env.set_init_state(world.init_states[int(seed)])
        for _ in range(SETTLE_STEPS):
            raw, *_ = env.step(SETTLE_ACTION)
        if self.cameras:
            # The reset built a new model; a renderer belongs to the model it was made for.
            if world.cameras is not None:
                world.cameras.close()
                world.cameras = None
            with timed("rendering"):
                world.cameras = self._cameras(env)
        self._world, self._task = world, chosen
        return self._observe(world, raw)

    @step
    def step(self, action: Any) -> tuple[dict[str, Any], bool, bool]:
        """Play one action for 1/20 s: 7 numbers in [-1, 1], the end effector's motion (x, y, z, and
        rotation about x, y, z, relative to the present pose) and the gripper (-1 open, 1 closed). Returns
        (observation, done, success): done is success, the task's goal reached."""
        world = self._world
        if world is None:
            raise RuntimeError(
                f"{type(self).__name__}.step before reset: reset(task, seed) starts an episode"
            )
        played = np.asarray(action, dtype=np.float64)
        if played.shape != (ACTION_SIZE,):
            raise ValueError(
                f"action: a LIBERO action is {ACTION_SIZE} numbers (dx, dy, dz, droll, dpitch, dyaw, "
                f"gripper), not an array of shape {played.shape}"
            )
        if not np.all(np.isfinite(played)):
            raise ValueError(f"action: every number of an action is finite, not {played.tolist()}")
        raw, _, done, _ = world.env.step(played)
        success = bool(done)
        return self._observe(world, raw), success, success

    def replay_state(self) -> Any:
        """What a 3D replay reads of the episode playing: robosuite's MjSim of the task."""
        if self._world is None:
            raise RuntimeError("replay_state before reset: no episode is playing")
        return self._world.env.sim

    def close(self) -> None:
        """Free the environments and their renderers."""
        for world in self._worlds.values():
            if world.cameras is not None:
                world.cameras.close()
            world.env.close()
        self._worlds.clear()
        self._world = None

    def _build(self, task: LiberoTask) -> _World:
        from yardstick.catalog.libero_env import build_env, init_states

        # Its cameras are made at each reset, on the model that reset builds.
        return _World(build_env(self.SUITE, task.name), init_states(self.SUITE, task.name))

    def _cameras(self, env: Any) -> CameraRig:
        flip = ORIENTATIONS[self.orientation]
        return CameraRig(
            env.sim.model._model,
            {f"image.{name}": CAMERAS[name] for name in self.cameras},
            self.image_size,
            self.image_size,
            hidden_groups=(COLLISION_GROUP,),
            flips={f"image.{name}": flip for name in self.cameras},
        )

    def _observe(self, world: _World, raw: dict[str, Any]) -> dict[str, Any]:
        assert self._task is not None
        eef_pos = np.asarray(raw["robot0_eef_pos"], dtype=np.float64)
        eef_quat = np.asarray(raw["robot0_eef_quat"], dtype=np.float64)
        gripper = np.asarray(raw["robot0_gripper_qpos"], dtype=np.float64)
        obs: dict[str, Any] = {
            "prompt": self._task.prompt,
            "state": np.concatenate([eef_pos, quat_to_axis_angle(eef_quat), gripper]),
            "eef_pos": eef_pos,
            "eef_quat": eef_quat,
            "gripper_qpos": gripper,
            "joint_pos": np.asarray(raw["robot0_joint_pos"], dtype=np.float64),
        }
        if world.cameras is not None:
            with timed("rendering"):
                obs.update(world.cameras.frames(world.env.sim.data._data))
        return obs


_INIT = {"hz": "{policy.hz}"}
_ACTION_SPACE = ([-1.0] * ACTION_SIZE, [1.0] * ACTION_SIZE)
# LIBERO plays at 20 Hz only, so `-p random` is the random policy at that rate; there is no scripted expert.
_POLICIES = {"random": "yardstick.catalog.random_policy:RandomAt20Hz"}


def _declare(suite: str) -> Any:
    table = TASKS[suite]
    return benchmark(
        tasks={task.id: task.prompt for task in table},
        seeds=range(INIT_STATES),
        max_seconds=STEP_CAPS[suite] / HZ,
        init=_INIT,
        action_space=_ACTION_SPACE,
        replay={"engine": "mujoco", "state": "replay_state"},
    )


@_declare("libero_spatial")
class LiberoSpatial(_Libero):
    """LIBERO-Spatial: the same black bowl to the plate, from ten places; 220 steps (11 s)."""

    SUITE: ClassVar[str] = "libero_spatial"
    TABLE: ClassVar[tuple[LiberoTask, ...]] = TASKS["libero_spatial"]
    BUILTIN_POLICIES: ClassVar[dict[str, str]] = _POLICIES


@_declare("libero_object")
class LiberoObject(_Libero):
    """LIBERO-Object: ten grocery items, each into the basket; 280 steps (14 s)."""

    SUITE: ClassVar[str] = "libero_object"
    TABLE: ClassVar[tuple[LiberoTask, ...]] = TASKS["libero_object"]
    BUILTIN_POLICIES: ClassVar[dict[str, str]] = _POLICIES


@_declare("libero_goal")
class LiberoGoal(_Libero):
    """LIBERO-Goal: one scene, ten goals; 300 steps (15 s)."""

    SUITE: ClassVar[str] = "libero_goal"
    TABLE: ClassVar[tuple[LiberoTask, ...]] = TASKS["libero_goal"]
    BUILTIN_POLICIES: ClassVar[dict[str, str]] = _POLICIES


@_declare("libero_10")
class Libero10(_Libero):
    """LIBERO-10 (LIBERO-Long): ten long-horizon tasks of two steps each; 520 steps (26 s)."""

    SUITE: ClassVar[str] = "libero_10"
    TABLE: ClassVar[tuple[LiberoTask, ...]] = TASKS["libero_10"]
    BUILTIN_POLICIES: ClassVar[dict[str, str]] = _POLICIES


@_declare("libero_90")
class Libero90(_Libero):
    """LIBERO-90: ninety tasks across kitchen, living-room and study scenes; 400 steps (20 s)."""

    SUITE: ClassVar[str] = "libero_90"
    TABLE: ClassVar[tuple[LiberoTask, ...]] = TASKS["libero_90"]
    BUILTIN_POLICIES: ClassVar[dict[str, str]] = _POLICIES
