"""The Positronic front door: every route of `platform_client.routes` but billing, bound to the contract's
own request and response models (`positronic-platform-client==0.37.1`), translated to and from the
platform's use-cases. Nothing below this module imports the contract's wire models but plan resolution,
which reads an `EvalPlan` as the contract defines it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from platform_client import routes
from platform_client.boards import BoardRef
from platform_client.catalog import EvalListResponse, TaskListResponse
from platform_client.enums import BoardVisibility, ErrorCode, KeyStatus, ReasonCode, SubmissionStatus
from platform_client.eval_plan import EvalPlan
from platform_client.ids import ApiKey, OrgSlug, SubmissionId, UserId
from platform_client.requests import CancelRequest, RegisterRequest
from platform_client.responses import (
    ArtifactEntry,
    ArtifactListResponse,
    ArtifactRefs,
    AuthConfig,
    BaselineMark,
    BlockedSubmissionView,
    BoardListResponse,
    BoardSummary,
    CancelledSubmissionView,
    CancelResponse,
    DataBackedReplayLink,
    EpisodeCounts,
    ErroredSubmissionView,
    FinishedSubmissionView,
    MeResponse,
    PendingSubmissionView,
    QuotaLimit,
    RankingRow,
    RankingsResponse,
    RegisterResponse,
    ReplayLink,
    ResolvedPlan,
    RunningSubmissionView,
    RunSummary,
    Scores,
    SubmissionCreateResponse,
    SubmissionListResponse,
    SubmissionListRow,
)
from positronic_evals.evals import EvalRef
from pydantic import BaseModel

from yardstick.service import signin
from yardstick.service.artifacts import ARTIFACTS_PATH
from yardstick.service.catalog_view import eval_summary, tasks_view
from yardstick.service.errors import ApiError, bad_request
from yardstick.service.identity import Caller
from yardstick.service.platform import Platform, page_url, quota_dict
from yardstick.store.models import Submission

router = APIRouter()


def platform(request: Request) -> Platform:
    found: Platform = request.app.state.platform
    return found


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else None


def caller(request: Request, plat: Annotated[Platform, Depends(platform)]) -> Caller:
    found = plat.authenticate(_bearer(request))
    if found is None:
        raise ApiError(ErrorCode.unauthorized, "a valid API key is required: Authorization: Bearer <key>")
    return found


def maybe_caller(request: Request, plat: Annotated[Platform, Depends(platform)]) -> Caller | None:
    key = _bearer(request)
    if key is None:
        return None
    return caller(request, plat)


Plat = Annotated[Platform, Depends(platform)]
Who = Annotated[Caller, Depends(caller)]
MaybeWho = Annotated[Caller | None, Depends(maybe_caller)]


def answer(model: BaseModel) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"))


def submission_id(value: str, field: str = "id") -> int:
    try:
        return int(SubmissionId.parse(value))
    except (ValueError, TypeError):
        raise bad_request(
            f"{field}: {value!r} is not a submission id (bare hexadecimal, 0 < id < 2**63)"
        ) from None


@router.get(routes.AUTH_CONFIG, response_model=AuthConfig)
def auth_config(plat: Plat) -> JSONResponse:
    """The sign-ins `users.register` takes: GitHub tokens when a GitHub provider is configured; never WorkOS.
    The platform's own device flow (`yardstick login`) and OpenID Connect issuers are named under `yardstick`,
    which the contract's client ignores."""
    service = signin.service_for(plat)
    body = AuthConfig(github_registration=service.github, workos=None).model_dump(mode="json")
    body["yardstick"] = {
        "device_authorization_path": "/oauth/device/code",
        "token_path": "/oauth/token",
        "oidc_issuers": list(service.settings.oidc_issuers),
    }
    return JSONResponse(body)


@router.post(routes.USERS_REGISTER, response_model=RegisterResponse)
def users_register(body: RegisterRequest, request: Request, plat: Plat) -> JSONResponse:
    """Create-or-return the user behind a sign-in credential (checked with its provider within this call):
    `created` with a key, `existing` without one, `rotated` (with `rotate`) revoking what earlier
    registrations minted."""
    done = signin.service_for(plat).register(body.credential, body.alias, body.rotate)
    registered = RegisterResponse(
        user_id=UserId(done.user_id),
        # Where a user's artifacts are handed out: every link `submissions.artifacts` signs begins here.
        artifact_location=str(request.base_url).rstrip("/") + ARTIFACTS_PATH + "/",
        api_key=ApiKey(done.api_key) if done.api_key else None,
        key_status=KeyStatus[done.key_status],
    )
    return JSONResponse(registered.model_dump(mode="json"), headers={"Cache-Control": "no-store"})


