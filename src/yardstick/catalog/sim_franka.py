"""A simulated single-arm Franka Panda, driven as a rig drives a robot: the robot adapter that stands in for
hardware where there is none (tests, benches, a rig agent tried without a robot).

The arm and its hand are robosuite's Panda model (its files ship in the robosuite package LIBERO installs; no
download), composed with MuJoCo's MjSpec into one scene: the arm mounted on a table, a small cube and an open
tote on it, an exterior camera looking at the table and robosuite's camera on the hand. robosuite's own
controllers are not used: the joints are tracked by position actuators with gravity compensated, as a
joint-impedance controller on the real arm tracks them, and the hand by robosuite's finger actuators. The
arm's collision meshes are what the cameras see (its detailed visual meshes are ten times the triangles: a
frame pair would cost about 20 ms instead of about 5), and its time is the simulation's: `act` advances it by
one control period and returns as soon as that is computed, so whoever drives it paces it.
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from yardstick.catalog.extras import Simulator, require
from yardstick.catalog.rendering import CameraRig
from yardstick.sdk.robots import robot

HZ = 15.0  # DROID's control rate
CAMERAS = ("exterior", "wrist")
JOINTS = 7
ACTION_DIM = JOINTS + 1
# robosuite's Panda model lives in the robosuite package, which LIBERO's extra installs.
PANDA_MODEL = Simulator("robosuite", "libero", "robosuite's Panda model")

# The start poses' joint positions (radians). nominal: robosuite's Panda init_qpos, the hand pointing down
# some 9 cm above the table; droid_reset: the reset pose of the DROID data collection.
POSES: dict[str, tuple[float, ...]] = {
    "nominal": (0.0, math.pi / 16, 0.0, -math.pi / 2 - math.pi / 3, 0.0, math.pi - 0.2, math.pi / 4),
    "droid_reset": (0.0, -math.pi / 5, 0.0, -4 * math.pi / 5, 0.0, 3 * math.pi / 5, 0.0),
}
# Each joint's position gain (N·m/rad), damping gain (N·m·s/rad) and torque limit (N·m, the Panda's own).
# The position gains are MuJoCo Menagerie's for its Panda; the damping gains make each joint about critically
# damped for robosuite's inertias (about 2.3, 2.4, 1.7, 1.6, 0.5, 0.4, 0.2 kg·m² at the nominal pose), so that
# a target is met within a period or two and a stop brakes the arm within one (bench/rig_stop.py).
GAINS: tuple[tuple[float, float, float], ...] = (
    (4500.0, 200.0, 87.0),
    (4500.0, 200.0, 87.0),
    (3500.0, 155.0, 87.0),
    (3500.0, 150.0, 87.0),
    (2000.0, 65.0, 12.0),
    (2000.0, 55.0, 12.0),
    (2000.0, 40.0, 12.0),
)
FINGER_TRAVEL = 0.04  # metres each finger slides from closed (0) to open
# The physics step is at most this, and divides the control period exactly (34 steps at 15 Hz).
MAX_TIMESTEP = 0.002
TABLE_TOP = 0.8  # metres above the floor; the arm's base stands on it
CUBE_SIZE = 0.02  # half its side, metres
CUBE_START = (0.55, -0.12, TABLE_TOP + CUBE_SIZE)

# The scene the arm is attached into: a floor, a table whose top is at TABLE_TOP with the arm's base on it at
# `mount`, the cube (free), the tote (fixed: five boxes) and the exterior camera, which looks at `look_at`.
# Scene geoms are in group 2, so that every group a camera draws is one the default MjvOption shows.
_SCENE = f"""
<mujoco model="sim_franka">
  <compiler angle="radian" autolimits="true"/>
  <option integrator="implicitfast"/>
  <visual><headlight diffuse="0.5 0.5 0.5" ambient="0.35 0.35 0.35" specular="0 0 0"/></visual>
  <asset>
    <texture name="floor" type="2d" builtin="checker" rgb1=".25 .3 .35" rgb2=".18 .22 .26"
             width="256" height="256"/>
    <material name="floor" texture="floor" texrepeat="8 8"/>
    <material name="table" rgba="0.62 0.48 0.34 1" specular="0.05"/>
    <material name="tote" rgba="0.2 0.4 0.8 1" specular="0.1"/>
  </asset>
  <default><geom group="2"/></default>
  <worldbody>
    <light pos="0.4 -0.4 2.5" dir="0 0.2 -1" directional="true" diffuse="0.5 0.5 0.5"/>
    <geom name="floor" type="plane" size="3 3 0.05" material="floor"/>
    <body name="table" pos="0.35 0 {TABLE_TOP / 2}">
      <geom type="box" size="0.55 0.65 {TABLE_TOP / 2}" material="table"/>
    </body>
    <frame name="mount" pos="0 0 {TABLE_TOP}"/>
    <body name="cube" pos="{CUBE_START[0]} {CUBE_START[1]} {CUBE_START[2]}">
      <freejoint name="cube"/>
      <geom type="box" size="{CUBE_SIZE} {CUBE_SIZE} {CUBE_SIZE}" rgba="0.85 0.15 0.1 1" mass="0.05"
            friction="1.5 0.01 0.001"/>
    </body>
    <body name="tote" pos="0.5 0.28 {TABLE_TOP}">
      <geom type="box" pos="0 0 0.005" size="0.1 0.08 0.005" material="tote"/>
      <geom type="box" pos="0.095 0 0.045" size="0.005 0.08 0.045" material="tote"/>
      <geom type="box" pos="-0.095 0 0.045" size="0.005 0.08 0.045" material="tote"/>
      <geom type="box" pos="0 0.075 0.045" size="0.1 0.005 0.045" material="tote"/>
      <geom type="box" pos="0 -0.075 0.045" size="0.1 0.005 0.045" material="tote"/>
    </body>
    <body name="look_at" pos="0.35 0.05 {TABLE_TOP + 0.2}"/>
    <camera name="exterior" mode="targetbody" target="look_at" pos="1.25 -0.7 1.45" fovy="55"/>
  </worldbody>
