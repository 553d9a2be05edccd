"""The Positronic front door: every route of `platform_client.routes`, bound to the contract's own request and
response models (`positronic-platform-client==0.37.1`), translated to and from the platform's core. Its
refusals answer in the contract's envelope (`errors.py`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request, Response
from fastapi.responses import JSONResponse
from platform_client import routes
from platform_client.boards import BoardRef
from platform_client.catalog import EvalListResponse
from platform_client.enums import BoardVisibility, KeyStatus, SubmissionStatus
from platform_client.eval_plan import EvalPlan, PrivateEval
from platform_client.ids import ApiKey, OrgSlug, SubmissionId, UserId
from platform_client.requests import CancelRequest, RegisterRequest
from platform_client.responses import (
    ArtifactEntry,
    ArtifactListResponse,
    AuthConfig,
    BaselineMark,
    BoardListResponse,
    BoardSummary,
    CancelResponse,
    DataBackedReplayLink,
    MeResponse,
    RankingRow,
    RankingsResponse,
    RegisterResponse,
    ResolvedPlan,
    Scores,
    SubmissionCreateResponse,
    SubmissionListResponse,
)
from positronic_evals.evals import EvalRef
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from yardstick.core.accounts import Caller
from yardstick.core.boards import page_url
from yardstick.core.idempotency import request_digest
from yardstick.core.lifecycle import summarize_run
from yardstick.core.platform import Platform
from yardstick.core.refusals import bad_request
from yardstick.core.runs import Filing, RunPlan, org_for
from yardstick.core.signing import ARTIFACTS_PATH
from yardstick.http.answers import json_answer
from yardstick.http.auth import MaybeWho, Who
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat, Purch, SignInService
from yardstick.positronic import billing_routes, keys_routes, plans, rig_plans, rig_routes
from yardstick.positronic.catalog_view import TaskRows, eval_summary, tasks_view
from yardstick.positronic.errors import POSITRONIC, quota_limit, reason_code
from yardstick.positronic.images import pin_images
from yardstick.positronic.own_routes import (
    BOARD_CURVES,
    BOARD_PAIRWISE,
    SUBMISSION_DETAILS,
    SUBMISSIONS_UNTIL,
)
from yardstick.positronic.public_evals import unhosted_summaries
from yardstick.positronic.views import kept_view, list_row, status_view, waits_on
from yardstick.scoring.sequential import ALPHA
from yardstick.store import rounds
from yardstick.store.models import Org
from yardstick.store.states import Contract, RunStatus


def answer(model: BaseModel) -> Response:
    return json_answer(model)


def submission_id(value: str, field: str = "id") -> int:
    try:
        return int(SubmissionId.parse(value))
    except (ValueError, TypeError):
        raise bad_request(
            f"{field}: {value!r} is not a submission id (bare hexadecimal, 0 < id < 2**63)"
        ) from None


def resolution_of(platform: Platform, caller: Caller, plan: EvalPlan) -> tuple[Org, plans.Resolution]:
    """The plan resolved against the catalogue its org offers, with its credit quote where the org pays as
    it goes."""
    named = plan.request_type.org if isinstance(plan.request_type, PrivateEval) else None
    org = org_for(caller, named, field="request_type.org")
    resolution = plans.resolve(
        plan,
        platform.catalog(caller, org),
        transaction_key=plan.transaction_key,
        open_competitions=platform.settings.open_competitions,
    )
    rig_plans.check(platform, org, resolution.run_plan(plan))
    platform.reach.check(resolution.run_plan(plan).endpoints.values())
    quote = platform.ledger.quote(platform.runs.billing_mode(org), resolution.run_plan(plan).priced())
    if quote is None:
        return org, resolution
    return org, resolution.with_quote(quote)


accounts = door_router(POSITRONIC)


@accounts.get(routes.AUTH_CONFIG, response_model=AuthConfig)
def auth_config(sign_in: SignInService) -> Response:
    """The sign-ins `users.register` takes: GitHub tokens when a GitHub provider is configured; never
    WorkOS. The platform's own device flow (`yardstick login`) and OpenID Connect issuers are named under
    `yardstick`, which the contract's client ignores."""
    body = AuthConfig(github_registration=sign_in.github, workos=None).model_dump(mode="json")
    body["yardstick"] = {
        "device_authorization_path": "/oauth/device/code",
        "token_path": "/oauth/token",
        "oidc_issuers": list(sign_in.settings.oidc_issuers),
    }
    return JSONResponse(body)