@router.get(routes.USERS_ME, response_model=MeResponse)
def users_me(plat: Plat, who: Who) -> JSONResponse:
    first = who.orgs[0] if who.orgs else None
    return answer(
        MeResponse(
            user_id=UserId(who.user_id),
            alias=who.alias,
            tenant=first.slug if first else "",
            plan=first.plan if first else "none",
            quota=[QuotaLimit.model_validate(quota_dict(q)) for q in plat.quotas(who)],
            client=next((o.slug for o in who.orgs if o.may_compose), None),
            organizations=[OrgSlug(o.slug) for o in who.orgs],
        )
    )


@router.get(routes.CATALOG_EVALS, response_model=EvalListResponse)
def catalog_evals(plat: Plat, who: Who) -> JSONResponse:
    offered = plat.offer(who).evals.values()
    return answer(EvalListResponse(evals=[eval_summary(ev) for ev in offered if ev.accepting]))


@router.get(routes.CATALOG_TASKS, response_model=TaskListResponse)
def catalog_tasks(plat: Plat, who: Who) -> JSONResponse:
    return answer(tasks_view(plat.offer(who)))


@router.post(routes.SUBMISSIONS_RESOLVE, response_model=ResolvedPlan)
def submissions_resolve(plan: EvalPlan, plat: Plat, who: Who) -> JSONResponse:
    return answer(plat.resolve(who, plan).resolved)


@router.post(routes.SUBMISSIONS_CREATE, response_model=SubmissionCreateResponse)
def submissions_create(plan: EvalPlan, plat: Plat, who: Who) -> JSONResponse:
    row, _ = plat.create(who, plan)
    return answer(
        SubmissionCreateResponse(
            submission_id=SubmissionId(row.id),
            status=SubmissionStatus[row.status],
            reason_code=ReasonCode[row.reason_code] if row.reason_code else None,
            resolved=ResolvedPlan.model_validate(row.resolved),
            billing=plat.billing.request_billing(row.id),
        )
    )


@router.get(routes.SUBMISSIONS_GET)
def submissions_get(request: Request, plat: Plat, who: Who, id: Annotated[str, Query()]) -> JSONResponse:
    row = plat.submission(who, submission_id(id))
    return JSONResponse(view(plat, row, str(request.base_url)).model_dump(mode="json"))


def _counts(row: Submission) -> EpisodeCounts:
    return EpisodeCounts(
        total=row.episodes_total,
        done=row.episodes_done,
        outstanding=max(row.episodes_total - row.episodes_done, 0),
    )


def view(plat: Platform, row: Submission, base_url: str) -> BaseModel:
    """The `submissions.get` variant of the run's status."""
    counts = _counts(row)
    common: dict[str, Any] = {
        "id": SubmissionId(row.id),
        "episodes": counts,
        "resolved": ResolvedPlan.model_validate(row.resolved),
    }
    runs = [
        RunSummary(run_tag="attempt-1", started_at=row.started_at, ended_at=row.ended_at, episodes=counts)
    ]
    if row.status == "pending":
        if not plat.workers_alive():
            return BlockedSubmissionView(
                **common,
                reason="no worker is running: start one with `yardstick worker`"
                " (or a `yardstick server` without --no-worker)",
            )
        return PendingSubmissionView(
            **common,
            alias=row.alias,
            received_at=row.received_at,
            queued_at=row.received_at,
            queue_position=plat.queue_position(row.id),
        )
    if row.status == "running":
        return RunningSubmissionView(
            **common,
            runs=runs,
            running_since=row.started_at or row.received_at,
            stage="episodes",
            stage_detail=f"{row.episodes_done} of {row.episodes_total}",
        )
    if row.status == "finished":
        refs = _refs(plat, row, base_url)
        # A run is marked finished only after its result.json landed (runs.finish).
        assert refs is not None, f"finished submission {row.id:x} has no result.json"
        return FinishedSubmissionView(
            **common,
            runs=runs,
            scores=Scores(primary=(row.scores or {}).get("primary")),
            artifacts=refs,
            replay=ReplayLink(url=page_url(base_url, row.replay_token)) if row.replay_token else None,
        )
    if row.status == "errored":
        return ErroredSubmissionView(
            **common,
            runs=runs,
            reason=row.reason,
            artifacts=_refs(plat, row, base_url),
            reason_code=ReasonCode[row.reason_code] if row.reason_code else None,
        )
    return CancelledSubmissionView(**common, cancelled_at=row.cancelled_at)


