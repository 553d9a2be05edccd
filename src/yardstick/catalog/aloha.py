"""ALOHA's simulated bimanual tasks (gym-aloha, after ACT) as Yardstick benchmarks: insertion and
transfer-cube.

The protocol (ACT's and LeRobot's): 50 Hz, at most 400 steps (8 s), the action 14 absolute joint targets
(each arm's six joints and its gripper opening, 0 closed to 1 open), the seed placing the objects as
gym-aloha's `reset(seed)` does. A task's reward climbs from 0 to 4 in stages (touch, lift, transfer or
insert); an episode succeeds, and ends, when it reaches 4.

gym-aloha's task renders three 480×640 cameras on every step whatever was asked (a quarter of a second a
step here); ours renders only the cameras asked, at the size asked, with Yardstick's tuned renderer.
Observations: `prompt`, `state` (14: joint positions with each gripper's opening normalized, gym-aloha's
`agent_pos`), `qvel` (14), `env_state` (the objects' poses: the cube's 7 numbers, or the peg's and the
socket's), and `image.<camera>` (uint8, upright) per camera.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from yardstick.catalog.extras import ALOHA, require
from yardstick.catalog.rendering import CameraRig
from yardstick.sdk.decorators import benchmark, reset, step
from yardstick.sdk.timing import timed

HZ = 50.0  # gym-aloha's DT = 0.02 s
MAX_STEPS = 400
SUCCESS_REWARD = 4
TASKS = {
    "insertion": "Pick up the peg and the socket, one in each gripper, and insert the peg into the socket",
    "transfer-cube": "Pick up the red cube with the right arm and hand it over to the left arm",
}
_XML = {"insertion": "bimanual_viperx_insertion.xml", "transfer-cube": "bimanual_viperx_transfer_cube.xml"}
CAMERAS = ("top", "angle", "front_close", "left_pillar", "right_pillar", "left_wrist", "right_wrist")
# The position actuators' ranges (the model's ctrlrange) for each arm's six joints, then its gripper's
# normalized opening. tests/test_catalog_aloha.py checks them against the model.
ARM_LOW = [-3.14158, -1.85005, -1.76278, -3.14158, -1.8675, -3.14158, 0.0]
ARM_HIGH = [3.14158, 1.25664, 1.6057, 3.14158, 2.23402, 3.14158, 1.0]
ACTION_SIZE = 14


def quiet_task(task: str) -> Any:
    """gym-aloha's task class for `task`, observing state only: its own renders three cameras a step."""
    from gym_aloha.tasks.sim import InsertionTask, TransferCubeTask

    base = TransferCubeTask if task == "transfer-cube" else InsertionTask

    class Quiet(base):  # type: ignore[misc, valid-type]
        def get_observation(self, physics: Any) -> collections.OrderedDict[str, Any]:
            obs: collections.OrderedDict[str, Any] = collections.OrderedDict()
            obs["qpos"] = self.get_qpos(physics)
            obs["qvel"] = self.get_qvel(physics)
            obs["env_state"] = self.get_env_state(physics)
            return obs

    return Quiet()


def build_env(task: str) -> Any:
    """The dm_control environment of `task`, as gym-aloha builds it (no time limit: the engine's counts)."""
    from dm_control import mujoco
    from dm_control.rl import control
    from gym_aloha.constants import ASSETS_DIR, DT

    physics = mujoco.Physics.from_xml_path(str(ASSETS_DIR / _XML[task]))
    return control.Environment(
        physics, quiet_task(task), float("inf"), control_timestep=DT, n_sub_steps=None, flat_observation=False
    )


def place_objects(env: Any, task: str, seed: int) -> Any:
    """gym-aloha's reset(seed): the objects' poses drawn from the seed, then the episode started. Returns
    the first time step."""
    from gym_aloha.tasks.sim import BOX_POSE
    from gym_aloha.utils import sample_box_pose, sample_insertion_pose

    env.task.random.seed(seed)
    env.task._random = np.random.RandomState(seed)
    # gym-aloha hands the poses to the task's initialize_episode through this module global.
    BOX_POSE[0] = (
        sample_box_pose(seed) if task == "transfer-cube" else np.concatenate(sample_insertion_pose(seed))
    )
    return env.reset()


