"""Robot adapters: the @robot declaration and its refusals, and the simulated Franka driven as a rig drives a
robot (what it observes, that it follows joint targets and closes its hand, that a stop from another thread
holds it while the loop keeps acting, and that move_to takes actions again)."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import yardstick.sdk as sdk
from yardstick.catalog.sim_franka import ACTION_DIM, CAMERAS, HZ, JOINTS, POSES, SimulatedFranka
from yardstick.sdk import RobotSpec, SpecError, benchmark_spec, load_object, robot, robot_spec
from yardstick.sdk.robots import METHODS, START_POSES

NOMINAL = np.array(POSES["nominal"])
# A target a few tenths of a radian from the nominal pose, every joint moved, all within the joints' limits.
OFFSET = np.array([0.25, 0.15, -0.2, 0.25, 0.2, -0.2, 0.3])
# Generous: each wait is for something that takes milliseconds.
DEADLINE = 60.0


@pytest.fixture(scope="module")
def franka() -> Iterator[SimulatedFranka]:
    arm = SimulatedFranka()
    yield arm
    arm.close()


@pytest.fixture
def arm(franka: SimulatedFranka) -> SimulatedFranka:
    franka.move_to("nominal")
    return franka


def joints(arm: SimulatedFranka) -> npt.NDArray[np.float32]:
    return arm.observe()["state"]["joints"]


def row(target: npt.ArrayLike, gripper: float = 0.0) -> npt.NDArray[np.float64]:
    return np.r_[np.asarray(target, dtype=np.float64), gripper]


def methods(**replaced: Any) -> dict[str, Any]:
    """The body of a well-formed robot class, with `replaced` methods swapped (None: left out)."""

    def observe(self: Any) -> dict[str, Any]:
        return {"images": {}, "state": {}}

    def act(self: Any, action: Any) -> None: ...

    def move_to(self: Any, pose: str) -> None: ...

    def stop(self: Any) -> None: ...

    def close(self: Any) -> None: ...

    body: dict[str, Any] = {"observe": observe, "act": act, "move_to": move_to, "stop": stop, "close": close}
    body.update(replaced)
    return {name: fn for name, fn in body.items() if fn is not None}


def declare(body: dict[str, Any], **fields: Any) -> type:
    decorate: Callable[[type], type] = robot(
        **{"shape": "franka", "hz": 15, "cameras": ["wrist"], "action_dim": 8, **fields}
    )
    return decorate(type("Mine", (), body))


# --- the declaration -----------------------------------------------------------------------------------


def test_the_simulated_franka_declares_itself_and_loads_by_reference() -> None:
    spec = robot_spec(SimulatedFranka)
    assert spec == RobotSpec(
        name="SimulatedFranka", shape="franka", hz=15.0, cameras=("exterior", "wrist"), action_dim=8
    )
    assert (spec.hz, spec.cameras, spec.action_dim) == (HZ, CAMERAS, ACTION_DIM)
    assert load_object("yardstick.catalog.sim_franka:SimulatedFranka") is SimulatedFranka
    assert tuple(POSES) == START_POSES
    assert {sdk.robot, sdk.robot_spec, sdk.RobotSpec} == {robot, robot_spec, RobotSpec}
    with pytest.raises(Exception, match="frozen"):
        spec.hz = 30.0  # type: ignore[misc]


def test_a_well_formed_class_is_declared_under_its_name() -> None:
    cls = declare(methods(), name="lab-franka", cameras=("exterior", "wrist_left"), hz=10.0)
    assert robot_spec(cls).name == "lab-franka"
    assert robot_spec(cls).cameras == ("exterior", "wrist_left")


def test_a_class_that_is_not_a_robot_is_refused_by_name() -> None:
    class Plain:
        pass

    with pytest.raises(SpecError, match=r"class .*Plain: @robot: is not a robot") as refused:
        robot_spec(Plain)
    assert refused.value.field == "@robot"

    # A subclass declares itself again, as a benchmark's does; and a robot is not a benchmark.
    class Derived(SimulatedFranka):
        pass

    with pytest.raises(SpecError, match="Derived: @robot: is not a robot"):
        robot_spec(Derived)
    with pytest.raises(SpecError, match="is not a benchmark"):
        benchmark_spec(SimulatedFranka)


@pytest.mark.parametrize("method", list(METHODS))
def test_a_class_missing_a_method_is_refused_naming_it_and_its_signature(method: str) -> None:
    with pytest.raises(SpecError) as refused:
        declare(methods(**{method: None}))
    assert refused.value.owner == "robot Mine"
    assert refused.value.field == method
    assert f"a robot defines def {method}(self" in refused.value.rule


def test_a_method_taking_other_arguments_is_refused() -> None:
    def act(self: Any) -> None: ...

    with pytest.raises(SpecError, match=r"robot Mine: act: takes 1 argument\(s\) after self, not 0: def act"):
        declare(methods(act=act))

    def move_to(self: Any, pose: str, speed: float) -> None: ...

    with pytest.raises(SpecError, match=r"move_to: takes 1 argument\(s\) after self, not 2"):
        declare(methods(move_to=move_to))

    # Extra parameters with defaults are fine, as they are for a benchmark's methods.
    def stop(self: Any, reason: str = "") -> None: ...

    declare(methods(stop=stop))
    with pytest.raises(SpecError, match="stop: is a plain method of the robot, not a staticmethod"):
        declare(methods(stop=staticmethod(lambda: None)))


@pytest.mark.parametrize(
    ("fields", "field", "rule"),
    [
        ({"shape": "ur5"}, "shape", "the embodiment is 'franka' or 'yam', not 'ur5'"),
        ({"hz": 0}, "hz", "must be above 0"),
        ({"cameras": []}, "cameras", "names at least one camera"),
        ({"cameras": ["Wrist"]}, "cameras['Wrist']", "a camera name is a lowercase letter"),
        ({"cameras": ["wrist", "2nd"]}, "cameras['2nd']", "a camera name is a lowercase letter"),
        ({"cameras": ["wrist", "top", "wrist"]}, "cameras", "names each camera once; repeated: wrist"),
        ({"cameras": "wrist"}, "cameras", "is a list of camera names"),
        ({"action_dim": 0}, "action_dim", "at least 1 number long, not 0"),
        ({"action_dim": 7.5}, "action_dim", "integer"),
    ],
)
def test_a_field_that_breaks_a_rule_is_refused_naming_it(
    fields: dict[str, Any], field: str, rule: str
) -> None:
    with pytest.raises(SpecError) as refused:
        declare(methods(), **fields)
    assert refused.value.field == field
    assert rule in refused.value.rule


# --- the simulated Franka ------------------------------------------------------------------------------


def test_observe_shows_both_cameras_and_the_state(arm: SimulatedFranka) -> None:
    seen = arm.observe()
    assert set(seen) == {"images", "state"}
    assert set(seen["images"]) == set(CAMERAS)
    for camera, image in seen["images"].items():
        assert image.shape == (128, 128, 3) and image.dtype == np.uint8, camera
        assert image.std() > 10, f"{camera} shows a scene, not one colour"
    state = seen["state"]
    assert state["joints"].shape == (JOINTS,) and state["joints"].dtype == np.float32
    assert state["gripper"].shape == (1,) and state["gripper"].dtype == np.float32
    np.testing.assert_allclose(state["joints"], NOMINAL, atol=1e-5)
    assert state["gripper"][0] == pytest.approx(0.0, abs=0.01)  # open at a start pose


def test_the_image_size_is_the_constructors_and_a_closed_robot_refuses() -> None:
    small = SimulatedFranka(image_size=48)
    try:
        assert {image.shape for image in small.observe()["images"].values()} == {(48, 48, 3)}
    finally:
        small.close()
    small.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        small.act(row(NOMINAL))
    with pytest.raises(ValueError, match="image_size"):
        SimulatedFranka(image_size=0)


def test_acting_toward_a_target_moves_the_joints_to_it(arm: SimulatedFranka) -> None:
    target = NOMINAL + OFFSET
    distances = [float(np.abs(joints(arm) - target).max())]
    for _ in range(int(HZ)):  # one second of the robot's time
        arm.act(row(target))
        distances.append(float(np.abs(joints(arm) - target).max()))
    assert distances[1] < distances[0] and distances[3] < distances[0] / 2
    assert distances[-1] < 0.005, distances


def test_each_act_is_one_control_period_of_the_robots_time(arm: SimulatedFranka) -> None:
    before = arm.data.time
    arm.act(row(NOMINAL))
    assert arm.data.time - before == pytest.approx(1.0 / HZ, abs=1e-9)


def test_the_gripper_closes_and_opens_as_commanded(arm: SimulatedFranka) -> None:
    for _ in range(int(HZ)):
        arm.act(row(NOMINAL, gripper=1.0))
    assert arm.observe()["state"]["gripper"][0] > 0.9
    for _ in range(int(HZ)):
        arm.act(row(NOMINAL, gripper=0.0))
    assert arm.observe()["state"]["gripper"][0] < 0.05


def test_move_to_each_start_pose_and_an_unknown_one_is_refused(arm: SimulatedFranka) -> None:
    for pose, positions in POSES.items():
        arm.act(row(NOMINAL + OFFSET))
        arm.move_to(pose)
        np.testing.assert_allclose(joints(arm), positions, atol=1e-5)
    with pytest.raises(ValueError, match="'home'") as refused:
        arm.move_to("home")
    assert "nominal" in str(refused.value) and "droid_reset" in str(refused.value)


def test_a_malformed_action_is_refused(arm: SimulatedFranka) -> None:
    with pytest.raises(ValueError, match="one row of 8 numbers"):
        arm.act(NOMINAL)
    with pytest.raises(ValueError, match="one row of 8 numbers"):
        arm.act(np.stack([row(NOMINAL), row(NOMINAL)]))
    with pytest.raises(ValueError, match="finite"):
        arm.act(row([*NOMINAL[:6], np.nan]))


def test_a_stop_holds_the_arm_until_move_to(arm: SimulatedFranka) -> None:
    start = joints(arm)
    arm.stop()
    for _ in range(int(HZ)):
        arm.act(row(NOMINAL + OFFSET, gripper=1.0))
    seen = arm.observe()["state"]
    np.testing.assert_allclose(seen["joints"], start, atol=1e-4)
    assert seen["gripper"][0] < 0.05  # the hand's command was dropped too
    arm.move_to("nominal")
    for _ in range(int(HZ)):
        arm.act(row(NOMINAL + OFFSET))
    assert np.abs(joints(arm) - (NOMINAL + OFFSET)).max() < 0.005


def test_a_stop_from_another_thread_holds_the_arm_while_the_loop_keeps_acting(arm: SimulatedFranka) -> None:
    moving, stopped = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def stopper() -> None:
        try:
            if moving.wait(DEADLINE):
                arm.stop()
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
        finally:
            stopped.set()

    def target(period: int) -> npt.NDArray[np.float64]:
        # A slow sweep there and back (at most about 0.3 rad/s a joint), as a policy moves the arm.
        return NOMINAL + OFFSET * np.sin(2 * np.pi * period / (4 * HZ))

    thread = threading.Thread(target=stopper, name="stopper")
    thread.start()
    period = 0
    try:
        # The loop acts, as a rig's does, until the stop has been made; the stopper makes it once the arm
        # is under way, while the loop is acting.
        while period < int(HZ) or not stopped.is_set():
            arm.act(row(target(period)))
            period += 1
            if period == int(HZ) // 2:
                moving.set()
            assert period < 100_000, "the stopper never stopped the arm"
    finally:
        moving.set()
        thread.join(DEADLINE)
    assert not failures and not thread.is_alive()
    assert period >= HZ // 2  # it was moving when stopped

    held = joints(arm)
    after = []
    for later in range(2 * int(HZ)):  # two more seconds of actions, each asking it to move on
        arm.act(row(target(period + later)))
        after.append(joints(arm))
    drift = np.abs(np.array(after) - held).max(axis=1)
    # At most the braking of a joint at 0.3 rad/s, then still: the loop's actions were ignored.
    assert drift.max() < 0.02, drift
    assert np.abs(np.diff(after[-int(HZ) :], axis=0)).max() < 1e-4
    far = NOMINAL - OFFSET
    for _ in range(int(HZ)):
        arm.act(row(far))
    assert np.abs(joints(arm) - after[-1]).max() < 1e-4

    arm.move_to("nominal")
    for _ in range(int(HZ)):
        arm.act(row(far))
    assert np.abs(joints(arm) - far).max() < 0.005