def _refs(plat: Platform, row: Submission, base_url: str) -> ArtifactRefs | None:
    """Links to the run's own records; None where it wrote none (the contract leaves `artifacts` out)."""
    urls = plat.artifact_urls(row.id, ("result.json", "diagnostics.json"), base_url)
    if "result.json" not in urls:
        return None
    return ArtifactRefs(result=urls["result.json"], diagnostics=urls.get("diagnostics.json"))


@router.get(routes.SUBMISSIONS_LIST, response_model=SubmissionListResponse)
def submissions_list(
    plat: Plat, who: Who, after: str | None = None, limit: int | None = None
) -> JSONResponse:
    if limit is not None and limit < 1:
        raise bad_request(f"limit: {limit} is not a page size (at least 1)")
    rows, more = plat.list_submissions(who, submission_id(after, "after") if after else None, limit)
    # As submissions.get reads it: a pending run with no worker alive is blocked on one.
    stalled = any(r.status == "pending" for r in rows) and not plat.workers_alive()
    listed = [
        SubmissionListRow(
            id=SubmissionId(r.id),
            user_id=UserId(r.user_id),
            alias=r.alias,
            eval=r.plan.get("eval"),
            status=SubmissionStatus.blocked
            if stalled and r.status == "pending"
            else SubmissionStatus[r.status],
            reason_code=ReasonCode[r.reason_code] if r.reason_code else None,
            episodes=_counts(r),
            received_at=r.received_at,
        )
        for r in rows
    ]
    return answer(SubmissionListResponse(submissions=listed, next=SubmissionId(more) if more else None))


@router.post(routes.SUBMISSIONS_CANCEL, response_model=CancelResponse)
def submissions_cancel(body: CancelRequest, plat: Plat, who: Who) -> JSONResponse:
    status, refunded = plat.cancel(who, int(body.id))
    return answer(CancelResponse(status=SubmissionStatus[status], refunded=refunded))


@router.get(routes.SUBMISSIONS_ARTIFACTS, response_model=ArtifactListResponse)
def submissions_artifacts(
    request: Request,
    plat: Plat,
    who: Who,
    id: str,
    prefix: str | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> JSONResponse:
    if limit is not None and limit < 1:
        raise bad_request(f"limit: {limit} is not a page size (at least 1)")
    entries, more = plat.artifact_page(who, submission_id(id), prefix, after, limit, str(request.base_url))
    return answer(
        ArtifactListResponse(
            artifacts=[ArtifactEntry(key=k, size=s, url=u) for k, s, u in entries], next=more
        )
    )


@router.get(routes.RANKINGS_LIST, response_model=BoardListResponse)
def rankings_list(plat: Plat, who: MaybeWho) -> JSONResponse:
    boards = [
        BoardSummary(
            board=BoardRef(b.slug),
            title=b.title,
            eval=EvalRef(ev.slug),
            primary_metric=ev.primary_metric,
            visibility=BoardVisibility[b.visibility],
        )
        for b, ev in plat.boards(who)
    ]
    return answer(BoardListResponse(boards=boards))


@router.get(routes.RANKINGS_GET, response_model=RankingsResponse)
def rankings_get(request: Request, plat: Plat, who: MaybeWho, board: str) -> JSONResponse:
    found, ev, rows = plat.board(who, board)
    pages = {r.submission_id: page_url(str(request.base_url), r.replay_token) for r in rows if r.replay_token}
    ranked = [
        RankingRow(
            rank=r.rank,
            display_name=r.display_name,
            tag=r.tag,
            scores=Scores(primary=r.primary),
            submission_id=SubmissionId(r.submission_id),
            submitted_at=r.submitted_at,
            baseline=BaselineMark(publisher=r.baseline_publisher) if r.baseline_publisher else None,
            replay=DataBackedReplayLink(
                url=pages[r.submission_id], data_url=pages[r.submission_id] + "data.json"
            )
            if r.submission_id in pages
            else None,
        )
        for r in rows
    ]
    return answer(
        RankingsResponse(
            board=BoardRef(found.slug),
            eval=EvalRef(ev.slug),
            primary_metric=ev.primary_metric,
            rankings=ranked,
        )
    )
