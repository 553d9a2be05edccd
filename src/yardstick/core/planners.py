"""Planners: deployments that plan for the robots of the policies they name, and for planners below them.

A planner is deployed as a policy is (`@seq.planner(members=[...])`, its version declaring `planner`), and
answers no robot's act. While a robot is connected anywhere below it, the platform wants a worker for it as
it wants one for a policy a robot connects to (`core.act_plane`); that worker runs its rounds
(`worker/act_server/planning.py`). What a round reads is kept here: what was observed into the planner and
what the planner above wrote for it (`PlannerRecord`, numbered as they come, so a round hands only those
past the last it handed), and the planner's own record between rounds (`PlannerState`).

The keys a planner holds for its members (`seq planner key add PLANNER --member NAME`): a device's (a site's
iPad) is shown once and may only observe into that planner; a deployed member's is the platform's, never
shown. Members are checked at deploy as the contract says: deployments of the same org, each in no other
planner, no loop, at most `MOST_LAYERS` planners above a policy.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from yardstick.core.hosting import serving_policies
from yardstick.core.keys import random_body
from yardstick.core.refusals import Refusal, RefusalKind, bad_request
from yardstick.store.models import Hosted, HostedVersion, PlannerKey, PlannerRecord, PlannerState, utcnow
from yardstick.store.states import HostedKind

__all__ = [
    "KEPT",
    "KEY_MARK",
    "MOST_LAYERS",
    "PlannerCaller",
    "PlannerSpec",
    "authenticate",
    "check_members",
    "find_keys",
    "is_planner_key",
    "keys_of",
    "mint",
    "policies_below",
    "record",
    "records_after",
    "serving",
    "spec_of",
]

KEY_MARK: Final = "seq_planner_"
PREFIX_LEN: Final = 21  # the mark and 9 characters: enough to find the row, too few to matter
# The newest records a planner keeps, and hands a round at most.
KEPT: Final = 256
MOST_LAYERS: Final = 3
DEFAULT_EVERY_S: Final = 2.0


@dataclass(frozen=True)
class PlannerSpec:
    members: tuple[str, ...]
    every_s: float
    wake_on: tuple[str, ...]


def spec_of(version: HostedVersion) -> PlannerSpec | None:
    """The planner a version declares — as its build found it in the class, else as its deploy said — or
    None for a policy."""
    checked = ((version.checked or {}).get("declaration") or {}).get("planner")
    declared = (version.declared or {}).get("planner")
    found = checked if isinstance(checked, dict) else declared if isinstance(declared, dict) else None
    if found is None or not found.get("members"):
        return None
    every = found.get("every_s") or (version.declared or {}).get("plan_every_s") or DEFAULT_EVERY_S
    return PlannerSpec(
        tuple(str(m) for m in found["members"]), float(every), tuple(found.get("wake_on") or ())
    )


def _deployed(session: Session, org_id: int) -> dict[str, tuple[Hosted, HostedVersion]]:
    """The org's policies and planners by name, each with its newest version."""
    rows = session.execute(
        select(Hosted, HostedVersion)
        .join(HostedVersion, HostedVersion.hosted_id == Hosted.id)
        .where(Hosted.org_id == org_id, Hosted.kind == HostedKind.POLICY, Hosted.removed_at.is_(None))
        .order_by(HostedVersion.number)
    ).all()
    return {hosted.name: (hosted, version) for hosted, version in rows}


def serving(session: Session, org_id: int) -> dict[str, tuple[Hosted, HostedVersion]]:
    """The org's policies and planners that serve, by name, each with its serving version."""
    return {hosted.name: (hosted, version) for hosted, version in serving_policies(session, org_id).values()}


def check_members(session: Session, org_id: int, name: str, members: list[str]) -> None:
    """Refuse a planner `name` whose `members` are not deployments of the org, are in another planner, make
    a loop, or stack more than `MOST_LAYERS` planners above a policy."""
    deployed = _deployed(session, org_id)
    planned = {n: spec_of(v) for n, (_, v) in deployed.items()}
    for member in members:
        if member == name:
            raise bad_request(f"policy.planner.members: {name!r} is the planner itself", field="members")
        if member not in deployed:
            raise bad_request(
                f"policy.planner.members: no deployment {member!r} in your organization: deploy each member "
                "before the planner that names it",
                field="members",
            )
        for other, spec in planned.items():
            if other != name and spec is not None and member in spec.members:
                raise Refusal(
                    RefusalKind.CONFLICT,
                    f"policy.planner.members: {member!r} is planned by {other!r} already: a deployment is "
                    "in one planner at most",
                )
    planned[name] = PlannerSpec(tuple(members), DEFAULT_EVERY_S, ())

    def layers(node: str, path: tuple[str, ...]) -> int:
        if node in path:
            raise bad_request(
                f"policy.planner.members: a loop, {' → '.join((*path, node))}: a planner plans for those "
                "below it",
                field="members",
            )
        spec = planned.get(node)
        if spec is None:
            return 0
        return 1 + max((layers(m, (*path, node)) for m in spec.members), default=0)

    if layers(name, ()) > MOST_LAYERS:
        raise bad_request(
            f"policy.planner.members: more than {MOST_LAYERS} planners above a policy", field="members"
        )


