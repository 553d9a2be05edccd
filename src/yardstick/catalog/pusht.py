"""PushT (gym-pusht, after Diffusion Policy) as a Yardstick benchmark, and a hand-written pushing heuristic.

The protocol (Diffusion Policy's and LeRobot's): a round agent pushes a T-shaped block onto a T-shaped goal
on a 512 × 512 board, 10 Hz, at most 300 steps (30 s). The action is the agent's target position in pixels,
two numbers in [0, 512] (a PD controller drives it there). The seed places the agent and the block as
gym-pusht's `reset(seed)` does. An episode succeeds, and ends, when the block covers more than 95 %
of the goal (`info["is_success"]`).

Observations: `prompt`, `state` (5: agent x, y, block x, y, block angle), `agent_pos` (2), and with
`pixels=True` (the default) `image.top`, the board from above (uint8, image_size × image_size, 96 by default
as Diffusion Policy's image policies see it). Metrics: `coverage` of the goal by the block, `reward`
(coverage / 0.95, at most 1) and the episode's best, `max_reward`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from yardstick.catalog.extras import PUSHT, require
from yardstick.sdk import replay
from yardstick.sdk.decorators import benchmark, infer, policy, reset, step
from yardstick.sdk.episode import Episode
from yardstick.sdk.timing import timed

HZ = 10.0  # gym-pusht's control_hz
MAX_STEPS = 300
TASK = "push-t"
DESCRIPTION = "Push the T-shaped block onto the T-shaped target"
BOARD = 512.0


class _PushTBody:
    def __init__(self, hz: float = HZ, pixels: bool = True, image_size: int = 96) -> None:
        if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not math.isclose(hz, HZ):
            raise ValueError(
                f"hz: PushT plays at {HZ:g} Hz (its controller runs 10 physics steps an action), so the "
                f"policy must play at {HZ:g} Hz, not {hz!r}"
            )
        if isinstance(image_size, bool) or not isinstance(image_size, int) or not 16 <= image_size <= 1024:
            raise ValueError(
                f"image_size: an image is image_size × image_size pixels, 16 to 1024, not {image_size!r}"
            )
        require(PUSHT, "PushT")
        from gym_pusht.envs.pusht import PushTEnv

        self.pixels = bool(pixels)
        self.env = PushTEnv(obs_type="state", observation_width=image_size, observation_height=image_size)
        self._started = False
        self._best = 0.0
        self._steps = 0

    @reset
    def reset(self, task: str, seed: int) -> dict[str, Any]:
        """Start with the agent and the block placed by `seed`."""
        if task != TASK:
            raise ValueError(f"task: PushT has one task, {TASK!r}, not {task!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed: a PushT seed is an int of at least 0, not {seed!r}")
        state, _ = self.env.reset(seed=int(seed))
        self._started, self._best, self._steps = True, 0.0, 0
        from yardstick.catalog import pusht_scene

        # Its 3D replay (engine "own"): the flat scene once an episode, then the two shapes' poses each step;
        # nothing is sent where the run records no replay.
        replay.scene(0, pusht_scene.scene_glb())
        self._hand_frame(state)
        return self._observe(state)

    @step
    def step(self, action: Any) -> tuple[dict[str, Any], bool, bool, dict[str, float]]:
        """Drive the agent towards `action` (x, y in pixels, 0 to 512) for 0.1 s. Returns (observation,
        done, success, metrics): done is success, the goal more than 95 % covered."""
        if not self._started:
            raise RuntimeError("PushT.step before reset: reset(task, seed) starts an episode")
        played = np.asarray(action, dtype=np.float64)
        if played.shape != (2,):
            raise ValueError(
                f"action: a PushT action is 2 numbers (x, y in pixels), not shape {played.shape}"
            )
        if not np.all(np.isfinite(played)):
            raise ValueError(f"action: every number of an action is finite, not {played.tolist()}")
        state, reward, _, _, info = self.env.step(played)
        self._steps += 1
        self._hand_frame(state)
        self._best = max(self._best, float(reward))
        success = bool(info["is_success"])
        metrics = {"coverage": float(info["coverage"]), "reward": float(reward), "max_reward": self._best}
        return self._observe(state), success, success, metrics

    def close(self) -> None:
        self.env.close()

    def _hand_frame(self, state: npt.NDArray[np.float64]) -> None:
        from yardstick.catalog import pusht_scene

        pos, quat = pusht_scene.poses(state)
        replay.frame(0, self._steps / HZ, pusht_scene.NODES, pos, quat, step=self._steps)

    def _observe(self, state: npt.NDArray[np.float64]) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "prompt": DESCRIPTION,
            "state": np.asarray(state, dtype=np.float64),
            "agent_pos": np.asarray(state[:2], dtype=np.float64),
        }
        if self.pixels:
            with timed("rendering"):
                obs["image.top"] = np.ascontiguousarray(self.env._render())
        return obs


@benchmark(
    name="pusht",
    tasks={TASK: DESCRIPTION},
    seeds=range(50),
    max_seconds=MAX_STEPS / HZ,
    init={"hz": "{policy.hz}"},
    action_space=([0.0, 0.0], [BOARD, BOARD]),
    replay={"engine": "own"},
)
class PushT(_PushTBody):
    """PushT: one task, seeds 0-49, 10 Hz, 300 steps, the agent's target in pixels."""

    BUILTIN_POLICIES: ClassVar[dict[str, str]] = {
        "random": "yardstick.catalog.random_policy:RandomAt10Hz",
        "heuristic": "yardstick.catalog.pusht:PushTHeuristic",
    }