@accounts.post(routes.USERS_REGISTER, response_model=RegisterResponse, responses=refusals(401, 403, 503))
def users_register(body: RegisterRequest, request: Request, sign_in: SignInService) -> Response:
    """Create-or-return the user behind a sign-in credential (checked with its provider within this
    call): `created` with a key, `existing` without one, `rotated` (with `rotate`) revoking what earlier
    registrations minted."""
    done = sign_in.register(body.credential, body.alias, body.rotate)
    registered = RegisterResponse(
        user_id=UserId(done.user_id),
        # Where a user's artifacts are handed out: every link `submissions.artifacts` signs begins here.
        artifact_location=str(request.base_url).rstrip("/") + ARTIFACTS_PATH + "/",
        api_key=ApiKey(done.api_key) if done.api_key else None,
        key_status=KeyStatus[done.key_status],
    )
    return JSONResponse(registered.model_dump(mode="json"), headers={"Cache-Control": "no-store"})


@accounts.get(routes.USERS_ME, response_model=MeResponse)
async def users_me(plat: Plat, who: Who) -> Response:
    # On the event loop: the caller is remembered and its quotas are one short read (`Runs.quotas`).
    quotas = await plat.runs.quotas(who)
    first = who.orgs[0] if who.orgs else None
    return answer(
        MeResponse(
            user_id=UserId(who.user_id),
            alias=who.alias,
            tenant=first.slug if first else "",
            plan=first.plan if first else "none",
            quota=[quota_limit(q) for q in quotas],
            client=next((o.slug for o in who.orgs if o.may_compose), None),
            organizations=[OrgSlug(o.slug) for o in who.orgs],
        )
    )


submissions = door_router(POSITRONIC)


@submissions.get(routes.CATALOG_EVALS, response_model=EvalListResponse)
def catalog_evals(plat: Plat, who: Who) -> Response:
    offered = plat.catalog(who).evals.values()
    listed = [eval_summary(ev) for ev in offered if ev.accepting]
    return answer(EvalListResponse(evals=listed + unhosted_summaries()))


@submissions.get(routes.CATALOG_TASKS, response_model=TaskRows, responses=refusals(403))
def catalog_tasks(plat: Plat, who: Who) -> Response:
    return answer(tasks_view(plat.catalog(who)))


@submissions.post(routes.SUBMISSIONS_RESOLVE, response_model=ResolvedPlan, responses=refusals(403, 404, 409))
def submissions_resolve(plan: EvalPlan, plat: Plat, who: Who) -> Response:
    return answer(resolution_of(plat, who, plan)[1].resolved)


@submissions.post(
    routes.SUBMISSIONS_CREATE,
    response_model=SubmissionCreateResponse,
    responses=refusals(402, 403, 404, 409, 429),
)
def submissions_create(plan: EvalPlan, plat: Plat, who: Who, purchases: Purch) -> Response:
    """Admit a plan: resolved, within quota, its credits held, its episodes queued. The same transaction
    key with the same plan returns the first submission (not charged again); with another plan it is a
    conflict."""
    return _create(plan, plat, who, purchases)


class StoppingRequest(BaseModel):
    """A rule that stops a run early: `until` "decided" (every gate decided) or "width<=W"; the gates on the
    true success rate; the error allowed. The plan's trials a task are its cap."""

    until: str
    gates: list[str] = []
    alpha: float = ALPHA


class UntilRequest(BaseModel):
    plan: EvalPlan
    stopping: StoppingRequest


@submissions.post(
    SUBMISSIONS_UNTIL, response_model=SubmissionCreateResponse, responses=refusals(402, 403, 404, 409, 429)
)
def submissions_until(body: UntilRequest, plat: Plat, who: Who, purchases: Purch) -> Response:
    """Yardstick's own: a plan that grows in rounds on the queue until its rule is met (or its trials run
    out), answered as `submissions.create` answers. A contract client's plan plays its fixed count."""
    return _create(body.plan, plat, who, purchases, body.stopping)


