"""Robot keys (`seq robot add | list | revoke`), a robot's labels of its episodes (`policy.label`) and the
captured field data they label (`seq policy data export`), on the Sequences door."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Protocol, TypeVar

from fastapi import Query
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from yardstick.core import robot_keys
from yardstick.core.refusals import Listed, Refusal, RefusalKind, bad_request, not_found
from yardstick.core.runs import org_for
from yardstick.http.auth import Who
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat
from yardstick.sequences import paths
from yardstick.sequences.act_routes import ActWho, deployment_for
from yardstick.sequences.errors import SEQUENCES
from yardstick.store.models import ActSeat, Hosted, RobotKey
from yardstick.store.states import HostedKind

__all__ = ["router"]

router = door_router(SEQUENCES, tags=["sequences: robots on a deployment"])
KIND = "robot_develop"  # this install keeps no dev and production policies apart: every key is a develop one


class LabelRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    success: bool
    notes: str = Field(default="", max_length=4000)


def _deployment(plat: Plat, who: Who, name: str) -> Hosted:
    org = org_for(who, None)
    found = plat.hosting.ready(org.id, HostedKind.POLICY, name)
    if found is None:
        with plat.db.reading() as session:
            hosted = session.execute(
                select(Hosted).where(
                    Hosted.org_id == org.id,
                    Hosted.kind == HostedKind.POLICY,
                    Hosted.name == name,
                    Hosted.removed_at.is_(None),
                )
            ).scalar_one_or_none()
        if hosted is None:
            raise not_found(f"no deployment {name!r}: `seq policy ls` lists yours")
        return hosted
    return found[0]


def _shown(key: RobotKey, deployment: str, connections: Sequence[ActSeat] = ()) -> dict[str, Any]:
    return {
        "api_key_id": str(key.id),
        "id": str(key.id),
        "last_four": key.last_four,
        "deployment": deployment,
        "role": "act",
        "kind": KIND,
        "created_at": key.created_at.isoformat(),
        "connections": [
            {"session": seat.session, "since": seat.created_at.isoformat()} for seat in connections
        ],
    }


@router.post(paths.DEPLOYMENT_ROBOTS, status_code=201, responses=refusals(401, 404))
def add_robot(name: str, who: Who, plat: Plat) -> JSONResponse:
    """A new robot key to the deployment, its plaintext shown this once."""
    hosted = _deployment(plat, who, name)
    with plat.db.writing() as session:
        minted = robot_keys.mint(session, hosted)
        key = session.get(RobotKey, minted.id)
        assert key is not None  # just minted
        shown = _shown(key, hosted.name)
    return JSONResponse({"robot": {**shown, "key": minted.plaintext}}, status_code=201)


@router.get(paths.ROBOTS, responses=refusals(401))
def list_robots(
    who: Who,
    plat: Plat,
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
    cursor: Annotated[str | None, Query(max_length=64)] = None,
) -> JSONResponse:
    """The account's live robot keys, each with its deployment and the robots connected with it now."""
    with plat.db.reading() as session:
        rows = robot_keys.listed(session, who.org_ids)
    start = int(cursor) if cursor and cursor.isdigit() else 0
    page = rows[start : start + limit]
    following = str(start + limit) if start + limit < len(rows) else None
    return JSONResponse(
        {"data": [_shown(key, hosted.name, seats) for key, hosted, seats in page], "next_cursor": following}
    )


@router.delete(paths.ROBOT, responses=refusals(401, 404, 409))
def revoke_robot(ref: str, who: Who, plat: Plat) -> JSONResponse:
    """Revoke a robot key named by its id or its last four: refused at its robot's next call, its seats
    given back."""
    ref = ref.lstrip("…").strip()
    if not ref:
        raise bad_request("ref: a robot key's id or its last four (seq robot list)", field="ref")
    with plat.db.writing() as session:
        found = robot_keys.find(session, who.org_ids, ref)
        key = one_named(found, ref, "robot keys", f"no live robot key {ref!r}: `seq robot list` lists yours")
        robot_keys.revoke(session, key)
        shown = {"id": str(key.id), "last_four": key.last_four, "kind": KIND}
    return JSONResponse({"revoked": shown})


class NamedKey(Protocol):
    id: int
    last_four: str


_K = TypeVar("_K", bound=NamedKey)


def one_named(found: Sequence[_K], ref: str, noun: str, missing: str) -> _K:
    """The one key `ref` names among `found`: not found (`missing` says where they are listed) when none,
    a conflict listing them by id when its last four name several."""
    if not found:
        raise not_found(missing)
    if len(found) > 1:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"{len(found)} {noun} end in {ref!r}: name one by its id",
            listed=[Listed(noun, tuple(f"{key.id} (…{key.last_four})" for key in found))],
        )
    return found[0]


@router.post(paths.DEPLOYMENT_LABEL, responses=refusals(401, 403, 404))
def label_episode(
    name: str, episode: str, request_body: LabelRequest, who: ActWho, plat: Plat
) -> JSONResponse:
    """How a robot's episode went, kept with the deployment's captured episodes (`labels/<episode>.json`)."""
    hosted, _ = deployment_for(plat, who, name)
    try:
        plat.captures.label(hosted.id, episode, request_body.success, request_body.notes)
    except ValueError as exc:
        raise bad_request(f"episode: {exc}", field="episode") from None
    return JSONResponse({"episode_id": episode, "success": request_body.success, "notes": request_body.notes})


@router.get(paths.DEPLOYMENT_CAPTURE_FILES, responses=refusals(401, 404))
def capture_files(name: str, who: Who, plat: Plat) -> JSONResponse:
    """Every captured file of the deployment: each episode's lines, and its labels."""
    hosted = _deployment(plat, who, name)
    files = [{"path": path, "size": size} for path, size in plat.captures.files(hosted.id)]
    return JSONResponse({"deployment": name, "files": files})


@router.get(paths.DEPLOYMENT_CAPTURE_FILE, responses=refusals(401, 404))
def capture_file(name: str, path: str, who: Who, plat: Plat) -> FileResponse:
    hosted = _deployment(plat, who, name)
    found = plat.captures.open(hosted.id, path)
    if found is None:
        raise not_found(
            f"no captured file {path!r} of {name}: `seq policy data export {name} --format jsonl`"
        )
    return FileResponse(found, media_type="application/octet-stream")
