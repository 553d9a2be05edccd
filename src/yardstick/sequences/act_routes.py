"""Robots on a deployment, the gateway's plane (`sequence_ai.connect`): connect, ready, keepalive, release.

A robot presents its account's key or a robot key to the deployment (`seq robot add`); a connect seats its
SDK session on the worker serving the deployment and hands it where that worker listens, the fingerprint of
the certificate the worker made for itself, the worker's direct secret and a lease (`core.act_plane`). While
no worker serves, the answer is the contract's `warming` (503, Retry-After), which the SDK waits out; a ready
poll starts one as a connect does. Acts then go to the worker, never through here.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Annotated, Any, Final

import httpx
from fastapi import Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from yardstick.core import planners
from yardstick.core.act_plane import LEASE_TTL_S, Connected, Robot, Warming
from yardstick.core.keys import digest
from yardstick.core.platform import Platform
from yardstick.core.refusals import Refusal, RefusalKind, not_found, unauthenticated
from yardstick.core.robot_keys import RobotCaller, authenticate, is_robot_key
from yardstick.core.runs import org_for
from yardstick.http.auth import bearer, caller
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat
from yardstick.sequences import paths
from yardstick.sequences.errors import REQUEST_ID, SEQUENCES, body
from yardstick.store.models import Hosted, HostedVersion
from yardstick.store.states import HostedKind

__all__ = ["ActCaller", "act_caller", "router"]

LOOK_TIMEOUT_S: Final = 2.0
SESSION_PATTERN: Final = r"^[A-Za-z0-9_-]{8,64}$"
DEFAULT_REQUEST_TIMEOUT_S: Final = 60.0

router = door_router(SEQUENCES, tags=["sequences: robots on a deployment"])


@dataclass(frozen=True)
class ActCaller:
    """Who drives a robot: an account key (its deployments are its org's, the first of the caller's, as
    every Sequences route reads a name) or a robot key bound to one deployment."""

    org_ids: frozenset[int]
    robot: RobotCaller | None = None
    api_key_digest: str | None = None

    def may_reach(self, hosted: Hosted) -> bool:
        if self.robot is not None:
            return self.robot.hosted_id == hosted.id
        return hosted.org_id in self.org_ids

    def as_robot(self, hosted: Hosted) -> Robot:
        return Robot(
            hosted.org_id, self.robot.key_id if self.robot is not None else None, self.api_key_digest
        )


async def act_caller(request: Request) -> ActCaller:
    """A robot key, or any account key (the same lookup every route makes)."""
    key = bearer(request)
    if key and is_robot_key(key):
        platform: Platform = request.app.state.platform
        with platform.db.writing() as session:
            robot = authenticate(session, key)
        if robot is None:
            raise unauthenticated("this robot key is not live: revoked, or never issued (seq robot list)")
        return ActCaller(org_ids=frozenset({robot.org_id}), robot=robot)
    found = await caller(request)
    return ActCaller(org_ids=frozenset({org_for(found, None).id}), api_key_digest=digest(key or ""))


ActWho = Annotated[ActCaller, Depends(act_caller)]


class ConnectRequest(BaseModel):
    """What the SDK sends: the deployment and its session, and what it can take (`moves`, `public_tls`,
    `keepalive`, `standby`: a worker answered by a public name, or a standby copy, is none this install
    hands out, so those are offers it leaves unanswered, as the contract lets it)."""

    model_config = ConfigDict(extra="ignore")
    model: str = Field(min_length=1, max_length=200)
    session: str = Field(pattern=SESSION_PATTERN)
    moves: bool = False
    public_tls: bool = False
    keepalive: bool = False
    standby: bool = False
    move: bool = False
    switched: bool = False


class SeatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str = Field(min_length=1, max_length=200)
    session: str = Field(pattern=SESSION_PATTERN)


def deployment_for(platform: Platform, who: ActCaller, name: str) -> tuple[Hosted, HostedVersion | None]:
    """The deployment `name` as `who` may reach it, and the version that serves (None while none is ready)."""
    with platform.db.reading() as session:
        found = session.execute(
            select(Hosted).where(
                Hosted.name == name,
                Hosted.kind == HostedKind.POLICY,
                Hosted.removed_at.is_(None),
                Hosted.org_id.in_(who.org_ids),
            )
        ).scalar_one_or_none()
    if found is None or not who.may_reach(found):
        if who.robot is not None:
            raise Refusal(
                RefusalKind.FORBIDDEN, f"this robot key reaches its own deployment only, not {name!r}"
            )
        raise not_found(f"no deployment {name!r}: `seq policy ls` lists yours")
    ready = platform.hosting.ready(found.org_id, HostedKind.POLICY, name)
    if ready is not None and planners.spec_of(ready[1]) is not None:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"{name} is a planner: a robot connects to its own policy, which the planner names as a member"
            " and plans for; say into the planner with sequence_ai.planner(name).observe(data)",
        )
    return found, ready[1] if ready is not None else None


def _look_at_its_worker(plat: Platform, hosted: Hosted, session_id: str) -> None:
    """A robot already seated connects again when its acts failed (or its lease is due): its worker is
    asked whether it still answers, and ended at once when it does not, so the robot is seated on another
    instead of being handed the dead one until its beats are missed. A liveness look alone: it carries no
    secret, so the worker's certificate is not checked here (the robot pins it)."""
    worker = plat.act_plane.worker_of(session_id, hosted.id)
    if worker is None or worker.url is None:
        return
    try:
        httpx.get(f"{worker.url}/ping", verify=False, timeout=LOOK_TIMEOUT_S)
    except httpx.HTTPError as exc:
        plat.act_plane.ended(worker.id, f"it did not answer the gateway's look ({type(exc).__name__})")


