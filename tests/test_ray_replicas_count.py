"""How many replicas a deployment gets on a Ray cluster: one a `seats_per_worker` episode actors (a CPU
each), within its scaling's minimum (at least one) and maximum, as `seq policy set` or the deploy said."""

from __future__ import annotations

import pytest

from yardstick.core.act_scaling import Scaling, scaling_of
from yardstick.worker.ray_replicas import count


@pytest.mark.parametrize(
    ("scaling", "cpus", "replicas"),
    [
        (Scaling(), 2, 1),  # eight seats a replica: two actors share one
        (Scaling(), 17, 3),
        (Scaling(seats_per_worker=1), 2, 2),  # one session a replica
        (Scaling(seats_per_worker=1, max_workers=1), 2, 1),  # max_gpus=1 holds it to one
        (Scaling(min_workers=3), 2, 3),  # min_containers: at least that many, doubled up on the nodes
        (Scaling(min_workers=5, max_workers=4), 2, 4),  # never past the maximum
        (Scaling(), 0, 1),  # a cluster that reports no CPU still gets one
    ],
)
def test_replicas_follow_the_deployments_scaling(scaling: Scaling, cpus: int, replicas: int) -> None:
    assert count(scaling, cpus) == replicas


def test_the_scaling_read_is_the_deploys_under_the_settings_set_since() -> None:
    declared = {"autoscaler": {"min_containers": 2}, "concurrency": {"sizes": [1, 2]}}
    assert count(scaling_of({}, declared), 8) == 4  # two seats a replica, eight actors
    assert count(scaling_of({"max_gpus": 3}, declared), 8) == 3
    assert count(scaling_of({"min_workers": 6}, declared), 8) == 6
