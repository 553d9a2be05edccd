"""An org's adapters over the Sequences door: `seq deploy` of an `@seq.adapter` folder registers one
(`--dry-run` asks `/validate`), `seq adapter ls / source / rm / check` list, read back and remove them, and
an eval names one with `--adapter` (`filing.py`). The rules are the core's (`core.adapters`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse

from yardstick.core.adapters import AdapterCode, Adapters
from yardstick.core.runs import org_for
from yardstick.http.auth import Who, audit_target
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat
from yardstick.sequences import eval_report, paging, paths
from yardstick.sequences.errors import SEQUENCES
from yardstick.sequences.models import AdapterRegistration
from yardstick.store.models import Adapter, AdapterVersion

router = door_router(SEQUENCES, tags=["sequences: adapters"])
PAGE = 50
PAGE_CAP = 200


def _code(body: AdapterRegistration) -> AdapterCode:
    return AdapterCode(
        name=body.name,
        class_name=body.class_name,
        handler_ref=body.handler_ref,
        source=body.source,
        pairs=body.pairs,
        params={
            name: param.model_dump(mode="json", exclude_none=True) for name, param in body.params.items()
        },
    )


@router.post(paths.ADAPTERS, responses=refusals(400, 409))
def register(body: AdapterRegistration, request: Request, who: Who, plat: Plat) -> JSONResponse:
    """Register the file as a version: the one it already is when the same code was registered before
    (`created` false), else the next. Nothing is built or run."""
    adapter, version, created = plat.adapters.register(
        org_for(who, None).id, _code(body), replace=body.replace
    )
    audit_target(request, f"{adapter.name}@v{version.number}")
    return JSONResponse(
        {**_version_row(adapter, version), "created": created, "pairs": version.pairs},
        status_code=201 if created else 200,
    )


@router.post(paths.ADAPTERS_VALIDATE, responses=refusals(400, 409))
def validate(body: AdapterRegistration, who: Who, plat: Plat) -> JSONResponse:
    """The registration's checks, registering nothing: what it would make."""
    return JSONResponse(plat.adapters.verdict(org_for(who, None).id, _code(body), replace=body.replace))


@router.get(paths.ADAPTERS)
def listed(
    who: Who,
    plat: Plat,
    limit: Annotated[int, Query(ge=1, le=PAGE_CAP)] = PAGE,
    cursor: Annotated[str | None, Query()] = None,
) -> JSONResponse:
    rows = plat.adapters.listed(org_for(who, None).id)
    page = paging.window(cursor, limit, len(rows), cap=PAGE_CAP)
    return JSONResponse(
        {"adapters": [_row(a, versions) for a, versions in page.of(rows)], **paging.shown(page)}
    )


@router.get(paths.ADAPTER, responses=refusals(404))
def one(name: str, who: Who, plat: Plat) -> JSONResponse:
    """Its versions newest first, and the evals that ran it, newest first."""
    org = org_for(who, None).id
    adapter, versions = plat.adapters.one(org, name)
    return JSONResponse(
        {
            "name": adapter.name,
            "versions": [_version_row(adapter, v) | {"pairs": v.pairs, "params": v.params} for v in versions],
            "evals": [
                _eval_row(run.id, run.resolved, run.status) for run in plat.adapters.runs_with(org, name)
            ],
        }
    )


@router.get(paths.ADAPTER_SOURCE, responses=refusals(404))
def source(
    name: str, who: Who, plat: Plat, version: Annotated[int | None, Query(ge=1)] = None
) -> JSONResponse:
    """A version's file exactly as it was registered (its latest without `version`), with the sum the SDK
    checks it against before writing it anywhere."""
    adapter, found = plat.adapters.version(org_for(who, None).id, name, version, field="version")
    return JSONResponse({**_version_row(adapter, found), "source": found.source})


@router.delete(paths.ADAPTER, responses=refusals(404, 409))
def remove(name: str, who: Who, plat: Plat) -> JSONResponse:
    """Every version, removed; refused while an eval that runs it waits or runs. The evals that ran it keep
    its name, version and sum in their reports."""
    org = org_for(who, None).id
    adapters: Adapters = plat.adapters
    running = [eval_report.eval_id(run.id) for run in adapters.runs_with(org, name, active=True)]
    deleted = adapters.remove(org, name, running)
    return JSONResponse({"name": name, "deleted_versions": deleted})


def _version_row(adapter: Adapter, version: AdapterVersion) -> dict[str, Any]:
    return {
        "name": adapter.name,
        "version": version.number,
        "sha256": version.sha256,
        "class_name": version.class_name,
        "handler_ref": version.handler_ref,
        "created_at": version.created_at.isoformat(),
    }


def _row(adapter: Adapter, versions: list[AdapterVersion]) -> dict[str, Any]:
    latest = versions[0]
    return {
        "name": adapter.name,
        "latest": latest.number,
        "versions": len(versions),
        "class_name": latest.class_name,
        "pairs": latest.pairs,
        "created_at": adapter.created_at.isoformat(),
        "updated_at": adapter.updated_at.isoformat(),
        "last_eval": adapter.last_eval,
    }


def _eval_row(run_id: int, resolved: dict[str, Any], status: str) -> dict[str, Any]:
    ran = resolved.get("adapter") or {}
    return {
        "eval_id": eval_report.eval_id(run_id),
        "version": ran.get("version"),
        "benchmark": resolved.get("benchmark"),
        "model": resolved.get("model"),
        "status": str(status),
    }
