"""Yardstick's own paths beside the Positronic contract's (which `platform_client.routes` writes once): what a
Yardstick client may ask that the contract has no word for. Each is written here once, for the route and for
our CLI."""

from __future__ import annotations

from typing import Final

# What Yardstick knows of a submission beside the contract's view: where its endpoints stand on their
# policies' checkpoint curves (`core.checkpoints`), and the rounds of a run that stops by a rule.
SUBMISSION_DETAILS: Final = "/yardstick/v1/submissions/details"
# A plan filed with a rule that stops it early (`store.rounds`): {"plan": EvalPlan, "stopping": {...}}.
SUBMISSIONS_UNTIL: Final = "/yardstick/v1/submissions/until"
# A board's pairwise ranking and its checkpoint curves (`core.pairwise`, `core.checkpoints`): the pages' data,
# for a tenant board too (with a member's key), as `rankings.get` is.
BOARD_PAIRWISE: Final = "/yardstick/v1/boards/pairwise"
BOARD_CURVES: Final = "/yardstick/v1/boards/curves"
# A rig's own calls (`yardstick rig run`, with a rig key): say it is online, claim the run it plays next, mark
# an episode begun, and land its recorded folder (a tar, the body).
RIG_HELLO: Final = "/yardstick/v1/rig/hello"
RIG_CLAIM: Final = "/yardstick/v1/rig/claim"
RIG_BEGIN: Final = "/yardstick/v1/rig/episodes/begin"
RIG_LAND: Final = "/yardstick/v1/rig/episodes/land"
# The header a rig process names itself by: a token of its own, new each time the process starts.
RIG_SESSION_HEADER: Final = "X-Yardstick-Rig-Session"
