"""Meta-World v3 as Yardstick benchmarks (MT10, MT50) and its scripted experts as a policy.

Each task is played goal-observable (the last three numbers of the state are the goal) with its variation
(object and goal positions) drawn from the episode's seed alone: the same task and seed give the same
episode whatever was played before, in any process. An episode ends at its first success.

Meta-World is imported when the first environment is built, not with this module, so reading the
benchmarks' declarations (tasks, seeds, limits) costs no simulator.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from yardstick.catalog.rendering import tuned_renderer
from yardstick.sdk.decorators import benchmark, infer, on_episode, policy, reset, step
from yardstick.sdk.episode import Episode
from yardstick.sdk.timing import timed

# EGL renders without a display. It must be chosen before mujoco is first imported (here, lazily).
os.environ.setdefault("MUJOCO_GL", "egl")
# The experts warn when a gain pushes an action past [-1, 1]; the env clips it, as the message itself says,
# and the warning would otherwise land in every run's log.
warnings.filterwarnings(
    "ignore", message=r"Constant\(s\) may be too high", category=UserWarning, module=r"metaworld\.policies"
)

PHYSICS_HZ = 400.0  # MuJoCo timestep 0.0025 s
DEFAULT_HZ = 80.0  # Meta-World's own control rate: frame_skip 5
DEFAULT_FRAME_SKIP = 5
HORIZON_STEPS = 500  # Meta-World's max_path_length at 80 Hz
MAX_SECONDS = HORIZON_STEPS / DEFAULT_HZ  # 6.25 s of robot time, whatever the control rate

# The cameras every Meta-World v3 scene has (they come from the shared xyz_base.xml).
CAMERAS = ("topview", "corner", "corner2", "corner3", "corner4", "behindGripper", "gripperPOV")
# These four are defined rolled upside down (their image-up axis points at the floor: xyaxes/euler in
# xyz_base.xml), so their frames are turned half a turn. Turning, not mirroring, keeps left and right as a
# real camera at that place would see them. tests/test_catalog_metaworld.py checks this set against the
# cameras' orientation in the model and against the rendered images.
UPSIDE_DOWN = frozenset({"corner", "corner2", "corner3", "corner4"})

MT50_TASKS: dict[str, str] = {
    "assembly-v3": "Pick up the nut and place it onto the peg",
    "basketball-v3": "Pick up the ball and dunk it into the basket",
    "bin-picking-v3": "Pick the puck from one bin and place it into the other bin",
    "box-close-v3": "Pick up the lid and close the box with it",
    "button-press-topdown-v3": "Press the button from the top",
    "button-press-topdown-wall-v3": "Reach past the wall and press the button from the top",
    "button-press-v3": "Press the button from the front",
    "button-press-wall-v3": "Reach past the wall and press the button from the front",
    "coffee-button-v3": "Press the button on the coffee machine",
    "coffee-pull-v3": "Pull the mug out from under the coffee machine",
    "coffee-push-v3": "Push the mug under the coffee machine",
    "dial-turn-v3": "Turn the dial",
    "disassemble-v3": "Pick the nut up off the peg",
    "door-close-v3": "Push the door closed on its hinge",
    "door-lock-v3": "Lock the door by turning the lock down",
    "door-open-v3": "Pull the door open on its hinge",
    "door-unlock-v3": "Unlock the door by turning the lock up",
    "hand-insert-v3": "Move the gripper into the hole in the table",
    "drawer-close-v3": "Push the drawer closed",
    "drawer-open-v3": "Pull the drawer open",
    "faucet-open-v3": "Turn the faucet handle open",
    "faucet-close-v3": "Turn the faucet handle closed",
    "hammer-v3": "Pick up the hammer and drive the nail into the wall",
    "handle-press-side-v3": "Press the handle down from the side",
    "handle-press-v3": "Press the handle down",
    "handle-pull-side-v3": "Pull the handle up from the side",
    "handle-pull-v3": "Pull the handle up",
    "lever-pull-v3": "Pull the lever up",
    "pick-place-wall-v3": "Pick up the puck, carry it over the wall and place it at the goal",
    "pick-out-of-hole-v3": "Pick the puck out of the hole and lift it to the goal",
    "pick-place-v3": "Pick up the puck and place it at the goal",
    "plate-slide-v3": "Slide the plate into the cabinet",
    "plate-slide-side-v3": "Slide the plate sideways into the cabinet",
    "plate-slide-back-v3": "Slide the plate back out of the cabinet",
    "plate-slide-back-side-v3": "Slide the plate sideways back out of the cabinet",
    "peg-insert-side-v3": "Pick up the peg and insert it sideways into the hole",
    "peg-unplug-side-v3": "Pull the peg sideways out of the hole",
    "soccer-v3": "Push the ball into the goal",
    "stick-push-v3": "Pick up the stick and push the thermos to the goal with it",
    "stick-pull-v3": "Pick up the stick and pull the thermos to the goal with it",
    "push-v3": "Push the puck to the goal",
    "push-wall-v3": "Push the puck around the wall to the goal",
    "push-back-v3": "Pull the puck back to the goal",
    "reach-v3": "Move the gripper to the goal position",
    "reach-wall-v3": "Move the gripper over the wall to the goal position",
    "shelf-place-v3": "Pick up the puck and place it on the shelf",
    "sweep-into-v3": "Sweep the puck into the hole",
    "sweep-v3": "Sweep the puck off the edge of the table",
    "window-open-v3": "Slide the window open",
    "window-close-v3": "Slide the window closed",
}

MT10_NAMES = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "window-close-v3",
)
MT10_TASKS: dict[str, str] = {name: MT50_TASKS[name] for name in MT10_NAMES}

# Numbers of Meta-World's step info reported as metrics, when the task reports them.
INFO_METRICS = ("near_object", "grasp_success")


def frame_skip_for(hz: float) -> int:
    """Physics substeps per action at control rate `hz`; refuses a rate that does not divide 400 Hz."""
    if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not math.isfinite(hz) or hz <= 0:
        raise ValueError(f"hz: the control rate is a number of steps a second above 0, not {hz!r}")
    substeps = PHYSICS_HZ / hz
    whole = round(substeps)
    if whole < 1 or not math.isclose(substeps, whole, rel_tol=1e-9):
        raise ValueError(
            f"hz: the control rate must divide the {PHYSICS_HZ:g} Hz physics into a whole "
            "number of substeps (400 / hz = 1, 2, 3, ...: hz = 400, 200, 133.33, 100, 80, 50, "
            f"40, ...), not {hz!r} ({substeps:.4g} substeps)"
        )
    return whole


def make_env(task: str) -> Any:
    """One Meta-World env for `task`, goal-observable, drawing its variation from the seed given to
    `env.seed` before each reset (rather than from a task list that `metaworld.MT50()` takes ~30 s to
    build)."""
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    env = ALL_V3_ENVIRONMENTS[task]()
    env._partially_observable = False
    # The observation space is cached for the partially observable goal (zeros); recompute it so the
    # goal is not clipped to zero in every observation.
    del env.sawyer_observation_space
    # set_task is what unlocks step/reset; these are the fields it sets, with the variation left free.
    env._set_task_called = True
    env._freeze_rand_vec = False
    env.seeded_rand_vec = True
    return env


@dataclass
class _World:
    env: Any
    renderer: Any = None  # a mujoco.Renderer when cameras are asked for


class _MetaWorld:
    """The body of MT10 and MT50: a set of Meta-World tasks, one env each, built on first use."""

    TASKS: ClassVar[dict[str, str]] = {}

    def __init__(
        self,
        hz: float = DEFAULT_HZ,
        cameras: Sequence[str] = (),
        image_size: int = 224,
        reflections: bool = True,
    ) -> None:
        """`reflections` False drops the table's mirror pass: a third of a frame's cost on a CPU (24 ms to
        16 ms here), for recordings where the look matters less than the time."""
        self.frame_skip = frame_skip_for(hz)
        self.hz = float(hz)
        chosen = (cameras,) if isinstance(cameras, str) else tuple(cameras)
        unknown = [c for c in chosen if c not in CAMERAS]
        if unknown:
            raise ValueError(f"cameras: {unknown} are not Meta-World cameras; choose among {list(CAMERAS)}")
        self.cameras = tuple(dict.fromkeys(chosen))
        if isinstance(image_size, bool) or not isinstance(image_size, int) or not 16 <= image_size <= 4096:
            raise ValueError(
                f"image_size: an image is image_size × image_size pixels, 16 to 4096, not {image_size!r}"
            )
        self.image_size = image_size
        self.reflections = bool(reflections)
        self._worlds: dict[str, _World] = {}
        self._world: _World | None = None
        self._task = ""
        self._return = 0.0

    @reset
    def reset(self, task: str, seed: int) -> dict[str, Any]:
        """Start `task` at `seed`: the seed alone picks the task's variation."""
        if task not in self.TASKS:
            raise ValueError(
                f"task: {task!r} is not a task of {type(self).__name__}; "
                f"its tasks are {', '.join(self.TASKS)}"
            )
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed: a Meta-World seed is an int of at least 0, not {seed!r}")
        self._world = None  # a reset that fails leaves no episode to step on
        world = self._worlds.get(task)
        if world is None:
            world = self._worlds[task] = self._build(task)
        env = world.env
        # Reset settles the hand with 50 steps of frame_skip substeps each: do that at Meta-World's own 5
        # so an episode starts from the same state at every control rate.
        env.frame_skip = DEFAULT_FRAME_SKIP
        env.seed(int(seed))
        state, _ = env.reset()
        env.frame_skip = self.frame_skip
        self._world, self._task, self._return = world, task, 0.0
        return self._observe(world, state)

    @step
    def step(self, action: Any) -> tuple[dict[str, Any], bool, bool, dict[str, float]]:
        """Play one action (4 numbers in [-1, 1]: hand motion x, y, z and gripper effort) for 1/hz s.

        Returns (observation, done, success, metrics). `done` is the first success: an episode ends as soon
        as the task is achieved; otherwise the engine ends it at max_seconds. Metrics: the step's `reward`,
        the episode's `return` so far, and Meta-World's `near_object` and `grasp_success` where the task
        reports them.
        """
        world = self._world
        if world is None:
            raise RuntimeError(
                f"{type(self).__name__}.step before reset: reset(task, seed) starts an episode"
            )
        played = np.asarray(action)
        # A float action goes through untouched (its dtype included) so a step is bit-for-bit Meta-World's.
        if played.dtype.kind != "f":
            played = played.astype(np.float64)
        if played.shape != (4,):
            raise ValueError(
                f"action: a Meta-World action is 4 numbers (dx, dy, dz, grip), "
                f"not an array of shape {played.shape}"
            )
        if not np.isfinite(played).all():  # the method, not np.all: half the cost, once a step
            raise ValueError(f"action: every number of an action is finite, not {played.tolist()}")
        state, reward, _, _, info = world.env.step(played)
        self._return += float(reward)
        success = bool(info.get("success", 0.0))
        metrics = {"reward": float(reward), "return": self._return}
        for name in INFO_METRICS:
            if name in info:
                metrics[name] = float(info[name])
        return self._observe(world, state), success, success, metrics

    def replay_state(self) -> Any:
        """What a 3D replay reads of the episode playing: the task's gymnasium MuJoCo env."""
        if self._world is None:
            raise RuntimeError("replay_state before reset: no episode is playing")
        return self._world.env

    def close(self) -> None:
        """Free the environments and their renderers."""
        for world in self._worlds.values():
            if world.renderer is not None:
                world.renderer.close()
            world.env.close()
        self._worlds.clear()
        self._world = None

    def _build(self, task: str) -> _World:
        env = make_env(task)
        # The episode's limit is the engine's (max_seconds of robot time). Meta-World's own horizon would
        # raise on the step after its 500th instead of ending the episode, and counts steps, not seconds.
        env.max_path_length = 2**62
        world = _World(env)
        if self.cameras:
            with timed("rendering"):
                world.renderer = tuned_renderer(
                    env.model, self.image_size, self.image_size, reflections=self.reflections
                )
        return world

    def _observe(self, world: _World, state: npt.NDArray[np.float64]) -> dict[str, Any]:
        obs: dict[str, Any] = {"state": state, "prompt": self.TASKS[self._task]}
        if world.renderer is not None:
            with timed("rendering"):
                for camera in self.cameras:
                    world.renderer.update_scene(world.env.data, camera=camera)
                    frame = world.renderer.render()
                    if camera in UPSIDE_DOWN:
                        frame = np.ascontiguousarray(frame[::-1, ::-1])
                    obs[f"image.{camera}"] = frame
        return obs


