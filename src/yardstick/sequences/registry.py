"""`/v1/benchmarks` and `/v1/deployments`: an org's benchmarks and policies, registered with their code.

A registration is checked (its bundle unpacked safely, its image honoured, its secrets named) and answered
with the version's status: the build (the class imported and tried in a box) is waited for a while, so a quick
one answers `ready` at once, a slow one `building` (the SDK then polls). A deployment is a policy the platform
serves in a box of its own: an eval names it as its `model`, a Positronic plan as a `served` endpoint.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Final

from fastapi import Query, Request
from fastapi.responses import JSONResponse, Response

from yardstick.billing.purchases import Purchases
from yardstick.core import act_scaling, planners
from yardstick.core.accounts import Caller
from yardstick.core.captures import CAPTURE_SETTING
from yardstick.core.hosting import Hosting, Upload, serving_of
from yardstick.core.platform import Platform
from yardstick.core.refusals import Feature, Refusal, RefusalKind, bad_request, not_found
from yardstick.core.runs import BenchmarkTarget, org_for
from yardstick.http.auth import Who, audit_target
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import HostingService, Plat, Purch
from yardstick.sdk.specs import RECORDED_REPLAYS
from yardstick.sequences import build_logs, eval_report, evals, paging, paths, removal
from yardstick.sequences.errors import SEQUENCES
from yardstick.sequences.filing import declared_replay, offered_benchmark, replay_label, version_offered
from yardstick.sequences.models import (
    BenchmarkRegisterRequest,
    BenchmarkStatusResponse,
    BenchmarkValidateResponse,
    DeploymentAccepted,
    DeploymentRequest,
    DeploymentStatusResponse,
    SettingsChange,
    build_status,
)
from yardstick.sequences.volume_models import asset_refs, weight_refs
from yardstick.store.models import Hosted, HostedVersion
from yardstick.store.states import BuildStatus, Contract, HostedKind, RunStatus

CONTRACT = "0.5.35"
# How long a registration waits for its build before answering `building`.
BUILD_WAIT_S = 20.0
PAGE, PAGE_CAP = 50, 500
# The most evals a listing reads (`seq eval ls`, a benchmark's last eval).
LISTED = 200
PARAMS = "params."


NO_CARDS = 'this install has no GPUs: it plays on CPU workers; declare gpu="cpu" to run the code here'


def _on_cpu(field: str, cards: list[str]) -> None:
    """Refuse a card this install does not have, by name, rather than run on CPU a policy that asked for a
    GPU (a policy names its card itself: the SDK requires it)."""
    named = [card for card in cards if card.strip().lower() != "cpu"]
    if named:
        raise Refusal(
            RefusalKind.NOT_OFFERED,
            f"{field}: {named[0]!r}: {NO_CARDS}",
            field=field,
            feature=Feature(f"GPU placement ({field})", NO_CARDS),
        )


# A Dockerfile's COPY and ADD context: the build reads its Dockerfile alone.
NO_CONTEXT: Final = (
    "an image's build reads its Dockerfile alone here (its COPY and ADD have no context): put the files in "
    "the deployed folder, which the code reads where it runs"
)


def _no_context(context: object) -> None:
    if context is not None:
        raise Refusal(
            RefusalKind.NOT_OFFERED,
            f"image_context: {NO_CONTEXT}",
            field="image_context",
            feature=Feature("a Dockerfile's build context (image_context)", NO_CONTEXT),
        )


def _benchmark_upload(body: BenchmarkRegisterRequest) -> Upload:
    # A benchmark's card is not refused: the SDK names its default (L4) when the code names none, so a card
    # here says little; every benchmark plays on the install's CPU workers, as `seq benchmark ls` shows.
    if body.code is None:
        raise bad_request("code: a registration sends its code (the deployed folder, a tar.gz bundle)")
    _no_context(body.image_context)
    declared = body.model_dump(mode="json", exclude={"code", "image_context", "image", "secrets"})
    return Upload(
        kind=HostedKind.BENCHMARK,
        name=body.name,
        handler_ref=body.handler_ref,
        code_format=body.code.format,
        code_data=body.code.data,
        code_sha256=body.code.sha256,
        image=body.image.model_dump(mode="json", exclude_none=True),
        secrets=tuple(s.name for s in body.secrets),
        declared=declared,
        assets=asset_refs(body.assets),
    )


def _policy_upload(body: DeploymentRequest) -> Upload:
    _on_cpu("resources.gpu", body.resources.gpu)
    if body.code is None:
        raise bad_request("code: a deployment sends its code (the deployed folder, a tar.gz bundle)")
    _no_context(body.image_context)
    declared = body.policy.model_dump(mode="json", exclude={"secrets"}, exclude_none=True)
    # How many workers serve it to robots, and how many robots each takes (`core.act_scaling`).
    declared["autoscaler"] = body.autoscaler.model_dump(mode="json", exclude_none=True)
    declared["concurrency"] = body.concurrency.model_dump(mode="json", exclude_none=True)
    return Upload(
        kind=HostedKind.POLICY,
        name=body.name,
        handler_ref=body.policy.handler_ref,
        code_format=body.code.format,
        code_data=body.code.data,
        code_sha256=body.code.sha256,
        image=body.image.model_dump(mode="json", exclude_none=True),
        secrets=tuple(s.name for s in body.policy.secrets),
        declared=declared,
        assets=weight_refs(body.weights, body.weights_name, body.extra_weights),
    )


def _benchmark_status(name: str, version: HostedVersion) -> BenchmarkStatusResponse:
    status = build_status(version)
    return BenchmarkStatusResponse(
        name=name, status=status, error=version.error if status == "failed" else None
    )


def _deployment_status(hosted: Hosted, version: HostedVersion) -> DeploymentStatusResponse:
    status = build_status(version)
    return DeploymentStatusResponse(
        status=status,
        model=hosted.name,
        error=version.error if status == "failed" else None,
    )


def _org(caller: Caller) -> int:
    return org_for(caller, None).id


def _registered(hosting: Hosting, caller: Caller, name: str) -> bool:
    return any(h.name == name for h, _ in hosting.listed(_org(caller), HostedKind.BENCHMARK))


router = door_router(SEQUENCES, tags=["sequences: benchmarks and deployments"])


# --- benchmarks ---------------------------------------------------------------------------------------


@router.post(paths.BENCHMARKS_VALIDATE, response_model=BenchmarkValidateResponse, responses=refusals(409))
def validate_benchmark(body: BenchmarkRegisterRequest, who: Who, hosting: HostingService) -> JSONResponse:
    """What registering would do: a new benchmark, a new version, or the same code again."""
    state, version = hosting.would(_org(who), _benchmark_upload(body))
    shown = BenchmarkValidateResponse(
        ok=True, name=body.name, state=state, version=version, contract=CONTRACT
    )
    return JSONResponse(shown.model_dump(mode="json"))


@router.post(
    paths.BENCHMARKS, response_model=BenchmarkStatusResponse, status_code=202, responses=refusals(409)
)
def register_benchmark(
    body: BenchmarkRegisterRequest, request: Request, who: Who, hosting: HostingService
) -> JSONResponse:
    audit_target(request, body.name)
    version = hosting.register(_org(who), _benchmark_upload(body))
    version = hosting.wait(version.id, BUILD_WAIT_S)
    shown = _benchmark_status(body.name, version)
    return JSONResponse(shown.model_dump(mode="json", exclude_none=True), status_code=202)


@router.get(paths.BENCHMARKS)
def list_benchmarks(
    purchases: Purch,
    hosting: HostingService,
    plat: Plat,
    who: Who,
    limit: Annotated[int, Query(ge=1, le=PAGE_CAP)] = PAGE,
    cursor: Annotated[str | None, Query()] = None,
) -> JSONResponse:
    rows = hosting.listed(_org(who), HostedKind.BENCHMARK)
    page = paging.window(cursor, limit, len(rows), cap=PAGE_CAP)
    last: dict[str, dict[str, Any]] = {}
    for row in _evals(plat, who, purchases):  # newest first: the first of each benchmark is its last
        last.setdefault(str(row["benchmark"]), row)
    return JSONResponse(
        {
            "benchmarks": [
                _benchmark_row(hosted, version, last.get(hosted.name)) for hosted, version in page.of(rows)
            ],
            **paging.shown(page),
        }
    )


@router.get(paths.BENCHMARK, response_model=BenchmarkStatusResponse, responses=refusals(404, 409))
def benchmarkbuild_status(name: str, who: Who, hosting: HostingService) -> JSONResponse:
    _, version = hosting.current(_org(who), HostedKind.BENCHMARK, name)
    return JSONResponse(_benchmark_status(name, version).model_dump(mode="json", exclude_none=True))


@router.get(paths.BENCHMARK_TASKS, responses=refusals(404, 409))
def benchmark_tasks(
    name: str,
    plat: Plat,
    who: Who,
    hosting: HostingService,
    version: Annotated[int | None, Query(ge=1)] = None,
) -> JSONResponse:
    """The tasks of one of the org's benchmarks (as its newest version declares them, or `version`), or of
    a catalogue eval the caller may name."""
    offered, replay = _tasks_of(plat, who, hosting, name, version)
    return JSONResponse(
        {
            "benchmark": name,
            "version": offered.version,
            "template": None,
            "replay": replay,
            "tasks": [
                {
                    "task": task,
                    "description": description,
                    "max_seconds": offered.max_seconds.get(task),
                    "seeds": _span(list(offered.seeds)),
                    "seed_count": len(offered.seeds),
                    "episodes": len(offered.seeds),
                }
                for task, description in offered.tasks.items()
            ],
        }
    )


def _tasks_of(
    plat: Platform, who: Caller, hosting: Hosting, name: str, number: int | None
) -> tuple[evals.OfferedBenchmark, str | None]:
    """The benchmark whose tasks are listed, and how it records its replay: the org's version `number`
    (else the one an eval runs, else the one building), or a catalogue eval's."""
    registered = _registered(hosting, who, name)
    chosen: HostedVersion | None = None
    if number is not None and registered:
        hosted, versions = hosting.versions(_org(who), HostedKind.BENCHMARK, name)
        chosen = next((v for v in versions if v.number == number), None)
        if chosen is None:
            have = ", ".join(f"v{v.number}" for v in reversed(versions))
            raise not_found(f"version: benchmark {name!r} has no v{number} (it has {have})")
        checked = version_offered(hosted, chosen)
        if checked is not None:
            return checked, replay_label(checked)
    elif registered and hosting.ready(_org(who), HostedKind.BENCHMARK, name) is None:
        chosen = hosting.current(_org(who), HostedKind.BENCHMARK, name)[1]
    if chosen is None:
        offered = offered_benchmark(plat, who, name)
        return offered, replay_label(offered)
    # A version its build has not checked: its tasks as its registration declared them.
    declared = chosen.declared
    offered = evals.OfferedBenchmark(
        name=name,
        version=chosen.number,
        tasks=dict(declared.get("tasks") or {}),
        seeds=tuple(declared.get("seeds") or ()),
        max_seconds={},
        params={},
        target=BenchmarkTarget(""),
    )
    return offered, "3d" if declared_replay(chosen).get("engine") in RECORDED_REPLAYS else None


