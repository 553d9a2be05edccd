"""What a rig plan must be before it is filed: on a robot shape its org has a rig of, its policies reached
the way a rig reaches them.

A rig dials each policy from the robot's own network, so an endpoint of a rig plan is `remote` (the lab's
policy server, at an address the rig can reach). A `served` or `image` endpoint runs inside the platform's
boxes, which have no network and which no rig can reach: refused by name, not filed to wait forever.
"""

from __future__ import annotations

from yardstick.core.platform import Platform
from yardstick.core.refusals import bad_request
from yardstick.core.runs import RunPlan
from yardstick.store.models import Org
from yardstick.store.states import TargetKind


def check(platform: Platform, org: Org, plan: RunPlan) -> None:
    """Refuse a rig plan this install cannot play for `org`; a simulation passes unchanged."""
    if plan.rig_shape is None:
        return
    with platform.db.reading() as session:
        has_rig = platform.rigs.registered(session, org.id, plan.rig_shape)
    if not has_rig:
        raise bad_request(
            f"rig_shape: organisation {org.slug!r} has no {plan.rig_shape} rig on this platform, so nothing "
            f"could play the plan: an admin adds one with `yardstick admin rig add --org {org.slug} "
            f"--shape {plan.rig_shape} --name NAME`"
        )
    unreachable = sorted(
        name for name, target in plan.endpoints.items() if target.kind is not TargetKind.REMOTE
    )
    if unreachable:
        raise bad_request(
            f"endpoints: {', '.join(repr(n) for n in unreachable)} of a rig plan must be remote: a rig dials "
            "each policy from the lab's network, and a served or image endpoint runs in the platform's own "
            "boxes, which no rig can reach"
        )
