"""The core's run targets as themselves, no door or HTTP between: an endpoint target read back from what a
run's row keeps is the target that was filed, and a hosted version's benchmark reference names it alone."""

from __future__ import annotations

import json

import pytest

from yardstick.core.runs import EndpointTarget, hosted_ref, hosted_version
from yardstick.store.states import TargetKind


@pytest.mark.parametrize(
    "target",
    [
        EndpointTarget("a", TargetKind.SERVED, "websocket", spec="expert", params={"gain": 2.0}),
        EndpointTarget("b", TargetKind.HOSTED, "websocket", spec="7", benchmark_params={"noise": 0.1}),
        EndpointTarget(
            "c", TargetKind.REMOTE, "grpc", address={"host": "gpu.lab", "port": 443, "path": "/api/v1"}
        ),
    ],
)
def test_an_endpoint_target_round_trips_through_a_runs_row(target: EndpointTarget) -> None:
    kept = json.loads(json.dumps(target.as_json()))  # as the JSON column keeps it
    assert EndpointTarget.from_json(target.name, kept) == target


def test_a_hosted_reference_names_its_version_and_nothing_else_does() -> None:
    assert hosted_version(hosted_ref(42)) == 42
    for other in ("mt10", "hosted:", "hosted:x", "gym:CartPole-v1", "/path/bench.py:Bench"):
        assert hosted_version(other) is None
