"""The secret part of the keys a Sequences user names by their last four (robot and planner keys): letters
and digits only, so the real CLI takes any last four as a name (it refuses one beginning with '-' or '_',
which a URL-safe token drew one time in sixteen: a revocation by last four then failed before it was sent)."""

from __future__ import annotations

import re
from typing import Any

from yardstick.core import admin, planners, robot_keys
from yardstick.core.keys import random_body
from yardstick.store.models import Hosted
from yardstick.store.states import HostedKind

# The Sequences CLI's rule for a name it puts in a path (sequence_ai/_core/names.py): starts with a letter or
# a digit.
CLI_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:~-]{0,127}")


def test_every_last_four_of_a_key_body_is_a_name_the_cli_takes() -> None:
    bodies = [random_body() for _ in range(4000)]
    assert all(re.fullmatch(r"[A-Za-z0-9]{43}", body) for body in bodies)
    assert all(CLI_NAME.fullmatch(body[-4:]) for body in bodies)
    assert len(set(bodies)) == len(bodies)
    # All 62 characters are drawn (a body's 43 of them carry 256 bits).
    assert len(set("".join(bodies))) == 62


def test_robot_and_planner_keys_minted_have_last_fours_the_cli_takes(migrated_db: Any) -> None:
    """200 keys of each kind, minted as the routes mint them: a URL-safe body would give one whose last four
    the CLI refuses with all but 0.2% chance."""
    with migrated_db.writing() as session:
        org = admin.create_org(session, "acme")
        policy = Hosted(org_id=org.id, kind=HostedKind.POLICY, name="arm")
        planner = Hosted(org_id=org.id, kind=HostedKind.POLICY, name="site")  # a planner is a deployment
        session.add_all([policy, planner])
        session.flush()
        fours = [robot_keys.mint(session, policy).plaintext[-4:] for _ in range(200)]
        fours += [planners.mint(session, planner, "ipad", "device", None)[1] or "" for _ in range(200)]
    assert all(len(four) >= 4 and CLI_NAME.fullmatch(four[-4:]) for four in fours), fours