@router.get(paths.BENCHMARK_EVALS, responses=refusals(404, 409))
def benchmark_evals(
    purchases: Purch,
    name: str,
    plat: Plat,
    who: Who,
    hosting: HostingService,
    limit: Annotated[int, Query(ge=1, le=PAGE_CAP)] = PAGE,
    cursor: Annotated[str | None, Query()] = None,
    policy: Annotated[str | None, Query(max_length=200)] = None,
    since: Annotated[str | None, Query(max_length=40)] = None,
) -> JSONResponse:
    """Every eval on the benchmark (of one policy: `policy`; from `since` on), newest first, a page."""
    if not _registered(hosting, who, name):
        offered_benchmark(plat, who, name)  # a catalogue eval's, or refused naming what there is
    after = _since(since)
    rows = [
        row
        for row in _evals(plat, who, purchases)
        if row["benchmark"] == name
        and (policy is None or row["policy"] == policy)
        and (after is None or dt.datetime.fromisoformat(row["created_at"]) >= after)
    ]
    page = paging.window(cursor, limit, len(rows), cap=PAGE_CAP)
    return JSONResponse({"benchmark": name, "evals": page.of(rows), **paging.shown(page)})


def _since(text: str | None) -> dt.datetime | None:
    """`since` as the SDK sends it: an ISO date or time (UTC when it names no zone), refused otherwise."""
    if text is None:
        return None
    try:
        at = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise bad_request(
            f"since: {text!r} is no ISO date or time (2026-10-18, 2026-10-18T12:00:00Z)", field="since"
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


@router.post(paths.BENCHMARK_CANCEL, responses=refusals(404, 409))
def cancel_benchmark(name: str, who: Who, hosting: HostingService) -> JSONResponse:
    version = hosting.cancel(_org(who), HostedKind.BENCHMARK, name)
    return JSONResponse({"name": name, "version": version.number, "status": "canceled", "runs": 0})


@router.delete(paths.BENCHMARK, responses=refusals(404, 409))
def remove_benchmark(
    name: str, who: Who, plat: Plat, dry_run: bool = False, force: bool = False
) -> JSONResponse:
    """Delete one of the org's benchmarks (`removal.remove_benchmark`), or with `dry_run` say what that
    would touch."""
    return JSONResponse(removal.remove_benchmark(plat, who, name, dry_run=dry_run, force=force))


# --- deployments ----------------------------------------------------------------------------------------


@router.post(paths.DEPLOYMENTS_VALIDATE, responses=refusals(409, 424))
def validate_deployment(
    body: DeploymentRequest, who: Who, hosting: HostingService, replace: bool = False
) -> JSONResponse:
    _check_planner(body, who, hosting)
    state, version = hosting.would(_org(who), _policy_upload(body), replace=replace)
    return JSONResponse(
        {"ok": True, "name": body.name, "state": state, "version": version, "contract": CONTRACT}
    )


@router.post(
    paths.DEPLOYMENTS, response_model=DeploymentAccepted, status_code=202, responses=refusals(409, 424)
)
def deploy(
    body: DeploymentRequest, request: Request, who: Who, hosting: HostingService, replace: bool = False
) -> JSONResponse:
    """Register a policy's code as its deployment's next version; another class takes the name over only
    with `--replace` (`?replace=true`)."""
    audit_target(request, body.name)
    _check_planner(body, who, hosting)
    version = hosting.register(_org(who), _policy_upload(body), replace=replace)
    hosting.wait(version.id, BUILD_WAIT_S)
    shown = DeploymentAccepted(deployment_id=body.name)
    return JSONResponse(shown.model_dump(mode="json"), status_code=202)


def _check_planner(body: DeploymentRequest, who: Who, hosting: HostingService) -> None:
    """A planner's members, as the contract rules them (`core.planners.check_members`)."""
    if body.policy.planner is None:
        return
    members = body.policy.planner.get("members")
    if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
        raise bad_request("policy.planner.members: the names of the policies and planners it plans for")
    with hosting.db.reading() as session:
        planners.check_members(session, _org(who), body.name, members)


@router.get(paths.DEPLOYMENTS)
def list_deployments(
    who: Who,
    hosting: HostingService,
    limit: Annotated[int, Query(ge=1, le=PAGE_CAP)] = PAGE,
    cursor: Annotated[str | None, Query()] = None,
) -> JSONResponse:
    """One page of the caller's deployments, paged as the contract's lists are."""
    rows = hosting.listed(_org(who), HostedKind.POLICY)
    page = paging.window(cursor, limit, len(rows), cap=PAGE_CAP)
    return JSONResponse(
        {
            "data": [_deployment_row(hosted, version) for hosted, version in page.of(rows)],
            **paging.shown(page),
        }
    )


@router.get(paths.DEPLOYMENT, response_model=DeploymentStatusResponse, responses=refusals(404, 409))
def deploymentbuild_status(name: str, who: Who, hosting: HostingService) -> JSONResponse:
    hosted, version = hosting.current(_org(who), HostedKind.POLICY, name)
    return JSONResponse(_deployment_status(hosted, version).model_dump(mode="json", exclude_none=True))


@router.get(paths.DEPLOYMENT_VERSIONS, responses=refusals(404, 409))
def deployment_versions(name: str, who: Who, hosting: HostingService) -> JSONResponse:
    """A deployment's versions, newest first: `serving` (or `stopped`) the one evals call, `kept` older
    ready ones, else how the build went; `code.sha256` the tree hash the SDK prints."""
    hosted, versions = hosting.versions(_org(who), HostedKind.POLICY, name)
    serving = _serving(hosted, versions)
    rows = []
    for version in versions:
        if version.number == serving:
            state = "stopped" if hosted.stopped else "serving"
        elif version.status == BuildStatus.READY:
            state = "kept"
        else:
            state = str(version.status)
        rows.append(
            {
                "version": version.number,
                "state": state,
                "gpu": (version.declared.get("gpu") or None),
                "template": None,
                "weights": _weights(version),
                "code": {"sha256": version.tree_sha256, "bundle_sha256": version.code_sha256},
                "handler_ref": version.handler_ref,
                "created_at": version.created_at.isoformat(),
                "error": version.error,
            }
        )
    return JSONResponse({"deployment": name, "data": rows})


@router.get(paths.DEPLOYMENT_DELETION, responses=refusals(404, 409))
def deployment_deletion(name: str, who: Who, plat: Plat) -> JSONResponse:
    """What deleting a deployment would touch, as `seq policy rm` lists it first (`removal.deletion`)."""
    return JSONResponse(removal.deletion(plat, who, name))


@router.delete(paths.DEPLOYMENT, responses=refusals(404, 409))
def remove_deployment(name: str, who: Who, plat: Plat, force: bool = False) -> JSONResponse:
    """Delete a deployment (`removal.remove_deployment`); `force` is for robots, and none connect here."""
    return JSONResponse(removal.remove_deployment(plat, who, name))


@router.post(paths.DEPLOYMENT_STOP, responses=refusals(404, 409))
def stop_deployment(name: str, who: Who, hosting: HostingService, plat: Plat) -> JSONResponse:
    """Refuse new evals and robots of it until it is started again (`seq policy start`); a version still
    building finishes. The workers serving it to robots end, their robots told at their next keepalive."""
    latest = hosting.set_stopped(_org(who), name, True)
    hosted, _ = hosting.current(_org(who), HostedKind.POLICY, name)
    stopped = plat.act_plane.stop(hosted)
    shown = {
        "name": name,
        "workers_stopped": stopped,
        "status": build_status(latest),
        "version": latest.number,
    }
    return JSONResponse(shown)


@router.post(paths.DEPLOYMENT_START, responses=refusals(404, 409))
def start_deployment(name: str, who: Who, hosting: HostingService) -> JSONResponse:
    """Let evals run it again: the next one plays its newest ready version (a newer one may still build)."""
    latest = hosting.set_stopped(_org(who), name, False)
    ready = hosting.ready(_org(who), HostedKind.POLICY, name)
    serving = ready[1] if ready is not None else latest
    return JSONResponse({"name": name, "version": serving.number, "status": build_status(serving)})


@router.get(paths.DEPLOYMENT_SETTINGS, responses=refusals(404, 409))
def deployment_settings(name: str, who: Who, hosting: HostingService) -> JSONResponse:
    """The settings Yardstick honours: each inference parameter (`params.<name>`, what every episode begun
    after a change runs with) and `timeouts.request` (how long one inference may take)."""
    hosted, version = hosting.current(_org(who), HostedKind.POLICY, name)
    declaration = (version.checked or {}).get("declaration") or {}
    rows = []
    for key, param in (declaration.get("params") or {}).items():
        rows.append(_setting(f"{PARAMS}{key}", hosted.settings, param.get("default"), "episodes"))
    rows.append(_setting("timeouts.request", hosted.settings, None, "workers"))
    rows.append(_setting(CAPTURE_SETTING, hosted.settings, "off", "workers"))
    ready = hosting.ready(_org(who), HostedKind.POLICY, name)
    scaling = act_scaling.scaling_of({}, (ready[1] if ready else version).declared)  # as deployed
    for key, code in (
        (act_scaling.MIN, scaling.min_workers),
        (act_scaling.BUFFER, scaling.buffer_workers),
        (act_scaling.MAX, scaling.max_workers),
    ):
        rows.append(_setting(key, hosted.settings, code, "workers"))
    return JSONResponse({"deployment": name, "rev": hosted.settings_rev, "settings": rows})


@router.patch(paths.DEPLOYMENT_SETTINGS, responses=refusals(404, 409))
def change_deployment_settings(
    name: str, body: SettingsChange, who: Who, hosting: HostingService
) -> JSONResponse:
    hosted, version = hosting.current(_org(who), HostedKind.POLICY, name)
    declaration = (version.checked or {}).get("declaration") or {}
    declared = {f"{PARAMS}{key}": param for key, param in (declaration.get("params") or {}).items()}
    problems: list[str] = []
    changes = dict(body.changes)
    for key, value in body.changes.items():
        if key == "timeouts.request":
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 3600
            ):
                problems.append(f"changes[{key!r}]: a whole number of seconds, 1 to 3600")
        elif key == CAPTURE_SETTING:
            if value is not None and value not in ("on", "off"):
                problems.append(f"changes[{key!r}]: on or off")
        elif key in act_scaling.KEYS:
            continue  # checked together below: min_workers against max_gpus
        elif key.startswith(PARAMS):
            if key not in declared:
                known = ", ".join(declared) or "none"
                problems.append(
                    f"changes[{key!r}]: the policy declares no such parameter (it declares {known})"
                )
            elif value is not None:
                # Stored as the type it declares, so the next eval is handed what it checked.
                changes[key] = evals.setting_value(f"changes[{key!r}]", declared[key], value, problems)
        else:
            problems.append(
                f"changes[{key!r}]: not a setting this platform honours (it honours params.<name>,"
                " timeouts.request, capture, min_workers, buffer_workers and max_gpus)"
            )
    ready = hosting.ready(_org(who), HostedKind.POLICY, name)
    problems += act_scaling.problems(body.changes, hosted.settings, (ready[1] if ready else version).declared)
    if problems:
        raise bad_request("; ".join(problems))
    defaults = {key: param.get("default") for key, param in declared.items()}
    before = {**defaults, **hosted.settings}
    changed = hosting.change_settings(_org(who), name, changes, body.rev)
    after = {**defaults, **changed.settings}
    return JSONResponse(
        {
            "deployment": name,
            "rev": changed.settings_rev,
            "changed": [
                {
                    "key": key,
                    "before": before.get(key),
                    "after": after.get(key),
                    "reads": "episodes" if key.startswith(PARAMS) else "workers",
                }
                for key in body.changes
            ],
            "version": None,
        }
    )