</mujoco>
"""
# {observation key: the model's camera}: robosuite's camera on the hand, looking out past the fingers.
_CAMERAS = {"exterior": "exterior", "wrist": "panda/eye_in_hand"}


def panda_assets() -> str:
    """robosuite's assets folder, found without importing robosuite (whose import prints warnings)."""
    spec = importlib.util.find_spec(PANDA_MODEL.module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(PANDA_MODEL.module)
    return os.path.join(next(iter(spec.submodule_search_locations)), "models", "assets")


def build_model(hz: float = HZ) -> Any:
    """The compiled MjModel of the scene: the Panda (prefix "panda/", its hand "panda/hand/") on the table,
    actuators "joint1".."joint7" tracking joint positions, the physics step dividing 1/hz exactly."""
    import mujoco

    assets = panda_assets()
    scene = mujoco.MjSpec.from_string(_SCENE)
    arm = mujoco.MjSpec.from_file(os.path.join(assets, "robots", "panda", "robot.xml"))
    hand = mujoco.MjSpec.from_file(os.path.join(assets, "grippers", "panda_gripper.xml"))
    # Mesh files are relative to their own XML; once attached, they would be looked for beside the scene.
    for spec, folder in ((arm, ("robots", "panda")), (hand, ("grippers",))):
        for mesh in spec.meshes:
            mesh.file = os.path.join(assets, *folder, mesh.file)
    # The arm is drawn by its collision meshes (see the module's docstring): its visual geoms, their meshes
    # and materials go, which also keeps the build near a tenth of a second.
    for geom in list(arm.geoms):
        if geom.contype == 0 and geom.conaffinity == 0:
            geom.delete()
        else:
            geom.rgba = [0.93, 0.93, 0.93, 1.0]
    used = {geom.meshname for geom in arm.geoms}
    for mesh in list(arm.meshes):
        if mesh.name not in used:
            mesh.delete()
    for material in list(arm.materials):
        material.delete()
    # robosuite's torque motors give way to position actuators below.
    for actuator in list(arm.actuators):
        actuator.delete()
    # The hand is drawn by its visual meshes: its collision geoms go to a group cameras do not draw, and its
    # marker sites (for robosuite's viewer) are made invisible.
    for geom in hand.geoms:
        if not (geom.contype == 0 and geom.conaffinity == 0):
            geom.group = 3
    for site in hand.sites:
        site.rgba = [0.0, 0.0, 0.0, 0.0]
    arm.attach(hand, prefix="hand/", site=arm.body("right_hand").add_site(name="hand_mount"))
    scene.attach(arm, prefix="panda/", frame=scene.frame("mount"))
    # Gravity compensated on every body of the arm and hand, as the Franka's controller does: the position
    # gains then only track, and a hold stays where it was put.
    for body in scene.bodies:
        if body.name.startswith("panda/"):
            body.gravcomp = 1.0
    for index, (kp, kv, limit) in enumerate(GAINS, start=1):
        joint = scene.joint(f"panda/joint{index}")
        actuator = scene.add_actuator(name=f"joint{index}", target=joint.name)
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        actuator.gainprm[0] = kp
        actuator.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        actuator.biasprm[1] = -kp
        actuator.biasprm[2] = -kv
        actuator.ctrlrange = joint.range
        actuator.forcerange = [-limit, limit]
    period = 1.0 / hz
    scene.option.timestep = period / math.ceil(period / MAX_TIMESTEP - 1e-9)
    return scene.compile()


@robot(shape="franka", hz=HZ, cameras=CAMERAS, action_dim=ACTION_DIM)
class SimulatedFranka:
    """A single-arm Franka Panda in MuJoCo, driven as if it were hardware; what each method does here, and
    what an adapter of a real arm (a Franka through its control stack: franky or libfranka, Polymetis; or an
    arm LeRobot drives, through its `Robot`) implements in its place:

    - `observe()` -> {"images": {"exterior", "wrist": uint8 image_size × image_size × 3}, "state": {"joints":
      7 float32 radians, "gripper": 1 float32, 0 open to 1 closed}}. Here: the two cameras rendered from the
      simulation. Real: the latest frame of each camera (RealSense, ZED: read by a thread of its own, so
      that observing never waits for an exposure), resized; the joint positions from the robot's state
      (franky's `current_joint_state`, libfranka's `RobotState.q`, Polymetis' `get_joint_positions()`,
      LeRobot's `get_observation()`), and the gripper's width as a share of its stroke, 0 open.
    - `act(action)`: one row of 8 numbers, 7 joint targets in radians and the gripper command (0 open, 1
      closed), held for one control period (1/15 s). Here: the physics advanced by that period with the
      targets tracked by position actuators. Real: the targets handed to a joint impedance controller
      (franky's `JointMotion` asynchronously, Polymetis' `update_desired_joint_positions`, LeRobot's
      `send_action`), clipped to the joint limits and a largest step, the gripper moved when its command
      crosses a threshold; it returns at once, and the rig loop paces the periods.
    - `move_to(pose)`: "nominal" or "droid_reset" (`POSES`); any other name is a ValueError naming the
      choices. Here: the arm and the cube put at their start at once, the hand open. Real: a planned motion
      to the joint positions (franky's `JointMotion`, Polymetis' `move_to_joint_positions`), hand opened,
      returning once there; the scene is reset by a person or a reset routine.
    - `stop()`: halt at once and hold position, safe to call from any thread while `act` runs in the loop
      thread; `act` then does nothing until the next `move_to`. Here: a flag the physics reads at each of its
      steps (about every 2 ms of the robot's time), whereupon the joints hold where they are and the hand
      keeps its last command (a stop does not drop what the hand holds); the robot's time still passes in
      `act`. Real: the running motion ended and the measured position held (libfranka's `Robot::stop()`;
      franky, a motion to the measured joints, which preempts the running one; Polymetis,
      `terminate_current_policy()`, after which its default controller holds the arm; LeRobot, the measured
      position sent as the target), and the next actions dropped until a reset.
    - `close()`: here, the renderer released. Real: the controller stopped, the cameras and the connection
      closed.
    """

    def __init__(self, image_size: int = 128) -> None:
        require(PANDA_MODEL, "the robot SimulatedFranka")
        if not isinstance(image_size, int) or image_size < 1:
            raise ValueError(f"image_size: a camera's side in pixels, at least 1, not {image_size!r}")
        import mujoco

        self._mujoco = mujoco
        # The simulation beneath the adapter, for tests and benches that look past it; a rig never does.
        self.model = build_model(HZ)
        self.data = mujoco.MjData(self.model)
        self.steps_per_period = round(1.0 / (HZ * self.model.opt.timestep))
        self.image_size = image_size
        self._joint_qpos = np.array([self.model.joint(f"panda/joint{i}").qposadr[0] for i in range(1, 8)])
        self._joint_qvel = np.array([self.model.joint(f"panda/joint{i}").dofadr[0] for i in range(1, 8)])
        self._joint_ctrl = np.array([self.model.actuator(f"joint{i}").id for i in range(1, 8)])
        fingers = ("panda/hand/finger_joint1", "panda/hand/finger_joint2")
        self._finger_qpos = np.array([self.model.joint(name).qposadr[0] for name in fingers])
        self._finger_ctrl = np.array(
            [self.model.actuator(f"panda/hand/gripper_{name.rsplit('/', 1)[1]}").id for name in fingers]
        )
        self._cube_qpos = int(self.model.joint("cube").qposadr[0])
        self._low, self._high = self.model.actuator_ctrlrange[self._joint_ctrl].T.copy()
        # The joint targets the last period ended at (the arm's controller's setpoint); move_to sets it.
        self._target = np.array(POSES["nominal"])
        self._cameras = CameraRig(self.model, _CAMERAS, image_size, image_size)
        # Set by stop() from any thread; read by the physics at each of its steps; cleared by move_to. The
        # loop thread alone touches the simulation, so the flag is the one thing the threads share.
        self._stop = threading.Event()
        self._holding = False
        self._closed = False
        self.move_to("nominal")

    def observe(self) -> dict[str, dict[str, npt.NDArray[Any]]]:
        """The cameras' frames and the robot's state, as the class's docstring describes them."""
        self._check_open()
        fingers = self.data.qpos[self._finger_qpos]
        # Each finger's opening, 0 closed to FINGER_TRAVEL open (the second slides the other way).
        opening = (fingers[0] - fingers[1]) / (2 * FINGER_TRAVEL)
        return {
            "images": self._cameras.frames(self.data),
            "state": {
                "joints": self.data.qpos[self._joint_qpos].astype(np.float32),
                "gripper": np.array([np.clip(1.0 - opening, 0.0, 1.0)], dtype=np.float32),
            },
        }

    def act(self, action: npt.ArrayLike) -> None:
        """Play one action row (7 joint targets in radians, then the gripper, 0 open to 1 closed) for one
        control period of the robot's time. Targets beyond a joint's limits are clipped to them."""
        self._check_open()
        row = np.asarray(action, dtype=np.float64)
        if row.shape != (ACTION_DIM,):
            raise ValueError(
                f"action: one row of {ACTION_DIM} numbers (7 joint targets in radians, then the gripper, "
                f"0 open to 1 closed), not an array of shape {row.shape}"
            )
        if not np.isfinite(row).all():
            raise ValueError(f"action: every number is finite, not {row.tolist()}")
        start = self._target
        end = np.clip(row[:JOINTS], self._low, self._high)
        if not self._stop.is_set():
            self._grip(float(row[JOINTS]))
        for step in range(1, self.steps_per_period + 1):
            # A stop lands at the next physics step, not the next period: the joints hold where they are.
            if self._stop.is_set():
                if not self._holding:
                    self._target = self.data.qpos[self._joint_qpos].copy()
                    self.data.ctrl[self._joint_ctrl] = self._target
                    self._holding = True
            else:
                # The target moves from the last to the new one across the period, as a real arm's
                # controller interpolates between the rig's targets: a step change would jerk the arm.
                self.data.ctrl[self._joint_ctrl] = start + (end - start) * (step / self.steps_per_period)
            self._mujoco.mj_step(self.model, self.data)
        if not self._holding:
            self._target = end

    def move_to(self, pose: str) -> None:
        """Put the arm at the start pose `pose` ("nominal" or "droid_reset"), the hand open and the cube at
        its start, and take actions again after a stop."""
        self._check_open()
        if pose not in POSES:
            raise ValueError(f"pose: a start pose is one of {', '.join(POSES)}, not {pose!r}")
        # Cleared first: a stop that arrives while the arm is being moved still holds it.
        self._stop.clear()
        self._holding = False
        joints = np.array(POSES[pose])
        self._mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self._joint_qpos] = joints
        self.data.ctrl[self._joint_ctrl] = joints
        self._target = joints
        self._grip(0.0)
        self.data.qpos[self._finger_qpos] = self.data.ctrl[self._finger_ctrl]
        self.data.qpos[self._cube_qpos : self._cube_qpos + 7] = (*CUBE_START, 1.0, 0.0, 0.0, 0.0)
        self._mujoco.mj_forward(self.model, self.data)

    def stop(self) -> None:
        """Halt at once and hold position; safe from any thread. `act` does nothing until `move_to`."""
        self._stop.set()

    @property
    def stopped(self) -> bool:
        """Whether the arm holds still on a stop (until the next `move_to`)."""
        return self._stop.is_set()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._stop.set()
            self._cameras.close()

    def _grip(self, command: float) -> None:
        """Set the fingers' targets for a gripper command, 0 open to 1 closed."""
        opening = FINGER_TRAVEL * (1.0 - min(max(command, 0.0), 1.0))
        self.data.ctrl[self._finger_ctrl] = (opening, -opening)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("SimulatedFranka: closed; build another")