def _warming(exc: Warming) -> JSONResponse:
    shown = body(
        "warming",
        exc.why,
        retryable=True,
        retry_after_s=exc.retry_after_s,
        details={"reason": "starting", "eta_s": exc.eta_s},
    )
    headers = {REQUEST_ID: shown["request_id"], "Retry-After": str(max(1, round(exc.retry_after_s)))}
    return JSONResponse(shown, status_code=503, headers=headers)


def _playing(hosted: Hosted, version: HostedVersion | None) -> HostedVersion:
    if hosted.stopped:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"{hosted.name} is stopped: robots connect again once `seq policy start {hosted.name}` lets them",
        )
    if version is None:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"{hosted.name} has no version ready to serve: `seq policy status {hosted.name}`",
        )
    return version


def _request_timeout(hosted: Hosted) -> float:
    value = (hosted.settings or {}).get("timeouts.request")
    return (
        float(value)
        if isinstance(value, int | float) and not isinstance(value, bool)
        else DEFAULT_REQUEST_TIMEOUT_S
    )


def _keepalive(platform: Platform) -> dict[str, float]:
    ttl = platform.settings.seat_ttl_s
    return {"every_s": round(max(1.0, ttl / 4), 3), "seat_ttl_s": ttl}


def _connected(platform: Platform, hosted: Hosted, version: HostedVersion, seat: Connected) -> dict[str, Any]:
    declared = version.declared or {}
    params = {
        key.removeprefix("params."): value
        for key, value in (hosted.settings or {}).items()
        if key.startswith("params.")
    }
    return {
        "model": hosted.name,
        "version": version.number,
        "worker_url": seat.url,
        "cert_fingerprint": seat.fingerprint,
        "tls": "pinned",
        "direct_secret": seat.secret,
        "lease": {
            "ttl_s": LEASE_TTL_S,
            "expires_at": seat.lease_expires.isoformat(),
            "epoch": seat.worker_id,
        },
        "keepalive": _keepalive(platform),
        "params": params,
        "hz": declared.get("hz"),
        "action_chunk_valid_len": declared.get("action_chunk_valid_len"),
        "action_chunk_replan_at": declared.get("action_chunk_replan_at"),
        "io": declared.get("io"),
        "request_timeout_s": _request_timeout(hosted),
        "standby": None,
    }


@router.post(paths.ACT_CONNECT, responses=refusals(401, 403, 404, 409, 503))
def connect(request_body: ConnectRequest, who: ActWho, plat: Plat) -> JSONResponse:
    """Seat the robot's session on the worker serving the deployment, and say where it acts."""
    hosted, ready = deployment_for(plat, who, request_body.model)
    version = _playing(hosted, ready)
    _look_at_its_worker(plat, hosted, request_body.session)
    try:
        seat = plat.act_plane.connect(who.as_robot(hosted), hosted, version, request_body.session)
    except Warming as exc:
        return _warming(exc)
    return JSONResponse(_connected(plat, hosted, version, seat))


@router.get(paths.ACT_READY, responses=refusals(401, 403, 404, 409))
def ready(
    who: ActWho,
    plat: Plat,
    model: Annotated[str, Query(min_length=1, max_length=200)],
    session: Annotated[str | None, Query(pattern=SESSION_PATTERN)] = None,
    keepalive: bool = False,
) -> JSONResponse:
    """Whether the deployment serves robots now; a poll while it does not starts its worker."""
    hosted, version = deployment_for(plat, who, model)
    if version is None:
        return JSONResponse({"ready": False, "status": "building", "eta_s": None, "model": model})
    _playing(hosted, version)
    worker = plat.act_plane.want(hosted, version)
    if worker.url is not None:
        return JSONResponse({"ready": True, "status": "running", "eta_s": 0, "model": model})
    waited = (dt.datetime.now(dt.UTC) - worker.created_at).total_seconds()
    return JSONResponse(
        {
            "ready": False,
            "status": "starting",
            "stage": "loading",
            "eta_s": max(1.0, 10.0 - waited),
            "retry_after_s": 1.0,
            "model": model,
        }
    )


@router.post(paths.ACT_KEEPALIVE, responses=refusals(401, 403, 404))
def keepalive(request_body: SeatRequest, who: ActWho, plat: Plat) -> JSONResponse:
    """Keep the robot's seat `seat_ttl_s` more, or say it is gone and why."""
    hosted, _ = deployment_for(plat, who, request_body.model)
    gone = plat.act_plane.keepalive(hosted, request_body.session)
    if gone is not None:
        return JSONResponse({"held": False, "why": gone})
    return JSONResponse({"held": True, **_keepalive(plat), "request_timeout_s": _request_timeout(hosted)})


@router.post(paths.ACT_RELEASE, responses=refusals(401, 403, 404))
def release(request_body: SeatRequest, who: ActWho, plat: Plat) -> JSONResponse:
    """Give the robot's seat back (the SDK's close, exit or signal)."""
    hosted, _ = deployment_for(plat, who, request_body.model)
    return JSONResponse({"released": plat.act_plane.release(hosted, request_body.session)})


@router.post(paths.LATENCY, status_code=202, responses=refusals(401))
def latency(who: ActWho) -> JSONResponse:
    """The SDK's per-act timings, sent in batches: taken and not kept (this install measures its own acts on
    the worker; nothing here reads a robot's)."""
    return JSONResponse({"accepted": True, "kept": False}, status_code=202)