@router.get(paths.DEPLOYMENT_EVALS, responses=refusals(404, 409))
def deployment_evals(
    purchases: Purch,
    name: str,
    plat: Plat,
    who: Who,
    hosting: HostingService,
    limit: Annotated[int, Query(ge=1, le=PAGE_CAP)] = PAGE,
    cursor: Annotated[str | None, Query()] = None,
) -> JSONResponse:
    """The deployment's evals, newest first, a page."""
    hosting.current(_org(who), HostedKind.POLICY, name)
    rows = [row for row in _evals(plat, who, purchases) if row["policy"] == name]
    page = paging.window(cursor, limit, len(rows), cap=PAGE_CAP)
    return JSONResponse({"deployment": name, "history": page.of(rows), **paging.shown(page)})


def _version_routes(kind: HostedKind, plural: str, label: str) -> None:
    """`/{plural}/{name}/builds` and `/{plural}/{name}/versions/{number}/source`, alike for benchmarks and
    deployments: what differs is the kind looked up and the key the answer names it by."""

    @router.get(paths.builds(plural), responses=refusals(404, 409), name=f"{label}_builds")
    def builds(name: str, who: Who, hosting: HostingService) -> JSONResponse:
        """The versions, newest first, each one's build; `serving` marks the one new evals use."""
        hosted, versions = hosting.versions(_org(who), kind, name)
        return JSONResponse({label: name, "builds": _builds(hosted, versions)})

    @router.get(
        paths.version_source(plural),
        response_class=Response,
        responses=refusals(404, 409),
        name=f"{label}_source",
    )
    def source(name: str, number: int, who: Who, hosting: HostingService) -> Response:
        """The code of one version, as it was sent (a tar.gz under `<name>-v<number>/`)."""
        return Response(hosting.source(_org(who), kind, name, number), media_type="application/gzip")