def _stopping(request: StoppingRequest, run_plan: RunPlan) -> dict[str, Any]:
    """The rule, checked against the plan it stops: one endpoint, every trial of its tasks (not a sample)."""
    if len(run_plan.endpoints) != 1:
        raise bad_request(
            f"stopping: a rule stops a run of one endpoint, not {len(run_plan.endpoints)} (compare two "
            "policies with `yardstick eval compare`)",
            field="stopping",
        )
    if run_plan.sampled:
        raise bad_request("stopping: a sample fixes its trials; a rule takes them in order", field="stopping")
    if run_plan.rig_shape is not None:
        raise bad_request(
            "stopping: a rig plan is played by an operator in the order its plan fixed, not grown in rounds",
            field="stopping",
        )
    if not run_plan.episodes:
        raise bad_request("stopping: the plan has no episodes for a rule to grow", field="stopping")
    if not 0.0 < request.alpha <= 0.5:
        raise bad_request(f"stopping.alpha: {request.alpha} is outside (0, 0.5]", field="stopping.alpha")
    tasks = list(dict.fromkeys(e.task_id for e in run_plan.episodes))
    cap = 1 + max(e.trial for e in run_plan.episodes)
    try:
        return rounds.new_stopping(request.until, request.gates, request.alpha, tasks, cap)
    except ValueError as exc:
        raise bad_request(f"stopping: {exc}", field="stopping") from None


def _create(
    plan: EvalPlan, plat: Platform, who: Caller, purchases: Any, stopping: StoppingRequest | None = None
) -> Response:
    org, resolution = resolution_of(plat, who, plan)
    body = plan.model_dump(mode="json")
    pinning = pin_images(plat, resolution.run_plan(plan), plan)
    rule = None if stopping is None else _stopping(stopping, pinning.plan)
    filing = Filing(
        plan=pinning.plan,
        contract=Contract.POSITRONIC,
        digest=request_digest(body if rule is None else {"plan": body, "stopping": rule}),
        request=body,
        answer=resolution.resolved.model_dump(mode="json"),
        transaction_key=plan.transaction_key,
        alias=plan.alias,
        quote=resolution.quote,
        stopping=rule,
    )
    run, fresh = plat.runs.file(who, org, filing)
    if fresh and pinning.refused is not None:
        # Filed, so counted and charged; ended before a single episode, saying why (the contract's rule).
        kind, reason = pinning.refused
        plat.lifecycle.fail(run.id, kind, reason)
        run = plat.runs.get(who, run.id, Contract.POSITRONIC)
    return answer(
        SubmissionCreateResponse(
            submission_id=SubmissionId(run.id),
            policy_image_digest=pinning.digest if pinning.refused is None else None,
            status=SubmissionStatus[run.status],
            reason_code=reason_code(run.failure),
            resolved=ResolvedPlan.model_validate(run.resolved),
            billing=billing_routes.request_billing(purchases, run.id),
        )
    )


@submissions.get(routes.SUBMISSIONS_GET, responses=refusals(404))
async def submissions_get(request: Request, plat: Plat, who: Who, id: Annotated[str, Query()]) -> Response:
    """Clients poll it until a run ends, and read it after: an ended run this process has read before
    is answered on the event loop (`core.ended`: nothing to read), any other in a thread."""
    run_id, base_url = submission_id(id), str(request.base_url)
    kept = plat.runs.kept(who, run_id, Contract.POSITRONIC)
    if kept is not None and (view := kept_view(plat, kept, base_url)) is not None:
        return json_answer(view)

    def read() -> Response:
        with plat.db.one_read():
            run = plat.runs.get(who, run_id, Contract.POSITRONIC)
            return json_answer(status_view(plat, run, base_url))

    return await run_in_threadpool(read)


@submissions.get(SUBMISSION_DETAILS, responses=refusals(404))
def submission_details(plat: Plat, who: Who, id: Annotated[str, Query()]) -> Response:
    """Yardstick's own of a run: each endpoint's success with its interval (the contract's `scores.primary`
    pools a run's endpoints, which scores no one policy); each endpoint named `name@checkpoint` with its
    point on that policy's curve and whether it regressed (`core.checkpoints`); the rounds and looks of a
    run stopped by a rule."""
    run = plat.runs.get(who, submission_id(id), Contract.POSITRONIC)
    _, per_endpoint = summarize_run(plat.runs.episodes(run.id), {})
    return JSONResponse(
        {
            "endpoints": {name: part["overall"].get("success") for name, part in per_endpoint.items()},
            "checkpoints": [p.as_json() for p in plat.checkpoints.of_run(run)],
            "stopping": run.stopping,
        }
    )


