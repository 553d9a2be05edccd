"""The gateway: one FastAPI application over every front door, the pages, the signed artifact route and
health. OpenAPI at `/openapi.json`, browsable at `/docs`.

Each door's routes render their own refusals (`http.routing`); what reaches no route (a path nobody serves,
a method a path does not take, a fault of ours) is rendered by the door whose paths it falls under.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anyio import to_thread
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from yardstick import __version__
from yardstick.core import limits
from yardstick.core.refusals import Refusal, RefusalKind
from yardstick.core.signing import ARTIFACTS_PATH, ArtifactUrlRefused
from yardstick.gateway import openapi
from yardstick.gateway.audit_trail import AuditTrail
from yardstick.gateway.body_limit import BodyLimit
from yardstick.gateway.cors import SharedReads
from yardstick.gateway.services import Services
from yardstick.http.artifact_files import artifact_file
from yardstick.http.routing import Door, answer_refused, refusals, refused_input
from yardstick.positronic import routes as positronic
from yardstick.positronic.errors import POSITRONIC
from yardstick.positronic.handshake import ContractVersion
from yardstick.positronic.own_routes import RIG_LAND
from yardstick.sequences import account as sequence_account
from yardstick.sequences import act_routes as sequence_act
from yardstick.sequences import adapters as sequence_adapters
from yardstick.sequences import paths as sequence_paths
from yardstick.sequences import planners as sequence_planners
from yardstick.sequences import registry as sequence_registry
from yardstick.sequences import robots as sequence_robots
from yardstick.sequences import routes as sequences
from yardstick.sequences import secrets as sequence_secrets
from yardstick.sequences import template_shelf as sequence_templates
from yardstick.sequences import uploads as sequence_uploads
from yardstick.sequences import usage as sequence_usage
from yardstick.sequences import versions as sequence_versions
from yardstick.sequences import volumes as sequence_volumes
from yardstick.sequences.errors import SEQUENCES
from yardstick.store.text import UnstorableText
from yardstick.web import checkout_page, deployment_page, oauth, replay_pages, signin_pages, site
from yardstick.worker import processes

log = logging.getLogger("yardstick.gateway")

# The kinds a status that reaches no route stands for.
_STATUS_KINDS = {
    401: RefusalKind.UNAUTHENTICATED,
    403: RefusalKind.FORBIDDEN,
    404: RefusalKind.NOT_FOUND,
    413: RefusalKind.TOO_LARGE,
}


# The threads FastAPI runs the (sync) routes in, in each HTTP process: anyio's default of 40 is well past what
# a process's one GIL can use, and each thread past the database pool (`store.db.POOL_SIZE`) would open a
# connection per request; fewer threads wait less for the GIL between them.
ROUTE_THREADS = 16


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    to_thread.current_default_thread_limiter().total_tokens = ROUTE_THREADS
    yield


def serve_routes_of(app: FastAPI, router: APIRouter) -> None:
    """Put every route of `router`, and of the routers it includes, straight into the app's table.

    `include_router` keeps a router as a branch, and FastAPI matches a request through a branch twice, trying
    each of its routes in turn with bookkeeping of its own: about forty tries, a third of what a `/healthz`
    request cost. Our routers are included with no prefix, dependency or setting of their own (a router's own
    prefix and tags are already in its routes' paths and tags), so their routes stand in the table as they
    are, in the same order."""
    for route in router.routes:
        if (included := getattr(route, "original_router", None)) is not None:
            serve_routes_of(app, included)  # a router it included: FastAPI's branch around it
        else:
            app.router.routes.append(route)
    if router.on_startup or router.on_shutdown:
        raise ValueError("a router with start-up or shut-down handlers must be included by include_router")


def create_app(services: Services) -> FastAPI:
    platform = services.platform
    app = FastAPI(
        lifespan=_lifespan,
        title="Yardstick",
        version=__version__,
        openapi_url="/openapi.json",
        docs_url="/docs",
        description="Evaluate robot policies on benchmarks: the Positronic platform contract (v1).",
    )
    app.state.platform = platform
    doors: list[Door] = [SEQUENCES, POSITRONIC]  # the last one claims every path the others do not

    # First in the table: load balancers and `yardstick server` ask it often, and it reads nothing, so it is
    # answered on the event loop (a plain `def` would cost a trip to a thread).
    @app.get("/healthz")
    async def health(boxes: bool = False) -> dict[str, Any]:
        """`?boxes=true` adds what runs below the server: its boxes, their processes, and the defunct
        (a read of /proc, so only when asked)."""
        said = {"status": "ok", "version": __version__, "workers_alive": platform.runs.workers_alive()}
        if boxes:
            said["processes"] = processes.census(os.getpid()).as_json()
        return said

    app.state.purchases = services.purchases
    app.state.sign_in = services.sign_in
    for router in (
        positronic.router,
        sequences.router,
        sequence_secrets.router,
        sequence_registry.router,
        sequence_volumes.router,
        sequence_uploads.router,
        sequence_account.router,
        sequence_versions.router,
        sequence_templates.router,
        sequence_usage.router,
        sequence_adapters.router,
        sequence_act.router,
        sequence_robots.router,
        sequence_planners.router,
        oauth.router,
        site.router,
        replay_pages.router,
        signin_pages.router,
        deployment_page.router,
        checkout_page.router,
    ):
        serve_routes_of(app, router)

    def door_of_path(path: str) -> Door:
        return next(door for door in doors if door.serves(path))

    def door_of(request: Request) -> Door:
        return door_of_path(request.url.path)

    app.add_middleware(
        BodyLimit,
        limit=limits.BODY_BYTES,
        larger={
            **dict.fromkeys(sequence_paths.BUNDLE_BODIES, limits.BUNDLE_BODY_BYTES),
            RIG_LAND: limits.RIG_EPISODE_BYTES,
        },
        matching={
            sequence_paths.VOLUME_DECLARATIONS: limits.VOLUME_DECLARATION_BYTES,
            sequence_paths.UPLOAD_CHUNKS: limits.UPLOAD_CHUNK_BYTES,
        },
        refuse=lambda request, refusal: door_of(request).refusal(request, refusal),
    )

    app.add_middleware(AuditTrail, audit=platform.audit)  # what it records is answered below 400
    app.add_middleware(SharedReads)  # outside the body limit: its refusals are shared too
    # Outermost: every answer names the contract, the refusals of the layers inside it too.
    app.add_middleware(ContractVersion, ours=lambda path: door_of_path(path) is POSITRONIC)

    @app.exception_handler(Refusal)
    async def _refused(request: Request, exc: Refusal) -> Response:
        return door_of(request).refusal(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return door_of(request).invalid(request, exc)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404 and exc.detail == "Not Found":
            # No route took it: the door may name the feature of its contract that this path reaches (a
            # method a route does not take stays 405, its Allow header listing those it does).
            unrouted = door_of(request).unrouted(request.method, request.url.path)
            if unrouted is not None:
                return door_of(request).refusal(request, unrouted)
        kind = _STATUS_KINDS.get(
            exc.status_code, RefusalKind.BAD_REQUEST if exc.status_code < 500 else RefusalKind.INTERNAL
        )
        answer = door_of(request).refusal(request, Refusal(kind, str(exc.detail)))
        answer.status_code = exc.status_code
        if exc.headers:
            answer.headers.update(exc.headers)
        return answer

    async def _input_refused(request: Request, exc: Exception) -> Response:
        """Input the models or the text columns refuse, raised outside a door's routes (the pages, the
        device flow) or not spelled as a refusal: a 4xx by rule. Any other TypeError is a fault of ours."""
        refused = refused_input(exc)
        if refused is None:
            log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
            return await _internal(request, exc)
        return answer_refused(door_of(request), request, refused)

    app.add_exception_handler(UnstorableText, _input_refused)
    app.add_exception_handler(TypeError, _input_refused)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        return door_of(request).refusal(
            request, Refusal(RefusalKind.INTERNAL, f"internal error: {type(exc).__name__}")
        )

    @app.get(
        ARTIFACTS_PATH + "/{submission}/{key:path}", include_in_schema=True, responses=refusals(403, 404)
    )
    def artifact(submission: str, key: str, expires: str = "", sig: str = "") -> Any:
        """An artifact by its signed, expiring URL (no key needed: the signature is the credential)."""
        try:
            platform.signer.verify(submission, key, expires, sig)
        except ArtifactUrlRefused as exc:
            raise Refusal(RefusalKind.FORBIDDEN, f"this artifact link is refused: {exc.reason}") from None
        try:
            submission_id = int(submission, 16)
        except ValueError:
            raise Refusal(RefusalKind.NOT_FOUND, f"no artifact {key!r}") from None
        return artifact_file(
            platform.artifacts,
            submission_id,
            key,
            lambda: Refusal(RefusalKind.NOT_FOUND, f"no artifact {key!r}"),
            headers={"Access-Control-Allow-Origin": "*"},
        )

    openapi.install(app, doors, lambda path: next(door for door in doors if door.serves(path)))
    return app