# The goal pose gym-pusht fixes: x, y, angle.
GOAL = np.array([256.0, 256.0, math.pi / 4])


# The T in its own frame (gym-pusht's `add_tee`, scale 30): the bar is x in [-60, 60], y in [0, 30], the stem
# x in [-15, 15], y in [30, 120]; the state's block x, y is this frame's origin (the middle of the bar's far
# edge), the centre of mass is (0, 45), the moment about it 3000 (mass 1). The shapes have no friction, so
# the agent (a circle of radius 15) pushes only along the contact normal.
T_OUTLINE = np.array(
    [(-60, 0), (60, 0), (60, 30), (15, 30), (15, 120), (-15, 120), (-15, 30), (-60, 30)], dtype=np.float64
)
T_COM = np.array([0.0, 45.0])
T_MOMENT = 3000.0
AGENT_RADIUS = 15.0


def _rotation(angle: float) -> npt.NDArray[np.float64]:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def _outline_distance(point: npt.NDArray[np.float64]) -> float:
    """How far a point (in the T's frame) lies from the T: positive outside, negative inside."""
    nearest = math.inf
    for i in range(len(T_OUTLINE)):
        a, b = T_OUTLINE[i], T_OUTLINE[(i + 1) % len(T_OUTLINE)]
        t = float(np.clip(np.dot(point - a, b - a) / np.dot(b - a, b - a), 0.0, 1.0))
        nearest = min(nearest, float(np.linalg.norm(point - (a + t * (b - a)))))
    x, y = point
    inside = (-60 <= x <= 60 and 0 <= y <= 30) or (-15 <= x <= 15 and 30 <= y <= 120)
    return -nearest if inside else nearest