@submissions.get(routes.SUBMISSIONS_LIST, response_model=SubmissionListResponse)
def submissions_list(plat: Plat, who: Who, after: str | None = None, limit: int | None = None) -> Response:
    if limit is not None and limit < 1:
        raise bad_request(f"limit: {limit} is not a page size (at least 1)")
    rows, more = plat.runs.page(
        who, Contract.POSITRONIC, submission_id(after, "after") if after else None, limit
    )
    # As submissions.get reads it: a pending run waiting on no worker, or no rig of its shape, is blocked.
    waiting: dict[tuple[int, str | None], bool] = {}
    for row in rows:
        if row.status == RunStatus.PENDING and (row.org_id, row.rig_shape) not in waiting:
            waiting[(row.org_id, row.rig_shape)] = waits_on(plat, row) is not None
    return answer(
        SubmissionListResponse(
            submissions=[list_row(r, blocked=waiting.get((r.org_id, r.rig_shape), False)) for r in rows],
            next=SubmissionId(more) if more else None,
        )
    )


@submissions.post(routes.SUBMISSIONS_CANCEL, response_model=CancelResponse, responses=refusals(404))
def submissions_cancel(body: CancelRequest, plat: Plat, who: Who) -> Response:
    status, refunded = plat.runs.cancel(who, int(body.id))
    return answer(CancelResponse(status=SubmissionStatus[status], refunded=refunded))


@submissions.get(routes.SUBMISSIONS_ARTIFACTS, response_model=ArtifactListResponse, responses=refusals(404))
def submissions_artifacts(
    request: Request,
    plat: Plat,
    who: Who,
    id: str,
    prefix: str | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> Response:
    if limit is not None and limit < 1:
        raise bad_request(f"limit: {limit} is not a page size (at least 1)")
    run = plat.runs.get(who, submission_id(id), Contract.POSITRONIC)
    if run.rig_shape is not None:
        raise bad_request(
            f"id: submission {run.id:x} is a rig plan, whose episodes its rig wrote to your organisation's "
            "own store: read them under the prefix its artifacts.result names (submissions.get), or on its "
            "replay page"
        )
    entries, more = plat.links.page(run, prefix, after, limit, str(request.base_url))
    return answer(
        ArtifactListResponse(
            artifacts=[ArtifactEntry(key=k, size=s, url=u) for k, s, u in entries], next=more
        )
    )


@submissions.get(routes.RANKINGS_LIST, response_model=BoardListResponse)
def rankings_list(plat: Plat, who: MaybeWho) -> Response:
    boards = [
        BoardSummary(
            board=BoardRef(b.slug),
            title=b.title,
            eval=EvalRef(ev.slug),
            primary_metric=ev.primary_metric,
            visibility=BoardVisibility[b.visibility],
        )
        for b, ev in plat.boards.boards(who)
    ]
    return answer(BoardListResponse(boards=boards))


@submissions.get(BOARD_PAIRWISE, responses=refusals(404))
def board_pairwise(plat: Plat, who: MaybeWho, board: str) -> Response:
    """Yardstick's own: the board's Bradley–Terry ranking of the policies that met on the same trials."""
    return JSONResponse(plat.pairwise.read(who, board).as_json())


@submissions.get(BOARD_CURVES, responses=refusals(404))
def board_curves(plat: Plat, who: MaybeWho, board: str) -> Response:
    """Yardstick's own: each policy's success against its checkpoints on the board, regressions flagged."""
    _, _, curves = plat.checkpoints.read(who, board)
    return JSONResponse({"board": board, "curves": [c.as_json() for c in curves]})


@submissions.get(routes.RANKINGS_GET, response_model=RankingsResponse, responses=refusals(404))
async def rankings_get(request: Request, plat: Plat, who: MaybeWho, board: str) -> Response:
    """Read by pages and clients polling at once: a board this process read within the last second is
    answered on the event loop (`core.boards`), any other read in a thread."""
    kept = plat.boards.kept(who, board)
    found, ev, rows = kept if kept is not None else await run_in_threadpool(plat.boards.board, who, board)
    pages = {r.run_id: page_url(str(request.base_url), r.replay_token) for r in rows if r.replay_token}
    ranked = [
        RankingRow(
            rank=r.rank,
            display_name=r.display_name,
            tag=r.tag,
            scores=Scores(primary=r.primary),
            submission_id=SubmissionId(r.run_id),
            submitted_at=r.submitted_at,
            baseline=BaselineMark(publisher=r.baseline_publisher) if r.baseline_publisher else None,
            replay=DataBackedReplayLink(url=pages[r.run_id], data_url=pages[r.run_id] + "data.json")
            if r.run_id in pages
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


# Every route of this door, in one router: the submissions and boards, the accounts, billing and keys.
router = door_router(POSITRONIC)
router.include_router(submissions)
router.include_router(accounts)
router.include_router(billing_routes.router)
router.include_router(keys_routes.router)
router.include_router(rig_routes.router)
