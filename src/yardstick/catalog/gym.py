"""Any Gymnasium environment with continuous (Box) actions as a one-task Yardstick benchmark.

    Pendulum = gym_benchmark("Pendulum-v1")      # also reachable as the benchmark reference "gym:Pendulum-v1"

The task is the id itself; a seed is handed to `env.reset(seed=...)`, so the same seed gives the same
episode. Gymnasium has no notion of success: `success` is the env's `info["success"]` when it reports one
and False otherwise, and the metric `return` (the sum of rewards so far) carries the score.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

import numpy as np

from yardstick.catalog.extras import GYMNASIUM, require
from yardstick.sdk.decorators import benchmark, reset, step
from yardstick.sdk.specs import TASK_DESCRIPTION_MAX

SEEDS = range(100)
# An env registered without a time limit gets this one on the robot's clock: 1000 steps at 50 Hz.
FALLBACK_STEPS = 1000
FALLBACK_HZ = 50.0

_classes: dict[str, type] = {}


def gym_benchmark(env_id: str) -> type:
    """The benchmark class for the Gymnasium id `env_id`, built once per id and process.

    Refuses (ValueError naming the id) an id Gymnasium does not know, an env that cannot be made here, and an
    env whose actions are not a Box: policies answer arrays of numbers. Building the class makes the env once
    to read its action space and step length, then closes it; an instance makes its own env when built.

    The episode's limit is the registered `max_episode_steps` times the env's step length (`env.dt`, else
    1 / `metadata["render_fps"]`, else 1/50 s); an env registered without a limit gets 1000 steps at 50 Hz.
    Since `done` is `terminated or truncated`, the env's own time limit ends an episode too, whatever rate
    the policy plays at. A Box with an infinite bound is declared without an `action_space`, so sampling
    policies fall back to their own range.
    """
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env_id: a Gymnasium id is a non-empty string like 'Pendulum-v1', not {env_id!r}")
    found = _classes.get(env_id)
    if found is None:
        found = _classes[env_id] = _build_class(env_id)
    return found


def _build_class(env_id: str) -> type:
    # Even the declaration comes from Gymnasium (its registry and the env's spaces).
    require(GYMNASIUM, f"the benchmark gym:{env_id}")
    import gymnasium
    from gymnasium.spaces import Box

    try:
        registered = gymnasium.spec(env_id)
    except gymnasium.error.Error as exc:
        raise ValueError(f"env_id: {env_id!r} is not a registered Gymnasium environment: {exc}") from None
    probe = _make(env_id)
    try:
        space = probe.action_space
        if not isinstance(space, Box):
            raise ValueError(
                f"env_id: {env_id!r} takes {space} actions; a Yardstick benchmark takes arrays "
                "of numbers, so only envs with a Box action space can be played"
            )
        step_seconds = _step_seconds(probe)
        # A MuJoCo env (Pusher, Ant, ...) is replayed in 3D as any MuJoCo benchmark is; another has no scene.
        simulated = hasattr(probe.unwrapped, "model") and hasattr(probe.unwrapped, "data")
    finally:
        probe.close()
    steps = registered.max_episode_steps
    max_seconds = steps * step_seconds if steps else FALLBACK_STEPS / FALLBACK_HZ
    low = np.asarray(space.low, dtype=np.float64).reshape(-1)
    high = np.asarray(space.high, dtype=np.float64).reshape(-1)
    action_space = None
    if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
        action_space = (low.tolist(), high.tolist())
    entry = registered.entry_point
    description = f"Gymnasium {env_id}" + (f": {entry}" if isinstance(entry, str) else "")
    if len(description) > TASK_DESCRIPTION_MAX:
        description = f"Gymnasium {env_id}"[:TASK_DESCRIPTION_MAX]

    namespace = {
        "ENV_ID": env_id,
        "ACTION_SHAPE": tuple(space.shape),
        "ACTION_DTYPE": space.dtype,
        "__doc__": f"Gymnasium {env_id} as a one-task benchmark.",
        "__module__": __name__,
    }
    cls = type("Gym_" + re.sub(r"\W", "_", env_id), (_GymBenchmark,), namespace)
    decorate = benchmark(
        name=f"gym:{env_id}",
        tasks={env_id: description},
        seeds=SEEDS,
        max_seconds=max_seconds,
        action_space=action_space,
        replay={"engine": "mujoco", "state": "replay_state"} if simulated else None,
    )
    return decorate(cls)


def _make(env_id: str) -> Any:
    import gymnasium

    try:
        return gymnasium.make(env_id)
    except gymnasium.error.Error as exc:
        raise ValueError(f"env_id: {env_id!r} is not a registered Gymnasium environment: {exc}") from None
    except Exception as exc:  # a missing simulator, a broken entry point: say which id and why
        raise ValueError(f"env_id: Gymnasium could not make {env_id!r}: {type(exc).__name__}: {exc}") from exc


def _step_seconds(env: Any) -> float:
    """Robot seconds one step plays: the env's dt, else one rendered frame, else 1/50 s."""
    dt = getattr(env.unwrapped, "dt", None)
    if isinstance(dt, (int, float)) and not isinstance(dt, bool) and math.isfinite(dt) and dt > 0:
        return float(dt)
    fps = env.metadata.get("render_fps")
    if isinstance(fps, (int, float)) and not isinstance(fps, bool) and math.isfinite(fps) and fps > 0:
        return 1.0 / float(fps)
    return 1.0 / FALLBACK_HZ


class _GymBenchmark:
    """The body of every `gym_benchmark` class; ENV_ID and the action's shape are set per class."""

    ENV_ID: ClassVar[str]
    ACTION_SHAPE: ClassVar[tuple[int, ...]]
    ACTION_DTYPE: ClassVar[Any]

    def __init__(self) -> None:
        self.env = _make(self.ENV_ID)
        self._return = 0.0

    @reset
    def reset(self, task: str, seed: int) -> dict[str, Any]:
        if task != self.ENV_ID:
            raise ValueError(f"task: gym:{self.ENV_ID} has one task, {self.ENV_ID!r}, not {task!r}")
        obs, _ = self.env.reset(seed=int(seed))
        self._return = 0.0
        return _observation(obs)

    @step
    def step(self, action: Any) -> tuple[dict[str, Any], bool, bool, dict[str, float]]:
        """Returns (observation, terminated or truncated, info["success"] or False, {"reward", "return"})."""
        played = np.asarray(action, dtype=self.ACTION_DTYPE)
        size = math.prod(self.ACTION_SHAPE)
        if played.size != size:
            raise ValueError(
                f"action: {self.ENV_ID} takes {size} numbers (shape {self.ACTION_SHAPE}), "
                f"not an array of shape {played.shape}"
            )
        obs, reward, terminated, truncated, info = self.env.step(played.reshape(self.ACTION_SHAPE))
        self._return += float(reward)
        success = bool(info.get("success", False))
        return (
            _observation(obs),
            bool(terminated or truncated),
            success,
            {"reward": float(reward), "return": self._return},
        )

    def replay_state(self) -> Any:
        """What a 3D replay reads of a MuJoCo env's episode: the env (its model and data)."""
        return self.env

    def close(self) -> None:
        self.env.close()


def _observation(obs: Any) -> dict[str, Any]:
    """A dict observation as it is; anything else as its `state`."""
    if isinstance(obs, dict):
        return dict(obs)
    return {"state": np.asarray(obs)}
