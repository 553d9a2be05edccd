"""`@robot` on a class: a robot adapter, the class a rig process drives at the robot.

    from yardstick.sdk import robot

    @robot(shape="franka", hz=15, cameras=("exterior", "wrist"), action_dim=8)
    class MyFranka:
        def observe(self): return {"images": {camera: uint8 H×W×3}, "state": {name: float32 1-D}}
        def act(self, action): ...        # one action row, applied for one control period (1/hz s)
        def move_to(self, pose): ...      # "nominal" or "droid_reset"; any other name is a ValueError
        def stop(self): ...               # halt and hold, from any thread; act does nothing until move_to
        def close(self): ...

The declaration is read back with `robot_spec(cls)`. A class is refused, when decorated, for a field that
breaks a rule or a method it lacks or that takes other arguments; each refusal is a `SpecError` naming the
field or method and the rule.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

from yardstick.sdk.decorators import _SPEC, _positional, _takes
from yardstick.sdk.errors import SpecError
from yardstick.sdk.specs import validated

_C = TypeVar("_C", bound=type)

# The embodiments a rig plan runs on (the Positronic contract's RigShape, less its "sim").
SHAPES = ("franka", "yam")
# Where the arm starts an episode: the Positronic contract's StartPose names.
START_POSES = ("nominal", "droid_reset")
CAMERA_NAME = re.compile(r"[a-z][a-z0-9_]*")
CAMERA_NAME_RULE = "a lowercase letter, then lowercase letters, digits or '_'"

# {method: (positional arguments after self, its signature as the refusal shows it)}.
METHODS: dict[str, tuple[int, str]] = {
    "observe": (0, 'def observe(self) -> {"images": {camera: uint8 H×W×3}, "state": {name: float32 1-D}}'),
    "act": (1, "def act(self, action) -> None"),
    "move_to": (1, "def move_to(self, pose: str) -> None"),
    "stop": (0, "def stop(self) -> None"),
    "close": (0, "def close(self) -> None"),
}


class RobotSpec(BaseModel):
    """A robot adapter: the embodiment it drives (`shape`), its control rate (`hz`: each `act` plays one
    period of 1/hz s), the cameras its observations carry, and the length of one action row."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    shape: str
    hz: float
    cameras: tuple[str, ...]
    action_dim: int

    @model_validator(mode="after")
    def _rules(self) -> RobotSpec:
        owner = f"robot {self.name}"
        if self.shape not in SHAPES:
            choices = " or ".join(repr(s) for s in SHAPES)
            raise SpecError(owner, "shape", f"the embodiment is {choices}, not {self.shape!r}")
        if not self.hz > 0:
            raise SpecError(owner, "hz", f"the control periods a second must be above 0, not {self.hz!r}")
        if not self.cameras:
            raise SpecError(owner, "cameras", "names at least one camera")
        for camera in self.cameras:
            if not CAMERA_NAME.fullmatch(camera):
                raise SpecError(owner, f"cameras[{camera!r}]", f"a camera name is {CAMERA_NAME_RULE}")
        if len(set(self.cameras)) != len(self.cameras):
            repeated = sorted({c for c in self.cameras if self.cameras.count(c) > 1})
            raise SpecError(owner, "cameras", f"names each camera once; repeated: {', '.join(repeated)}")
        if self.action_dim < 1:
            raise SpecError(
                owner, "action_dim", f"an action row is at least 1 number long, not {self.action_dim}"
            )
        return self


def _check_methods(cls: type, owner: str) -> None:
    """Refuse a class that lacks one of METHODS or whose method takes other arguments."""
    for method, (count, signature) in METHODS.items():
        # Looked up without binding, so that a staticmethod or a property is seen for what it is.
        member = inspect.getattr_static(cls, method, None)
        if member is None:
            raise SpecError(owner, method, f"a robot defines {signature}")
        if not inspect.isfunction(member):
            raise SpecError(
                owner, method, f"is a plain method of the robot, not a {type(member).__name__}: {signature}"
            )
        if not _takes(member, count):
            raise SpecError(
                owner, method, f"takes {count} argument(s) after self, not {_positional(member)}: {signature}"
            )


def robot(
    *,
    shape: str,
    hz: float,
    cameras: Iterable[str],
    action_dim: int,
    name: str | None = None,
) -> Callable[[_C], _C]:
    """Declare a class a robot adapter for the embodiment `shape` ("franka" or "yam"), acting at `hz`, its
    observations carrying `cameras`, each action row `action_dim` numbers long."""
    # A string is iterable too: cameras="wrist" would otherwise declare cameras w, r, i, s and t.
    if isinstance(cameras, str):
        raise SpecError(
            f"robot {name or '?'}", "cameras", f"is a list of camera names: cameras=[{cameras!r}]"
        )
    chosen = tuple(cameras)

    def decorate(cls: _C) -> _C:
        if not isinstance(cls, type):
            raise SpecError(f"robot {name or '?'}", "@robot", f"goes on a class, not a {type(cls).__name__}")
        owner = f"robot {name or cls.__name__}"
        spec = validated(
            RobotSpec,
            name=name or cls.__name__,
            shape=shape,
            hz=hz,
            cameras=chosen,
            action_dim=action_dim,
        )
        _check_methods(cls, owner)
        setattr(cls, _SPEC, spec)
        return cls

    return decorate


def robot_spec(cls: type) -> RobotSpec:
    """The declaration `cls` was decorated with. Refuses a class that is not a robot (a subclass declares
    itself again) and one that has since lost a method a robot defines."""
    owner = f"class {getattr(cls, '__qualname__', repr(cls))}"
    spec = getattr(cls, "__dict__", {}).get(_SPEC)
    if not isinstance(spec, RobotSpec):
        raise SpecError(
            owner,
            "@robot",
            "is not a robot: decorate it with @robot(shape=..., hz=..., cameras=..., action_dim=...)",
        )
    _check_methods(cls, f"robot {spec.name}")
    return spec
