"""A scripted expert for ALOHA transfer-cube: ACT's waypoint policy (Zhao et al. 2023, MIT), written anew.

ACT's scripted policy moves the grippers through waypoints timed in steps: the right arm goes above the cube,
down, closes, carries it to a meeting point, where the left arm closes on it and the right lets go. ACT
plays it in the end-effector (mocap) version of the task and replays the joints that produced. Here the
waypoints are turned into joint angles by inverse kinematics instead (the mocap welds of gym-aloha's
end-effector task no longer hold the grippers where ACT's waypoints put them on this MuJoCo), corrected for
the servos' sag in a simulation of its own, and answered as joint targets, the benchmark's action.

ACT's waypoints are poses of the mocap frames, not of the gripper links: a weld without relpose keeps the
relative pose of the model's reference configuration, where each mocap body stands 0.1347 m ahead of its
gripper link along the gripper's axis (between the fingertips) and turned as that link is at qpos0. Aiming the
gripper links themselves at the waypoints (as this expert first did) put the fingertips 13 cm beyond every
waypoint, at the cube as at the meeting point, so grasps missed: 0 of 50 seeds here (mean best reward 0.60
of 4). Aiming the grasp point, it transfers the cube on all 50 seeds and the left gripper
still holds it in the air at step 400; the sag correction is a margin, not the fix (50 of 50 without it too).

The expert reads the cube's pose from the first observation (`env_state`), plans the whole episode (about
half a second) and answers it as one chunk of 400 rows.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from yardstick.sdk.decorators import infer, policy
from yardstick.sdk.episode import Episode

STEPS = 400
IK_ITERATIONS = 20
IK_DAMPING = 1e-4
# The correction of the servos' sag: its proportional and integral gains per step (tuned on seeds 0-9).
CORRECTION_P = 1.0
CORRECTION_I = 0.05
_SIDES = ("left", "right")
_ARM_JOINTS = (slice(0, 6), slice(8, 14))  # each arm's six joints in qpos (its two fingers follow them)
_ARM = np.r_[0:6, 7:13]  # the arm joints in an action (index 6 and 13 are the grippers)
MEET = np.array([0.0, 0.5, 0.25])
# The mocap frame in the gripper link's frame, as gym-aloha's end-effector task welds them: its mocap bodies
# stand at x = ±0.095, z = 0.425 in the XML, the gripper links at x = ∓0.039706, z = 0.42705 at qpos0.
GRASP_OFFSET = np.array([0.134706, 0.0, -0.00205])


def quat_multiply(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The Hamilton product of two (w, x, y, z) quaternions."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def axis_quat(axis: tuple[float, float, float], degrees: float) -> npt.NDArray[np.float64]:
    half = math.radians(degrees) / 2
    return np.array([math.cos(half), *(math.sin(half) * np.asarray(axis, dtype=np.float64))])


def _at(base: npt.NDArray[np.float64], dx: float, dy: float, dz: float) -> npt.NDArray[np.float64]:
    moved: npt.NDArray[np.float64] = np.asarray(base, dtype=np.float64) + np.array([dx, dy, dz])
    return moved


Waypoint = tuple[int, npt.NDArray[np.float64], npt.NDArray[np.float64], float]  # step, xyz, quat, gripper


def waypoints(
    cube_xyz: npt.NDArray[np.float64],
    left_start: npt.NDArray[np.float64],
    right_start: npt.NDArray[np.float64],
) -> tuple[list[Waypoint], list[Waypoint]]:
    """ACT's transfer-cube waypoints for the left and the right gripper (gripper 0 closed, 1 open)."""
    # ACT turns its initial mocap orientation, the identity (the gripper level), not the arm's start pose
    # (pitched 0.1 rad), by -60° about y.
    pick = axis_quat((0.0, 1.0, 0.0), -60)
    meet_left = axis_quat((1.0, 0.0, 0.0), 90)
    flat = np.array([1.0, 0.0, 0.0, 0.0])
    left = [
        (0, left_start[:3], left_start[3:], 0.0),  # sleep
        (100, _at(MEET, -0.1, 0, -0.02), meet_left, 1.0),  # approach the meeting point
        (260, _at(MEET, 0.02, 0, -0.02), meet_left, 1.0),  # reach it
        (310, _at(MEET, 0.02, 0, -0.02), meet_left, 0.0),  # close on the cube
        (360, _at(MEET, -0.1, 0, -0.02), flat, 0.0),  # move left
        (400, _at(MEET, -0.1, 0, -0.02), flat, 0.0),  # stay
    ]
    right = [
        (0, right_start[:3], right_start[3:], 0.0),  # sleep
        (90, _at(cube_xyz, 0, 0, 0.08), pick, 1.0),  # above the cube
        (130, _at(cube_xyz, 0, 0, -0.015), pick, 1.0),  # down
        (170, _at(cube_xyz, 0, 0, -0.015), pick, 0.0),  # close
        (200, _at(MEET, 0.05, 0, 0), pick, 0.0),  # towards the meeting point
        (220, MEET, pick, 0.0),  # at it
        (310, MEET, pick, 1.0),  # let go
        (360, _at(MEET, 0.1, 0, 0), pick, 1.0),  # move right
        (400, _at(MEET, 0.1, 0, 0), pick, 1.0),  # stay
    ]
    return left, right


def interpolate(path: list[Waypoint], t: int) -> npt.NDArray[np.float64]:
    """The mocap target (xyz, quat, gripper) at step t, linear between the waypoints around it."""
    for (t0, xyz0, q0, g0), (t1, xyz1, q1, g1) in itertools.pairwise(path):
        if t0 <= t < t1:
            f = (t - t0) / (t1 - t0)
            return np.concatenate([xyz0 + (xyz1 - xyz0) * f, q0 + (q1 - q0) * f, [g0 + (g1 - g0) * f]])
    _, xyz, q, g = path[-1]
    return np.concatenate([xyz, q, [g]])