def _one_version(
    hosting: Hosting, caller: Caller, kind: HostedKind, name: str, number: int | None
) -> tuple[HostedVersion, int]:
    """A version by number (the newest when None), and the newest's number."""
    _, versions = hosting.versions(_org(caller), kind, name)
    latest = versions[0].number
    if number is None:
        return versions[0], latest
    found = next((v for v in versions if v.number == number), None)
    if found is None:
        raise not_found(f"version: {kind} {name!r} has no version {number} (its newest is v{latest})")
    return found, latest


@router.get(paths.BENCHMARK_LOGS, responses=refusals(404))
def benchmark_build_log(
    name: str, who: Who, hosting: HostingService, version: Annotated[int | None, Query(ge=1)] = None
) -> JSONResponse:
    """One version's build (`seq benchmark logs NAME[@vN] --build`): its phases, its check, its log."""
    found, latest = _one_version(hosting, who, HostedKind.BENCHMARK, name, version)
    return JSONResponse(build_logs.benchmark_build(name, found, latest))


@router.get(paths.DEPLOYMENT_BUILD, responses=refusals(404))
def deployment_build_log(
    name: str,
    who: Who,
    hosting: HostingService,
    version: Annotated[int | None, Query(ge=1)] = None,
    after_seq: Annotated[int | None, Query(ge=0)] = None,
) -> JSONResponse:
    """One version's build, step by step (`seq policy logs NAME[@vN] --build`, and `seq deploy` as it
    waits). `after_seq` is accepted and every line is sent: a build here keeps its lines once it ends."""
    found, _ = _one_version(hosting, who, HostedKind.POLICY, name, version)
    return JSONResponse(build_logs.deployment_build(name, found))