def _contacts(gap: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Points every 5 px along the T's edges (not within 6 px of a corner) and their outward normals, where
    the agent fits at `gap` from the edge (so not deep in the corners under the bar)."""
    points, normals = [], []
    for i in range(len(T_OUTLINE)):
        a, b = T_OUTLINE[i], T_OUTLINE[(i + 1) % len(T_OUTLINE)]
        length = float(np.linalg.norm(b - a))
        along = (b - a) / length
        normal = np.array([along[1], -along[0]])
        if _outline_distance((a + b) / 2 + normal) < 0:
            normal = -normal
        count = int(length // 5.0)
        for j in range(count + 1):
            point = a + along * (6.0 + (length - 12.0) * j / count)
            if _outline_distance(point + normal * gap) >= AGENT_RADIUS + 2.0:
                points.append(point)
                normals.append(normal)
    return np.array(points), np.array(normals)


def _clearance_radii(bins: int = 72) -> npt.NDArray[np.float64]:
    """Per direction about the centre of mass (`bins` sectors), the radius from which on outwards the agent
    clears the T by 6 px: the tightest path round the block."""
    radii = []
    for angle in np.linspace(-math.pi, math.pi, bins + 1)[:-1]:
        widest = 0.0
        for spread in (-0.05, 0.0, 0.05):
            ray = np.array([math.cos(angle + spread), math.sin(angle + spread)])
            r = 130.0
            while r > 0 and _outline_distance(T_COM + ray * r) > AGENT_RADIUS + 6.0:
                r -= 1.0
            widest = max(widest, r + 1.0)
        radii.append(widest)
    return np.array(radii)


def _cross2(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The z of the cross product of rows of 2-vectors (NumPy 2 deprecates `np.cross` on 2-vectors)."""
    return np.asarray(a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0], dtype=np.float64)