def _image_size(value: Any) -> tuple[int, int]:
    size = (value, value) if isinstance(value, int) and not isinstance(value, bool) else value
    if (
        not isinstance(size, (list, tuple))
        or len(size) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and 16 <= v <= 2048 for v in size)
    ):
        raise ValueError(
            "image_size: an image is [height, width] pixels (or one number for a square), each 16 to 2048, "
            f"not {value!r}"
        )
    return int(size[0]), int(size[1])


@dataclass
class _World:
    env: Any  # a dm_control Environment
    cameras: CameraRig | None = None


class _Aloha:
    """The body of the ALOHA benchmarks: one environment per task, built on first use."""

    TASKS: ClassVar[dict[str, str]]

    def __init__(
        self, hz: float = HZ, cameras: Sequence[str] = ("top",), image_size: Any = (480, 640)
    ) -> None:
        if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not math.isclose(hz, HZ):
            raise ValueError(
                f"hz: ALOHA plays at {HZ:g} Hz (its physics steps 0.02 s an action), so the policy must play "
                f"at {HZ:g} Hz, not {hz!r}"
            )
        chosen = (cameras,) if isinstance(cameras, str) else tuple(cameras)
        unknown = [c for c in chosen if c not in CAMERAS]
        if unknown:
            raise ValueError(f"cameras: {unknown} are not ALOHA cameras; choose among {list(CAMERAS)}")
        self.image_size = _image_size(image_size)
        require(ALOHA, type(self).__name__)
        self.cameras = tuple(dict.fromkeys(chosen))
        self._worlds: dict[str, _World] = {}
        self._world: _World | None = None
        self._task = ""
        self._best = 0.0

    @reset
    def reset(self, task: str, seed: int) -> dict[str, Any]:
        """Start `task` with its objects placed by `seed`."""
        if task not in self.TASKS:
            raise ValueError(
                f"task: {task!r} is not a task of {type(self).__name__}; "
                f"its tasks are {', '.join(self.TASKS)}"
            )
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
            raise ValueError(f"seed: an ALOHA seed is an int from 0 to 2**32 - 1, not {seed!r}")
        self._world = None  # a reset that fails leaves no episode to step on
        world = self._worlds.get(task)
        if world is None:
            world = self._worlds[task] = self._build(task)
        first = place_objects(world.env, task, int(seed))
        self._world, self._task, self._best = world, task, 0.0
        return self._observe(world, first.observation)

    @step
    def step(self, action: Any) -> tuple[dict[str, Any], bool, bool, dict[str, float]]:
        """Play one action for 0.02 s: 14 absolute joint targets (left arm's six joints and gripper opening,
        then the right arm's). Returns (observation, done, success, metrics): done is success, the reward
        reaching 4; metrics are the step's `reward` (0-4), the episode's best so far, `max_reward`, and
        `physics_error` (1 when the action made the simulation diverge, which ends the episode failed)."""
        world = self._world
        if world is None:
            raise RuntimeError(
                f"{type(self).__name__}.step before reset: reset(task, seed) starts an episode"
            )
        played = np.asarray(action, dtype=np.float64)
        if played.shape != (ACTION_SIZE,):
            raise ValueError(
                f"action: an ALOHA action is {ACTION_SIZE} joint targets (6 joints and a gripper, per arm), "
                f"not an array of shape {played.shape}"
            )
        if not np.all(np.isfinite(played)):
            raise ValueError(f"action: every number of an action is finite, not {played.tolist()}")
        from dm_control.rl.control import PhysicsError

        try:
            ts = world.env.step(played)
        except PhysicsError:
            # Targets that tear the arms apart (random ones do) make MuJoCo's state diverge: the episode ends
            # there, failed, rather than failing as an error of the benchmark.
            self._world = None
            return (
                self._observe(world, world.env.task.get_observation(world.env.physics)),
                True,
                False,
                {
                    "reward": 0.0,
                    "max_reward": self._best,
                    "physics_error": 1.0,
                },
            )
        reward = float(ts.reward)
        self._best = max(self._best, reward)
        success = reward == SUCCESS_REWARD
        metrics = {"reward": reward, "max_reward": self._best, "physics_error": 0.0}
        return self._observe(world, ts.observation), success, success, metrics

    def replay_state(self) -> Any:
        """What a 3D replay reads of the episode playing: dm_control's Physics of the task."""
        if self._world is None:
            raise RuntimeError("replay_state before reset: no episode is playing")
        return self._world.env.physics

    def close(self) -> None:
        """Free the environments and their renderers."""
        for world in self._worlds.values():
            if world.cameras is not None:
                world.cameras.close()
        self._worlds.clear()
        self._world = None

    def _build(self, task: str) -> _World:
        env = build_env(task)
        world = _World(env)
        if self.cameras:
            height, width = self.image_size
            with timed("rendering"):
                world.cameras = CameraRig(
                    env.physics.model.ptr, {f"image.{c}": c for c in self.cameras}, height, width
                )
        return world

    def _observe(self, world: _World, raw: Any) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "prompt": self.TASKS[self._task],
            "state": np.asarray(raw["qpos"], dtype=np.float64),
            "qvel": np.asarray(raw["qvel"], dtype=np.float64),
            "env_state": np.asarray(raw["env_state"], dtype=np.float64),
        }
        if world.cameras is not None:
            with timed("rendering"):
                obs.update(world.cameras.frames(world.env.physics.data.ptr))
        return obs


