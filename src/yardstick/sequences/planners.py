"""Planners on the Sequences door: the keys a planner holds for its members (`seq planner key add | list |
revoke`) and what someone on a site observes into it (`sequence_ai.planner(name).observe(data)`).

A planner is named as every deployment is, in the caller's org; a name that is a policy is refused saying
so. An observe comes with a device's planner key (that planner alone) or the account's own key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from yardstick.core import planners
from yardstick.core.platform import Platform
from yardstick.core.refusals import Refusal, RefusalKind, bad_request, not_found, unauthenticated
from yardstick.core.runs import org_for
from yardstick.http.auth import Who, bearer, caller
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat
from yardstick.sequences import paths
from yardstick.sequences.errors import SEQUENCES
from yardstick.sequences.robots import one_named
from yardstick.store.models import Hosted, HostedVersion, PlannerKey, utcnow
from yardstick.store.states import HostedKind

__all__ = ["router"]

router = door_router(SEQUENCES, tags=["sequences: planners"])
# The most an observation may hold, as JSON: what a site says, not a dataset.
MOST_OBSERVED_BYTES: Final = 256 * 1024


class KeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    member: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    name: str | None = Field(default=None, min_length=1, max_length=64)


class ObserveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    data: Any = None


def _planner(plat: Platform, org_id: int, name: str) -> tuple[Hosted, HostedVersion]:
    ready = plat.hosting.ready(org_id, HostedKind.POLICY, name)
    if ready is None:
        raise not_found(f"no planner {name!r}: `seq policy ls` lists your deployments, planners among them")
    if planners.spec_of(ready[1]) is None:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"{name!r} is a policy, not a planner: a planner is deployed from a @seq.planner(members=[...]) "
            "class, and holds the keys of its members",
        )
    return ready


def _shown(key: PlannerKey) -> dict[str, Any]:
    return {
        "key_id": str(key.id),
        "name": key.name,
        "last_four": key.last_four,
        "member": key.member,
        "member_kind": key.member_kind,
        "created_at": key.created_at.isoformat(),
        "last_used_at": key.last_used_at.isoformat() if key.last_used_at else None,
    }


@router.post(paths.PLANNER_KEYS, status_code=201, responses=refusals(401, 404, 409))
def add_key(name: str, request_body: KeyRequest, who: Who, plat: Plat) -> JSONResponse:
    """A new key to a member of the planner: a device's shown this once, a deployed member's held here."""
    hosted, version = _planner(plat, org_for(who, None).id, name)
    with plat.db.writing() as session:
        kind = planners.member_kind(session, hosted, version, request_body.member)
        key, plaintext = planners.mint(session, hosted, request_body.member, kind, request_body.name)
        shown = {**_shown(key), "key": plaintext}
    return JSONResponse({"planner_key": shown}, status_code=201)


@router.get(paths.PLANNER_KEYS, responses=refusals(401, 404, 409))
def list_keys(name: str, who: Who, plat: Plat) -> JSONResponse:
    """The planner's live keys, never a key itself."""
    hosted, _ = _planner(plat, org_for(who, None).id, name)
    with plat.db.reading() as session:
        return JSONResponse({"data": [_shown(k) for k in planners.keys_of(session, hosted.id)]})


@router.delete(paths.PLANNER_KEY, responses=refusals(401, 404, 409))
def revoke_key(name: str, ref: str, who: Who, plat: Plat) -> JSONResponse:
    """Revoke one of the planner's keys, named by its id (or the start of it) or its last four."""
    ref = ref.lstrip("…").strip()
    if not ref:
        raise bad_request("ref: a planner key's id or its last four (seq planner key list)", field="ref")
    hosted, _ = _planner(plat, org_for(who, None).id, name)
    with plat.db.writing() as session:
        found = planners.find_keys(session, hosted.id, ref)
        missing = f"no live key {ref!r} of {name}: `seq planner key list {name}` lists them"
        key = one_named(found, ref, "planner keys", missing)
        key.revoked_at = utcnow()
        shown = _shown(key)
    return JSONResponse({"revoked": shown})


@dataclass(frozen=True)
class Observer:
    """Who observes into a planner: a device's planner key (its one planner), or an account's org."""

    org_id: int
    planner_id: int | None
    by: str


async def observer(request: Request) -> Observer:
    key = bearer(request)
    if key and planners.is_planner_key(key):
        platform: Platform = request.app.state.platform
        with platform.db.writing() as session:
            device = planners.authenticate(session, key)
        if device is None:
            raise unauthenticated(
                "this planner key is not live: revoked, or never issued (seq planner key list)"
            )
        return Observer(device.org_id, device.planner_id, device.name)
    found = await caller(request)
    return Observer(org_for(found, None).id, None, found.login)


@router.post(paths.PLANNER_OBSERVE, responses=refusals(400, 401, 403, 404, 409))
def observe(
    name: str, request_body: ObserveRequest, who: Annotated[Observer, Depends(observer)], plat: Plat
) -> JSONResponse:
    """Add one thing to the planner's record, which its next plan reads in group.state["seq.observations"];
    its number back."""
    hosted, _ = _planner(plat, who.org_id, name)
    if who.planner_id is not None and who.planner_id != hosted.id:
        raise Refusal(RefusalKind.FORBIDDEN, f"this planner key says into its own planner only, not {name!r}")
    size = len(ObserveRequest(data=request_body.data).model_dump_json())
    if size > MOST_OBSERVED_BYTES:
        raise bad_request(
            f"data: {size} bytes as JSON, more than an observation holds ({MOST_OBSERVED_BYTES})",
            field="data",
        )
    with plat.db.writing() as session:
        number = planners.record(session, hosted.id, "observation", who.by, request_body.data)
    return JSONResponse({"id": number})
