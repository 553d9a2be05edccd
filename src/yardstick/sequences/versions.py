"""A deployment's versions and its name: `seq policy rollback`, `rename`, `fork`, and `seq policy freeze` /
`seq benchmark freeze` (`core.hosted_versions` holds the rules).

Freezing asks the platform to keep what a version's build installed so it can be built again as it is. This
install keeps every version's code and prepared environment for as long as the version is kept, so a freeze
answers `kept` with the size held, and unfreezing, which would let it go, is refused by name: there is
nothing here to let go.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import Request
from fastapi.responses import JSONResponse

from yardstick.core.hosted_versions import Versions
from yardstick.core.refusals import Feature, Refusal, RefusalKind, not_found
from yardstick.core.runs import org_for
from yardstick.http.auth import Who, audit_target
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import HostingService
from yardstick.sequences import paths
from yardstick.sequences.errors import SEQUENCES
from yardstick.sequences.models import NameRequest, RollbackRequest
from yardstick.store.states import HostedKind

router = door_router(SEQUENCES, tags=["sequences: versions"])
KEPT_ALWAYS = (
    "this install keeps every version's code and environment for as long as the version is kept: there is "
    "nothing to let go"
)


@router.post(paths.DEPLOYMENT_ROLLBACK, responses=refusals(404, 409))
def rollback(name: str, body: RollbackRequest, who: Who, hosting: HostingService) -> JSONResponse:
    """Serve an earlier ready version from the next eval on; nothing is rebuilt."""
    rolled = Versions(hosting).rollback(org_for(who, None).id, HostedKind.POLICY, name, body.version)
    return JSONResponse(
        {"name": rolled.name, "version": rolled.version, "kept_versions": list(rolled.kept), "dropped": None}
    )


@router.post(paths.DEPLOYMENT_RENAME, responses=refusals(404, 409))
def rename(name: str, body: NameRequest, request: Request, who: Who, hosting: HostingService) -> JSONResponse:
    """The deployment's new name: its versions, settings and past evals stay with it."""
    renamed = Versions(hosting).rename(org_for(who, None).id, HostedKind.POLICY, name, body.name)
    audit_target(request, f"{name} -> {renamed.name}")
    return JSONResponse({"renamed_from": name, "name": renamed.name, "workers_stopped": 0})


@router.post(paths.DEPLOYMENT_FORK, status_code=202, responses=refusals(404, 409))
def fork(name: str, body: NameRequest, request: Request, who: Who, hosting: HostingService) -> JSONResponse:
    """A new deployment of the serving version's code, built and checked as a deploy is."""
    version = Versions(hosting).fork(org_for(who, None).id, HostedKind.POLICY, name, body.name)
    audit_target(request, f"{name} -> {body.name}")
    return JSONResponse(
        {"name": body.name, "forked_from": name, "version": version.number, "status": "building"},
        status_code=202,
    )


def _freeze_routes(kind: HostedKind, plural: str) -> None:
    @router.post(paths.version_freeze(plural), responses=refusals(404), name=f"{kind}_freeze")
    def freeze(name: str, number: int, who: Who, hosting: HostingService) -> JSONResponse:
        """A version's environment, kept: it is already, for as long as the version is."""
        _, versions = hosting.versions(org_for(who, None).id, kind, name)
        version = next((v for v in versions if v.number == number), None)
        if version is None:
            raise not_found(f"version: {kind} {name!r} has no version {number}")
        return JSONResponse(
            {
                "name": name,
                "version": number,
                "dependencies_state": "kept",
                "dependencies_bytes": _size(hosting.root / version.folder),
                "not_self_contained": [],
            }
        )

    @router.delete(paths.version_freeze(plural), responses=refusals(404, 424), name=f"{kind}_unfreeze")
    def unfreeze(name: str, number: int, who: Who, hosting: HostingService) -> JSONResponse:
        hosting.versions(org_for(who, None).id, kind, name)  # an unknown name is not found first
        raise Refusal(
            RefusalKind.NOT_OFFERED,
            f"unfreezing: {KEPT_ALWAYS}",
            feature=Feature("unfreezing a version", KEPT_ALWAYS),
        )


_freeze_routes(HostedKind.POLICY, "deployments")
_freeze_routes(HostedKind.BENCHMARK, "benchmarks")


def _size(folder: Path) -> int:
    """The bytes of the files under `folder` (its links not followed)."""
    total = 0
    for where, _, files in os.walk(folder):
        for file in files:
            path = Path(where) / file
            if not path.is_symlink():
                total += path.stat().st_size
    return total