@policy(hz=HZ)
class PushTHeuristic:
    """A hand-written contact-point pusher: a baseline for learned policies.

    It works in the block's frame from the state alone. Each step it takes the pose error of the block —
    the centre of mass's offset from where it lies on the goal, and the angle left to turn — and scores
    every candidate contact on the T's edge (`_contacts`): the shapes are frictionless, so pushing there
    moves the block along the inward normal and turns it by the push's moment about the centre of mass;
    the score is how well that motion points along the error (a cosine, an angle weighted by `TURN_SCALE`
    pixels a radian), so far from the goal it pushes through the centre of mass towards it and close in it
    pushes the bar's ends to turn it, finishing with small corrections of both. It keeps its contact while
    it stays nearly the best (`HYSTERESIS`). The agent goes round the block (not through it: on a circle
    about the centre of mass, or the T's tightest clearance where the circle leaves the board) to a
    standoff `GAP` out from the contact, then pushes in by the distance the error asks (2 to 25 px),
    re-aimed every step; it steps back to going round when it slides off its line. Contacts whose standoff
    is off the board, or that it cannot get round to, are set aside for a while."""

    TURN_SCALE = 60.0
    HYSTERESIS = 0.8
    GAP = AGENT_RADIUS + 4.0
    ORBIT = 100.0
    ARC_STEP = 0.5
    GOAL_COM = GOAL[:2] + _rotation(float(GOAL[2])) @ T_COM

    def __init__(self) -> None:
        # The T's geometry, worked out when the heuristic is built (about a second), not when the module is
        # imported: loading the PushT benchmark alone needs none of it.
        self.points, self.normals = _contacts(self.GAP)
        # The block's motion, per pixel pushed, at each contact (in its frame): velocity and angular velocity.
        self.moves = -self.normals
        self.turns = _cross2(self.points - T_COM, -self.normals) / T_MOMENT
        self.clearance = _clearance_radii()

    @infer
    def act(self, obs: dict[str, Any], *, episode: Episode) -> npt.NDArray[np.float64]:
        memory = episode.state
        memory["step"] = memory.get("step", 0) + 1
        memory.setdefault("contact", None)
        memory.setdefault("pushing", False)
        memory.setdefault("set_aside", {})
        state = np.asarray(obs["state"], dtype=np.float64)
        for _ in range(len(self.points)):
            target = self._target(state, memory)
            if target is not None:
                return np.clip(target, 0.0, BOARD)[None, :]
        return np.clip(state[:2], 0.0, BOARD)[None, :]  # nowhere to push from: stay

    def _target(
        self, state: npt.NDArray[np.float64], memory: dict[str, Any]
    ) -> npt.NDArray[np.float64] | None:
        agent, origin, angle = state[:2], state[2:4], float(state[4])
        rotation = _rotation(angle)
        com = origin + rotation @ T_COM
        weight = self.TURN_SCALE**2
        dot = (self.moves @ rotation.T) @ (self.GOAL_COM - com) + weight * _wrap(
            float(GOAL[2]) - angle
        ) * self.turns
        norm2 = 1.0 + weight * self.turns**2
        score = dot / np.sqrt(norm2)
        standoffs = origin + (self.points + self.normals * self.GAP) @ rotation.T
        on_board = np.all((standoffs > 23.0) & (standoffs < BOARD - 24.0), axis=1)
        score = np.where(on_board, score, -np.inf)
        for k, until in memory["set_aside"].items():
            if until > memory["step"]:
                score[k] = -np.inf
        best = int(np.argmax(score))
        if not np.isfinite(score[best]):
            return agent
        contact = memory["contact"]
        if contact is None or score[contact] < self.HYSTERESIS * score[best] or score[contact] <= 0:
            if contact != best:
                memory["contact"], memory["pushing"] = best, False
            contact = best
        point, normal = self.points[contact], self.normals[contact]
        here = rotation.T @ (agent - origin)
        depth = float(np.clip(dot[contact] / norm2[contact], 2.0, 25.0))
        push: npt.NDArray[np.float64] = origin + rotation @ (point + normal * (AGENT_RADIUS - depth))
        if memory["pushing"]:
            rel = here - point
            if abs(rel[0] * normal[1] - rel[1] * normal[0]) <= 8.0 and float(rel @ normal) <= self.GAP + 15.0:
                return push
            memory["pushing"] = False
        standoff = point + normal * self.GAP
        if np.linalg.norm(here - standoff) < 4.0:
            memory["pushing"] = True
            return push
        path = [here + (standoff - here) * t for t in np.linspace(0.0, 1.0, 12)]
        if min(_outline_distance(q) for q in path) > AGENT_RADIUS + 1.5:
            direct: npt.NDArray[np.float64] = origin + rotation @ standoff
            return direct
        return self._round(here, standoff, origin, rotation, contact, memory)

    def _round(
        self,
        here: npt.NDArray[np.float64],
        standoff: npt.NDArray[np.float64],
        origin: npt.NDArray[np.float64],
        rotation: npt.NDArray[np.float64],
        contact: int,
        memory: dict[str, Any],
    ) -> npt.NDArray[np.float64] | None:
        """The next waypoint round the block towards the standoff (both in the block's frame), or None (the
        contact set aside) when neither way round stays on the board."""
        start = math.atan2(here[1] - T_COM[1], here[0] - T_COM[0])
        short = _wrap(math.atan2(standoff[1] - T_COM[1], standoff[0] - T_COM[0]) - start)
        for tight in (False, True):
            for arc in (short, short - math.copysign(2 * math.pi, short)):
                angles = np.linspace(start, start + arc, max(2, int(abs(arc) / 0.15) + 1))
                radii = np.array([self._radius(a, tight) for a in angles])[:, None]
                way = (
                    origin + (T_COM + radii * np.stack([np.cos(angles), np.sin(angles)], axis=1)) @ rotation.T
                )
                if np.all((way > 2.0) & (way < BOARD - 2.0)):
                    step = math.copysign(min(abs(arc), self.ARC_STEP), arc)
                    if np.linalg.norm(here - T_COM) < self._radius(start, tight) - 8.0:
                        step *= 0.3  # close in: out first
                    heading = start + step
                    waypoint = T_COM + self._radius(heading, tight) * np.array(
                        [math.cos(heading), math.sin(heading)]
                    )
                    return origin + rotation @ waypoint
        memory["set_aside"][contact] = memory["step"] + 20
        memory["contact"] = None
        return None

    def _radius(self, heading: float, tight: bool) -> float:
        if not tight:
            return self.ORBIT
        bins = len(self.clearance)
        i = round((_wrap(heading) + math.pi) / (2 * math.pi) * bins) % bins
        return float(max(self.clearance[i], self.clearance[(i + 1) % bins], self.clearance[i - 1])) + 6.0