def _solve(
    model: Any,
    data: Any,
    body: int,
    joints: slice,
    target: npt.NDArray[np.float64],
    start: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """One arm's six joint angles that put `body` at `target` (xyz, then a w-x-y-z quaternion): damped
    least squares from `start`, on the kinematics alone."""
    import mujoco

    q = start.copy()
    jacp = np.zeros((3, model.nv))
    jacr = np.zeros((3, model.nv))
    for _ in range(IK_ITERATIONS):
        data.qpos[joints] = q
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        turn = quat_multiply(target[3:], data.xquat[body] * [1, -1, -1, -1])
        if turn[0] < 0:
            turn = -turn
        error = np.concatenate([target[:3] - data.xpos[body], 2 * turn[1:]])
        if np.linalg.norm(error[:3]) < 1e-4 and np.linalg.norm(error[3:]) < 1e-3:
            break
        mujoco.mj_jacBody(model, data, jacp, jacr, body)
        jac = np.vstack([jacp, jacr])[:, joints]
        q = q + jac.T @ np.linalg.solve(jac @ jac.T + IK_DAMPING * np.eye(6), error)
    return q


def joint_path(model: Any, cube_xyz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """ACT's waypoints as joint angles, step by step (STEPS × 14, grippers as ACT commands them).

    ACT's targets are the mocap frames its grippers are welded to. A weld with no relpose keeps the pose the
    two bodies have in the model's reference configuration (qpos0, mocap bodies where the XML puts them): the
    mocap frame sits GRASP_OFFSET ahead of the gripper link, between the fingers, turned as the gripper link
    is at qpos0 (the right arm faces the other way)."""
    import mujoco
    from gym_aloha.constants import START_ARM_POSE

    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)  # qpos0
    bodies = [
        mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"vx300s_{side}/gripper_link") for side in _SIDES
    ]
    offsets = [data.xquat[b].copy() for b in bodies]
    data.qpos[:16] = START_ARM_POSE
    mujoco.mj_kinematics(model, data)
    # Where the mocap frames would be at the start (ACT puts them elsewhere and lets the weld yank the arms
    # there; starting from where the arms are avoids that jolt).
    starts = [
        np.concatenate(
            [
                data.xpos[b] + data.xmat[b].reshape(3, 3) @ GRASP_OFFSET,
                quat_multiply(data.xquat[b], offsets[arm] * [1, -1, -1, -1]),
            ]
        )
        for arm, b in enumerate(bodies)
    ]
    paths = waypoints(cube_xyz, starts[0], starts[1])
    angles = [
        np.array(START_ARM_POSE[0:6], dtype=np.float64),
        np.array(START_ARM_POSE[8:14], dtype=np.float64),
    ]
    rows = []
    for t in range(STEPS):
        row = []
        for arm in range(2):
            pose = interpolate(paths[arm], t)
            quat = quat_multiply(pose[3:7] / np.linalg.norm(pose[3:7]), offsets[arm])
            link = pose[:3] - _rotation(quat) @ GRASP_OFFSET
            target = np.concatenate([link, quat])
            angles[arm] = _solve(model, data, bodies[arm], _ARM_JOINTS[arm], target, angles[arm])
            row += [*angles[arm], pose[7]]
        rows.append(row)
    return np.asarray(rows)


def _rotation(quat: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    import mujoco

    matrix = np.zeros(9)
    mujoco.mju_quat2Mat(matrix, quat)
    return matrix.reshape(3, 3)


def plan(cube_pose: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The joint targets (STEPS × 14) that play ACT's transfer for a cube at `cube_pose` (x, y, z, quat).

    The arms' position servos sag under gravity (the wrists' gains are low), so targets equal to the path's
    angles leave each gripper centimetres low. The plan is played once in a simulation of its own, from the
    same start, with a proportional-integral correction of each arm joint's error; the corrected targets are
    the answer, and since the benchmark starts from the same state, it replays the same motion."""
    from yardstick.catalog.aloha import build_env

    env = build_env("transfer-cube")
    from gym_aloha.tasks.sim import BOX_POSE

    BOX_POSE[0] = np.asarray(cube_pose, dtype=np.float64)
    ts = env.reset()
    path = joint_path(env.physics.model.ptr, np.asarray(cube_pose[:3], dtype=np.float64))
    integral = np.zeros(14)
    rows = []
    for t in range(STEPS):
        error = np.zeros(14)
        error[_ARM] = (path[t] - np.asarray(ts.observation["qpos"]))[_ARM]
        command = path[t] + integral + CORRECTION_P * error
        rows.append(command)
        ts = env.step(command)
        integral += CORRECTION_I * error
    return np.stack(rows)


@policy(hz=50, action_chunk_len=STEPS)
class TransferCubeExpert:
    """ACT's scripted transfer-cube policy: the whole episode's joint targets, planned from the cube's pose
    in the first observation, as one chunk."""

    @infer
    def act(self, obs: dict[str, Any], *, episode: Episode) -> npt.NDArray[np.float64]:
        if episode.task != "transfer-cube":
            raise ValueError(f"task: the scripted ALOHA expert plays 'transfer-cube', not {episode.task!r}")
        planned = episode.state.get("plan")
        if planned is None:
            planned = episode.state["plan"] = plan(np.asarray(obs["env_state"][:7], dtype=np.float64))
            episode.state["played"] = 0
        # Asked again (a served policy may be), it answers the rows not yet played.
        start = min(episode.state["played"], STEPS - 1)
        episode.state["played"] = STEPS
        return np.asarray(planned[start:])
