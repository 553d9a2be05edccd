"""The refusal of a light install names an extra that really installs the simulator it lacks (the refusal
itself is played in a light install by tests/test_installed.py)."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from yardstick.catalog import resolve, resolve_to_play
from yardstick.catalog.extras import NEEDS, Simulator, simulator_of


def _distributions_of_extra(extra: str) -> set[str]:
    requirements = [Requirement(text) for text in importlib.metadata.requires("yardstick") or []]
    return {
        canonicalize_name(r.name)
        for r in requirements
        if r.marker is not None and r.marker.evaluate({"extra": extra})
    }


@pytest.mark.parametrize(("catalog_module", "simulator"), NEEDS.items(), ids=list(NEEDS))
def test_each_simulator_is_installed_by_the_extra_its_refusal_names(
    catalog_module: str, simulator: Simulator
) -> None:
    assert importlib.util.find_spec(catalog_module) is not None, f"{catalog_module} is not a module"
    # The dev environment holds every extra (make env), so what provides the module can be looked up.
    providers = importlib.metadata.packages_distributions().get(simulator.module)
    assert providers, f"{simulator.module} is not installed here; `make env` installs every extra"
    offered = _distributions_of_extra(simulator.extra)
    assert offered, f"yardstick has no extra {simulator.extra!r}"
    assert {canonicalize_name(p) for p in providers} & offered, (
        f"{simulator.module} comes with {providers}, which yardstick[{simulator.extra}] does not require"
    )


def test_built_ins_and_the_classes_derived_from_them_are_known_by_their_simulator() -> None:
    mt10 = resolve("benchmark", "mt10")
    assert simulator_of(mt10) == NEEDS["yardstick.catalog.metaworld"]
    assert simulator_of(resolve("policy", "expert")) == NEEDS["yardstick.catalog.metaworld"]
    derived = type("MyMT10", (mt10,), {"__module__": "my_lab.benchmarks"})
    assert simulator_of(derived) == NEEDS["yardstick.catalog.metaworld"]
    assert simulator_of(resolve("policy", "random")) is None  # plays anywhere


def test_where_the_simulator_is_installed_the_built_in_resolves_to_play() -> None:
    assert resolve_to_play("benchmark", "mt10") is resolve("benchmark", "mt10")