_version_routes(HostedKind.BENCHMARK, "benchmarks", "benchmark")
_version_routes(HostedKind.POLICY, "deployments", "deployment")


def _serving(hosted: Hosted, versions: list[HostedVersion]) -> int | None:
    """The version evals run: the newest that passed its check (a newer one building does not displace it),
    or the one a rollback pinned."""
    found = serving_of(hosted, versions)
    return found.number if found is not None else None


def _builds(hosted: Hosted, versions: list[HostedVersion]) -> list[dict[str, Any]]:
    serving = _serving(hosted, versions)
    rows = []
    for version in versions:
        took = (
            (version.built_at - version.created_at).total_seconds() if version.built_at is not None else None
        )
        checked = version.checked or {}
        rows.append(
            {
                "version": version.number,
                "state": str(version.status),
                "serving": version.number == serving,
                "duration_s": round(took, 3) if took is not None else None,
                "failed_stage": checked.get("stage") if version.status == BuildStatus.FAILED else None,
                "error": version.error,
                "why": None,
                "code": {"sha256": version.tree_sha256},
            }
        )
    return rows


def _setting(key: str, settings: dict[str, Any], code: Any, reads: str) -> dict[str, Any]:
    value = settings.get(key, code)
    return {
        "key": key,
        "value": value,
        "code": code,
        "source": "set" if key in settings else "code",
        "reads": reads,
    }


