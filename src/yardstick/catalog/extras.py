"""Which built-ins need a simulator, which of our extras installs it, and the refusal when it is missing.

`pip install yardstick` is the light install: it serves a user's policy, plays a user's benchmark and runs
the platform, and reads every built-in's declaration (tasks, seeds, limits: the platform's catalogue is
seeded from them), but cannot build a built-in whose simulator comes with an extra. Building one there is
refused before anything starts, naming the extra to install, rather than failing each episode with an
ImportError.

A catalog module whose classes need a simulator is one line of `NEEDS`; its classes (and a user's classes
derived from them) are then checked wherever the engine builds them. A module that needs its simulator to
read its declarations (Gymnasium's classes are made from its registry) calls `require` before it imports.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from yardstick.sdk.errors import AuthoringError


@dataclass(frozen=True)
class Simulator:
    module: str  # the top-level module the built-ins import (looked for, never imported, to check)
    extra: str  # the extra of ours whose requirements install it
    name: str  # as people call it


# The catalog's modules whose classes need a simulator to be built, each with that simulator.
NEEDS: dict[str, Simulator] = {
    "yardstick.catalog.metaworld": Simulator("metaworld", "sim", "Meta-World"),
    "yardstick.catalog.gym": Simulator("gymnasium", "sim", "Gymnasium"),
}


class MissingExtra(AuthoringError):
    """A built-in whose simulator this install lacks. The caller's to fix, by installing the extra."""

    def __init__(self, what: str, simulator: Simulator) -> None:
        self.simulator = simulator
        super().__init__(
            f"{what} needs {simulator.name} (the Python module {simulator.module}), which is not installed "
            f"here: pip install 'yardstick[{simulator.extra}]'"
        )


def simulator_of(cls: type) -> Simulator | None:
    """The simulator building `cls` needs: its own module's, or that of a built-in it derives from."""
    for klass in cls.__mro__:
        found = NEEDS.get(klass.__module__)
        if found is not None:
            return found
    return None


def installed(simulator: Simulator) -> bool:
    return importlib.util.find_spec(simulator.module) is not None


def require(simulator: Simulator, what: str) -> None:
    """Refuse (MissingExtra, naming `what` and the extra) when `simulator` is not installed here."""
    if not installed(simulator):
        raise MissingExtra(what, simulator)


def require_for(cls: type, what: str) -> None:
    """Refuse building `cls` when the simulator it needs is not installed; a class that needs none passes."""
    simulator = simulator_of(cls)
    if simulator is not None:
        require(simulator, what)