_INIT = {"hz": "{policy.hz}"}
_ACTION_SPACE = ([-1.0] * 4, [1.0] * 4)
_REPLAY = {"engine": "mujoco", "state": "replay_state"}


def _declare(tasks: dict[str, str]) -> Any:
    """The declaration MT10 and MT50 share but for their tasks."""
    return benchmark(
        tasks=tasks,
        seeds=range(50),
        max_seconds=MAX_SECONDS,
        init=_INIT,
        action_space=_ACTION_SPACE,
        replay=_REPLAY,
    )


@_declare(MT10_TASKS)
class MT10(_MetaWorld):
    """Meta-World MT10: ten manipulation tasks on a Sawyer arm. Observation: `state` (39 floats: hand xyz,
    gripper opening, two objects' positions and quaternions, the same for the previous step, the goal
    xyz), `prompt` (the task's description) and `image.<camera>` (uint8 H×W×3, upright) per camera asked
    for. The seed picks the task's variation."""

    TASKS: ClassVar[dict[str, str]] = MT10_TASKS


@_declare(MT50_TASKS)
class MT50(_MetaWorld):
    """Meta-World MT50: all fifty tasks, played as MT10 plays its ten."""

    TASKS: ClassVar[dict[str, str]] = MT50_TASKS


@policy(hz=DEFAULT_HZ)
class ScriptedExpert:
    """Meta-World's hand-written expert for the episode's task: reads the goal-observable state and answers
    one action at a time."""

    @on_episode
    def start(self, episode: Episode) -> None:
        from metaworld.policies import ENV_POLICY_MAP

        # Typed as the abstract base; each entry is a concrete expert.
        expert: Any = ENV_POLICY_MAP.get(episode.task)
        if expert is None:
            raise ValueError(
                f"task: the scripted expert plays Meta-World v3 tasks ({len(ENV_POLICY_MAP)}, "
                f"e.g. 'reach-v3'), not {episode.task!r}"
            )
        episode.state["expert"] = expert()

    @infer
    def act(self, obs: dict[str, Any], *, episode: Episode) -> npt.NDArray[np.float32]:
        # A served policy may be asked without its episode hook having run in this process.
        if "expert" not in episode.state:
            self.start(episode)
        action = episode.state["expert"].get_action(obs["state"])
        return np.asarray(action, dtype=np.float32)[None, :]