def policies_below(planner: Hosted, ready: dict[str, tuple[Hosted, HostedVersion]]) -> list[int]:
    """The ids of the policies anywhere below `planner` (through the planners it names), among `ready`
    (`serving`)."""
    found: list[int] = []
    names, seen = [planner.name], {planner.name}
    while names:
        name = names.pop()
        spec = spec_of(ready[name][1]) if name in ready else None
        if spec is None:
            if name in ready and name != planner.name:
                found.append(ready[name][0].id)
            continue
        fresh = [m for m in spec.members if m not in seen]
        seen.update(fresh)
        names.extend(fresh)
    return found


# --- what a round reads --------------------------------------------------------------------------------


def record(session: Session, planner_id: int, kind: str, by: str | None, data: Any) -> int:
    """Keep one observation or plan for the planner's next round; its number. The oldest past `KEPT` go."""
    row = PlannerRecord(planner_id=planner_id, kind=kind, by=by, data=data, at=utcnow())
    session.add(row)
    session.flush()
    oldest_kept = session.execute(
        select(PlannerRecord.id)
        .where(PlannerRecord.planner_id == planner_id)
        .order_by(PlannerRecord.id.desc())
        .offset(KEPT - 1)
        .limit(1)
    ).scalar_one_or_none()
    if oldest_kept is not None:
        session.execute(
            delete(PlannerRecord).where(
                PlannerRecord.planner_id == planner_id, PlannerRecord.id < oldest_kept
            )
        )
    return int(row.id)


def records_after(session: Session, planner_id: int, seen: int) -> list[PlannerRecord]:
    """The planner's records past number `seen`, oldest first (the newest `KEPT` at most)."""
    rows = session.execute(
        select(PlannerRecord)
        .where(PlannerRecord.planner_id == planner_id, PlannerRecord.id > seen)
        .order_by(PlannerRecord.id.desc())
        .limit(KEPT)
    ).scalars()
    return sorted(rows, key=lambda r: r.id)


def newest_record(session: Session, planner_id: int) -> int:
    found = session.execute(
        select(func.max(PlannerRecord.id)).where(PlannerRecord.planner_id == planner_id)
    ).scalar_one_or_none()
    return int(found or 0)


def state_of(session: Session, planner_id: int) -> PlannerState:
    state = session.get(PlannerState, planner_id)
    if state is None:
        state = PlannerState(planner_id=planner_id, state={}, seen=0)
        session.add(state)
        session.flush()
    return state


# --- keys ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannerCaller:
    """A device that presented a live planner key: the one planner it may observe into, and its name."""

    key_id: int
    org_id: int
    planner_id: int
    name: str


def _digest(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def is_planner_key(bearer: str) -> bool:
    return bearer.startswith(KEY_MARK)


def member_kind(session: Session, planner: Hosted, version: HostedVersion, member: str) -> str:
    """ "policy" or "planner" for a member the planner names, else "device" (a site's iPad, an operator)."""
    spec = spec_of(version)
    if spec is None or member not in spec.members:
        return "device"
    found = _deployed(session, planner.org_id).get(member)
    return "planner" if found is not None and spec_of(found[1]) is not None else "policy"


def mint(
    session: Session, planner: Hosted, member: str, kind: str, name: str | None
) -> tuple[PlannerKey, str | None]:
    """A new key to `member` of `planner`: its plaintext for a device (the only time it exists), None for
    a deployed member (the platform holds it)."""
    plaintext = KEY_MARK + random_body()
    row = PlannerKey(
        org_id=planner.org_id,
        planner_id=planner.id,
        member=member,
        member_kind=kind,
        name=name,
        prefix=plaintext[:PREFIX_LEN],
        digest=_digest(plaintext),
        last_four=plaintext[-4:],
    )
    session.add(row)
    session.flush()
    return row, plaintext if kind == "device" else None


def authenticate(session: Session, plaintext: str) -> PlannerCaller | None:
    """The device whose live planner key `plaintext` is (its last use noted); None for any other string."""
    if not is_planner_key(plaintext) or len(plaintext) < PREFIX_LEN + 8:
        return None
    row = session.execute(
        select(PlannerKey).where(PlannerKey.prefix == plaintext[:PREFIX_LEN])
    ).scalar_one_or_none()
    if row is None or row.revoked_at is not None or not hmac.compare_digest(row.digest, _digest(plaintext)):
        return None
    row.last_used_at = utcnow()
    return PlannerCaller(row.id, row.org_id, row.planner_id, row.name or row.member)


def keys_of(session: Session, planner_id: int) -> list[PlannerKey]:
    """A planner's live keys, oldest first."""
    return list(
        session.execute(
            select(PlannerKey)
            .where(PlannerKey.planner_id == planner_id, PlannerKey.revoked_at.is_(None))
            .order_by(PlannerKey.created_at, PlannerKey.id)
        ).scalars()
    )


def find_keys(session: Session, planner_id: int, ref: str) -> list[PlannerKey]:
    """The planner's live keys `ref` names: by id (or its first characters, as a list shows it), or by last
    four."""
    live = keys_of(session, planner_id)
    by_four = [k for k in live if k.last_four == ref]
    by_id = [k for k in live if ref.isdigit() and len(ref) > 4 and str(k.id).startswith(ref)]
    return by_id or by_four