_INIT = {"hz": "{policy.hz}"}
_ACTION_SPACE = (ARM_LOW * 2, ARM_HIGH * 2)
_REPLAY = {"engine": "mujoco", "state": "replay_state"}
_SEEDS = range(50)
_MAX_SECONDS = MAX_STEPS / HZ


@benchmark(
    tasks=TASKS,
    seeds=_SEEDS,
    max_seconds=_MAX_SECONDS,
    init=_INIT,
    action_space=_ACTION_SPACE,
    replay=_REPLAY,
)
class Aloha(_Aloha):
    """ALOHA's two simulated tasks, insertion and transfer-cube: 50 Hz, 400 steps, 14 joint targets."""

    TASKS: ClassVar[dict[str, str]] = TASKS
    BUILTIN_POLICIES: ClassVar[dict[str, str]] = {
        "random": "yardstick.catalog.random_policy:RandomAt50Hz",
        "expert": "yardstick.catalog.aloha_expert:TransferCubeExpert",
    }


@benchmark(
    name="aloha/insertion",
    tasks={"insertion": TASKS["insertion"]},
    seeds=_SEEDS,
    max_seconds=_MAX_SECONDS,
    init=_INIT,
    action_space=_ACTION_SPACE,
    replay=_REPLAY,
)
class AlohaInsertion(_Aloha):
    """ALOHA insertion alone."""

    TASKS: ClassVar[dict[str, str]] = {"insertion": TASKS["insertion"]}
    BUILTIN_POLICIES: ClassVar[dict[str, str]] = {"random": "yardstick.catalog.random_policy:RandomAt50Hz"}


@benchmark(
    name="aloha/transfer-cube",
    tasks={"transfer-cube": TASKS["transfer-cube"]},
    seeds=_SEEDS,
    max_seconds=_MAX_SECONDS,
    init=_INIT,
    action_space=_ACTION_SPACE,
    replay=_REPLAY,
)
class AlohaTransferCube(_Aloha):
    """ALOHA transfer-cube alone."""

    TASKS: ClassVar[dict[str, str]] = {"transfer-cube": TASKS["transfer-cube"]}
    BUILTIN_POLICIES: ClassVar[dict[str, str]] = {
        "random": "yardstick.catalog.random_policy:RandomAt50Hz",
        "expert": "yardstick.catalog.aloha_expert:TransferCubeExpert",
    }