def _benchmark_row(
    hosted: Hosted, version: HostedVersion, last_eval: dict[str, Any] | None = None
) -> dict[str, Any]:
    declared = version.declared
    return {
        "name": hosted.name,
        "version": version.number,
        "versions": version.number,
        "status": build_status(version),
        "gpu": declared.get("gpu"),
        "worlds": declared.get("worlds"),
        "created_at": hosted.created_at.isoformat(),
        "error": version.error,
        "template": None,
        "replay": "3d" if declared_replay(version).get("engine") in RECORDED_REPLAYS else None,
        "last_eval": last_eval,
    }


def _deployment_row(hosted: Hosted, version: HostedVersion) -> dict[str, Any]:
    return {
        "name": hosted.name,
        "version": version.number,
        "status": "stopped"
        if hosted.stopped and version.status == BuildStatus.READY
        else build_status(version),
        "created_at": hosted.created_at.isoformat(),
        "error": version.error,
        "weights": _weights(version),
    }


def _weights(version: HostedVersion) -> str | None:
    """The volume versions a deployment's weights mount, as `vol://` references (None without)."""
    pins = (version.declared or {}).get("volumes") or []
    return ", ".join(f"vol://{pin['name']}@v{pin['version']}" for pin in pins) or None


def _evals(platform: Platform, caller: Caller, purchases: Purchases) -> list[dict[str, Any]]:
    """The caller's newest evals (`LISTED` at most), newest first, as the listings show them: what each
    cost (held while it plays, `cost_settled` once charged)."""
    runs = platform.runs.newest(caller, Contract.SEQUENCES, LISTED)
    held = purchases.held_by([run.id for run in runs])
    listed = []
    for run in runs:
        answer = run.resolved or {}
        reservation = held.get(run.id)
        listed.append(
            {
                "eval_id": eval_report.eval_id(run.id),
                "status": eval_report.STATUS[RunStatus(run.status)],
                "created_at": run.received_at.isoformat(),
                "policy": answer.get("model"),
                "model_version": answer.get("model_version"),
                "benchmark": answer.get("benchmark"),
                "benchmark_version": answer.get("benchmark_version"),
                "adapter": answer.get("adapter"),
                "episodes": run.episodes_total,
                "metric": "success",
                "value": (run.scores or {}).get("primary"),
                "cost_usd": eval_report.cost_of(reservation),
                "cost_settled": reservation is None or reservation.charged_units is not None,
            }
        )
    return listed


def _span(seeds: list[int]) -> str:
    """Seeds as the SDK prints them: `0-49` for a run, else the list."""
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ",".join(map(str, seeds))
