"""The refusal of a light install names an extra that really installs the simulator it lacks (the refusal
itself is played in a light install by tests/test_installed.py)."""

from __future__ import annotations

import importlib.metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from yardstick.catalog import resolve, resolve_to_play
from yardstick.catalog.extras import LIBERO, METAWORLD, NEEDS, Simulator, simulator_of
from yardstick.distribution import DISTRIBUTION
from yardstick.sdk.load import load_object


def _distributions_of_extra(extra: str) -> set[str]:
    requirements = [Requirement(text) for text in importlib.metadata.requires(DISTRIBUTION) or []]
    return {
        canonicalize_name(r.name)
        for r in requirements
        if r.marker is not None and r.marker.evaluate({"extra": extra})
    }


SIMULATORS = sorted(set(NEEDS.values()), key=lambda simulator: simulator.module)


@pytest.mark.parametrize("simulator", SIMULATORS, ids=[simulator.module for simulator in SIMULATORS])
def test_each_simulator_is_installed_by_the_extra_its_refusal_names(simulator: Simulator) -> None:
    # The dev environment holds every extra (make env), so what provides the module can be looked up.
    providers = importlib.metadata.packages_distributions().get(simulator.module)
    assert providers, f"{simulator.module} is not installed here; `make env` installs every extra"
    offered = _distributions_of_extra(simulator.extra)
    assert offered, f"yardstick has no extra {simulator.extra!r}"
    assert {canonicalize_name(p) for p in providers} & offered, (
        f"{simulator.module} comes with {providers}, which {DISTRIBUTION}[{simulator.extra}] does not require"
    )


@pytest.mark.parametrize("reference", list(NEEDS))
def test_each_class_the_table_names_exists(reference: str) -> None:
    # A class renamed or moved would drop out of the check silently; here it fails instead.
    found = load_object(reference)
    assert isinstance(found, type) and simulator_of(found) is NEEDS[reference]


def test_built_ins_and_the_classes_derived_from_them_are_known_by_their_simulator() -> None:
    mt10 = resolve("benchmark", "mt10")
    assert simulator_of(mt10) is METAWORLD and simulator_of(resolve("policy", "expert")) is METAWORLD
    derived = type("MyMT10", (mt10,), {"__module__": "my_lab.benchmarks"})
    assert simulator_of(derived) is METAWORLD
    assert simulator_of(resolve("benchmark", "libero_10")) is LIBERO
    assert simulator_of(resolve("policy", "random")) is None  # plays anywhere
    assert simulator_of(resolve("policy", "heuristic", "pusht")) is None  # needs no simulator of its own


def test_where_the_simulator_is_installed_the_built_in_resolves_to_play() -> None:
    assert resolve_to_play("benchmark", "mt10") is resolve("benchmark", "mt10")
