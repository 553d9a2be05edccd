"""The Sequences front door's eval routes: `POST /v1/eval` (a dry run, or a run on the platform's queue and
workers like any other), the report, its details, episodes (paged, and as CSV), logs, videos, trajectories,
and cancelling. An eval names a policy the caller may run (`model`) and a benchmark (`benchmark`): the
org's registered ones, or the platform's catalogue."""

from __future__ import annotations

import asyncio
import csv
import inspect
import io
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from yardstick.billing.purchases import Purchases
from yardstick.billing.terms import credits_value
from yardstick.catalog import resolve as resolve_class
from yardstick.core.accounts import Caller
from yardstick.core.catalog import CatalogEval
from yardstick.core.ended import has_ended
from yardstick.core.idempotency import request_digest
from yardstick.core.ledger import Quote
from yardstick.core.lifecycle import ATTEMPT
from yardstick.core.platform import Platform
from yardstick.core.refusals import Refusal, RefusalKind, bad_request, not_found
from yardstick.core.runs import BenchmarkTarget, Filing, hosted_ref, org_for
from yardstick.engine.failures import FailureKind
from yardstick.engine.recording import TRAJECTORY, episode_folder
from yardstick.http.auth import Plat, Who
from yardstick.http.routing import door_router, refusals
from yardstick.sequences import evals, paths, report
from yardstick.sequences.errors import SEQUENCES
from yardstick.sequences.models import (
    Estimate,
    EvalDryRunResponse,
    EvalReport,
    EvalRequest,
    EvalResponse,
    InferParam,
)
from yardstick.store.models import Hosted, HostedVersion, Run, RunEpisode, ServedPolicy
from yardstick.store.states import ACTIVE_RUNS, Contract, EpisodeState, HostedKind, RunStatus, TargetKind

PAGE, PAGE_CAP = 50, 500
# How long a report waits for a playing run to end before answering that it still runs.
REPORT_WAIT_S, REPORT_POLL_S = 5.0, 0.2
CSV_COLUMNS = (
    "index", "arm", "task", "seed", "start", "repeat", "success", "seconds", "max_seconds", "paused", "steps",
    "wall_s", "terminated", "truncated", "timed_out", "error",
)  # fmt: skip
_RERUN_FIELDS = {"rerun_of", "rerun_unsuccessful_of", "dry_run"}
TIMEOUTS = (FailureKind.POLICY_TIMEOUT, FailureKind.BENCHMARK_TIMEOUT, FailureKind.LATENCY_BUDGET)
OUTCOMES = ("success", "failure", "error", "truncated", "timed_out", "pending")
Outcome = Annotated[str | None, Query(pattern=f"^({'|'.join(OUTCOMES)})$")]


def offered_benchmark(platform: Platform, caller: Caller, name: str) -> evals.OfferedBenchmark:
    """The benchmark an eval names: the org's own (its newest ready version), else one of the catalogue's
    evals the caller may name."""
    org = org_for(caller, None)
    hosted = platform.hosting.ready(org.id, HostedKind.BENCHMARK, name)
    if hosted is not None:
        return _from_hosted(*hosted)
    catalog = platform.catalog(caller)
    found = catalog.evals.get(name)
    if found is None:
        own = [h.name for h, _ in platform.hosting.listed(org.id, HostedKind.BENCHMARK)]
        raise evals.unknown("benchmark", name, sorted({*own, *catalog.evals}))
    return _from_catalog(found)


def _from_hosted(hosted: Hosted, version: HostedVersion) -> evals.OfferedBenchmark:
    declaration = (version.checked or {}).get("declaration") or {}
    return evals.OfferedBenchmark(
        name=hosted.name,
        version=version.number,
        tasks=dict(declaration["tasks"]),
        seeds=tuple(declaration["seeds"]),
        max_seconds={task: float(limit) for task, limit in declaration["max_seconds"].items()},
        params=_params(declaration.get("params") or {}),
        target=BenchmarkTarget(hosted_ref(version.id), {}, {"video": True, "trajectory": True}),
    )


def _params(declared: Mapping[str, Any]) -> dict[str, InferParam]:
    return {name: InferParam.model_validate(param) for name, param in declared.items()}


def _from_catalog(evaluation: CatalogEval) -> evals.OfferedBenchmark:
    seeds = tuple(dict.fromkeys(seed for task in evaluation.tasks for seed in task.seeds))
    return evals.OfferedBenchmark(
        name=evaluation.slug,
        version=1,
        tasks={t.benchmark_task: t.description for t in evaluation.tasks},
        seeds=seeds,
        max_seconds={t.benchmark_task: float(t.default_cap_sec) for t in evaluation.tasks},
        params={},
        target=BenchmarkTarget.of(evaluation),
        catalog=evaluation,
        task_ids={t.benchmark_task: t.task_id for t in evaluation.tasks},
    )


def offered_policy(platform: Platform, caller: Caller, name: str) -> evals.OfferedPolicy:
    """The policy an eval names: a deployment of the org's (its newest ready version, served in a box), else
    one the platform serves, its parameters those of its constructor that the platform leaves open (with a
    default of a plain type)."""
    org = org_for(caller, None)
    deployed = platform.hosting.ready(org.id, HostedKind.POLICY, name)
    if deployed is not None:
        hosted, version = deployed
        if hosted.stopped:
            raise Refusal(
                RefusalKind.CONFLICT, f"model: deployment {name!r} is stopped (seq policy start {name})"
            )
        declaration = (version.checked or {}).get("declaration") or {}
        settings = {k[len("params.") :]: v for k, v in hosted.settings.items() if k.startswith("params.")}
        return evals.OfferedPolicy(
            name=name,
            version=version.number,
            kind=TargetKind.HOSTED,
            spec=str(version.id),
            params=_params(declaration.get("params") or {}),
            defaults=settings,
        )
    served = platform.catalog(caller).served_policies
    if name not in served:
        own = [h.name for h, _ in platform.hosting.listed(org.id, HostedKind.POLICY)]
        raise evals.unknown("model", name, sorted({*own, *served}))
    with platform.db.reading() as session:
        row = session.get(ServedPolicy, name)
    params = _open_params(row.reference, row.params) if row is not None else {}
    return evals.OfferedPolicy(name=name, version=1, kind=TargetKind.SERVED, spec=name, params=params)


def _open_params(reference: str, fixed: Mapping[str, Any]) -> dict[str, InferParam]:
    """A served policy's constructor keywords with plain defaults, less those its spec fixes."""
    try:
        cls = resolve_class("policy", reference)
    except ValueError:
        return {}
    kinds = {bool: "bool", int: "int", float: "float", str: "str"}
    found = {}
    for name, parameter in inspect.signature(cls).parameters.items():
        kind = kinds.get(type(parameter.default))
        if kind is not None and name not in fixed and not name.startswith("_"):
            found[name] = InferParam(type=kind, default=parameter.default)  # type: ignore[arg-type]
    return found


# The fewest hex digits of an eval id that may name it, as the start of the id: what `seq eval ls` shows.
SHORT_ID_HEX = 5


def _quoted(plat: Platform, mode: str, resolved: evals.Resolved) -> tuple[Quote | None, float]:
    """The ledger's quote for the eval as it stands (None: this install charges nothing) and its price in
    dollars (credits are the install's dollars)."""
    quote = plat.ledger.quote(mode, resolved.plan.priced())
    return quote, credits_value(quote.total_units) if quote is not None else 0.0


def _within_cap(plat: Platform, mode: str, resolved: evals.Resolved, cap_usd: float) -> evals.Resolved:
    """The eval cut to the most episodes whose held cost (each at its task's cap) stays within `cap_usd`:
    an eval never spends past its cap, and stops there (`stop_reason: spend_cap`). Refused when not even one
    episode fits."""

    def cost(keep: int) -> float:
        return _quoted(plat, mode, resolved.first(keep))[1]

    low, high = 0, len(resolved.plan.episodes)  # cost(low) <= cap < cost(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if cost(middle) <= cap_usd else (low, middle)
    if low == 0:
        raise bad_request(
            f"spend_cap_usd: ${cap_usd:,.2f} covers no episode of this eval: one may cost up to"
            f" ${cost(1):,.2f}"
        )
    return resolved.first(low)


def router(purchases: Purchases) -> APIRouter:
    door = door_router(SEQUENCES, tags=["sequences: evals"])

    @door.post(
        paths.EVALS,
        response_model=EvalResponse | EvalDryRunResponse,
        responses=refusals(402, 403, 404, 409, 429),
    )
    def create_eval(body: EvalRequest, request: Request, plat: Plat, who: Who) -> JSONResponse:
        """Run a policy on a benchmark (or, with `dry_run`, say what would run). Answers at once; the eval
        plays on the platform's workers."""
        asked, only = _with_rerun(plat, who, body)
        if asked.model is None or asked.benchmark is None:
            missing = [name for name in ("model", "benchmark") if getattr(asked, name) is None]
            raise bad_request(f"{', '.join(missing)}: an eval names a model and a benchmark (or reruns one)")
        org = org_for(who, None)
        resolved = evals.resolve(
            asked,
            offered_benchmark(plat, who, asked.benchmark),
            offered_policy(plat, who, asked.model),
            only=only,
        )
        if asked.replay == "none":
            resolved = resolved.unrecorded()
        mode = plat.runs.billing_mode(org)
        quote, cost = _quoted(plat, mode, resolved)
        asked_episodes = len(resolved.plan.episodes)
        if body.spend_cap_usd is not None and cost > body.spend_cap_usd:
            resolved = _within_cap(plat, mode, resolved, body.spend_cap_usd)
            quote, cost = _quoted(plat, mode, resolved)
        estimate = Estimate(
            wall_clock_s=_wall_clock(resolved),
            cost_usd=cost,
            default_timing=True,
            held_usd=cost if quote is not None else None,
        )
        layout = resolved.layout()
        if asked.dry_run or body.dry_run:
            notes = [f"{layout['selection']['episodes']} episodes on the platform's workers"]
            dry = EvalDryRunResponse(estimate=estimate, layout=layout, notes=notes)
            return JSONResponse(dry.model_dump(mode="json", exclude_none=True))
        sent = body.model_dump(mode="json", exclude_none=True)
        filing = Filing(
            plan=resolved.plan,
            contract=Contract.SEQUENCES,
            digest=request_digest(sent),
            request=asked.model_dump(mode="json", exclude_none=True),
            answer={
                "layout": layout,
                "model": resolved.policy.name,
                "model_version": resolved.policy.version,
                "benchmark": resolved.benchmark.name,
                "benchmark_version": resolved.benchmark.version,
                "arms": [
                    {"arm": a.number, "endpoint": a.endpoint, "params": a.shown()} for a in resolved.arms
                ],
                "rerun_of": body.rerun_of or body.rerun_unsuccessful_of,
                **(
                    {"spend_cap_cut": {"asked": asked_episodes, "kept": len(resolved.plan.episodes)}}
                    if len(resolved.plan.episodes) < asked_episodes
                    else {}
                ),
            },
            quote=quote,
            # What the run's page and lists call it: the eval names no catalogue eval of its own.
            alias=(
                f"{resolved.policy.name} v{resolved.policy.version} on"
                f" {resolved.benchmark.name} v{resolved.benchmark.version}"
            ),
        )
        run, _ = plat.runs.file(who, org, filing)
        answer = EvalResponse(eval_id=report.eval_id(run.id), estimate=estimate, arms=len(resolved.arms))
        return JSONResponse(answer.model_dump(mode="json", exclude_none=True))

    @door.get(paths.EVAL, response_model=EvalReport, responses=refusals(404))
    async def get_eval(eval_id: str, request: Request, plat: Plat, who: Who) -> Response:
        """The report. A run still playing is waited for a few seconds first: the CLI polls every 10 s, so a
        short eval answers `completed` on its first poll instead of one poll later."""
        known = report.run_id_of(eval_id)
        kept = plat.runs.kept(who, known, Contract.SEQUENCES) if known is not None else None
        base_url = str(request.base_url)
        if kept is not None and (body := plat.ended.get(_report_key(kept, base_url))) is not None:
            return Response(body, media_type="application/json")  # read and built before: no trip to a thread
        run = await run_in_threadpool(_run, plat, who, eval_id)
        deadline = time.monotonic() + REPORT_WAIT_S
        while run.status in ACTIVE_RUNS and time.monotonic() < deadline:
            await asyncio.sleep(REPORT_POLL_S)
            run = await run_in_threadpool(_run, plat, who, eval_id)

        def shown(latest: Run) -> str:
            with plat.db.one_read():
                episodes, held = plat.runs.episodes(latest.id), purchases.held(latest.id)
            built = report.build(latest, episodes, base_url=base_url, reservation=held)
            return built.model_dump_json(exclude_none=True)

        if has_ended(run.status):  # its report never changes again (`core.ended`): built once a process
            ended, key = run, _report_key(run, base_url)
            body = await run_in_threadpool(plat.ended.kept, key, lambda: shown(ended))
            return Response(body, media_type="application/json")
        # The episodes and the hold read in one trip to a thread, not two: a trip costs about a small query.
        return Response(await run_in_threadpool(shown, run), media_type="application/json")

    @door.get(paths.EVAL_DETAILS, responses=refusals(404))
    def eval_details(eval_id: str, plat: Plat, who: Who) -> JSONResponse:
        run = _run(plat, who, eval_id)
        episodes = plat.runs.episodes(run.id)
        answer = run.resolved or {}
        selection = answer.get("layout", {}).get("selection", {})
        return JSONResponse(
            {
                "manifest": {
                    "benchmark": answer.get("benchmark"),
                    "benchmark_version": answer.get("benchmark_version"),
                    "adapter": None,
                    "model": answer.get("model"),
                    "model_version": answer.get("model_version"),
                    "episodes": run.episodes_total,
                    "seeds": sorted({s for t in selection.get("tasks", []) for s in t["seeds"]}),
                    "params": (run.plan or {}).get("params"),
                    "rerun_of": answer.get("rerun_of"),
                },
                "progress": report.progress(run, episodes),
                "max_seconds": selection.get("max_seconds"),
                "repeats": {"episodes": selection.get("repeats", 0)},
                "means": report.means(episodes),
                "episodes_total": run.episodes_total,
                "time_limit": {
                    "note": "each episode runs at most its task's max_seconds on the robot's clock"
                },
            }
        )

    @door.get(paths.EVAL_EPISODES, responses=refusals(404))
    def eval_episodes(
        eval_id: str,
        plat: Plat,
        who: Who,
        limit: Annotated[int, Query(ge=1)] = PAGE,
        cursor: Annotated[str | None, Query()] = None,
        task: Annotated[list[str] | None, Query()] = None,
        outcome: Outcome = None,
        arm: Annotated[int | None, Query(ge=0)] = None,
    ) -> JSONResponse:
        run = _run(plat, who, eval_id)
        every = plat.runs.episodes(run.id)
        repeats = _repeats(every)
        chosen = _filtered(every, task, outcome, arm)
        offset = cursor_offset(cursor)
        size = min(limit, PAGE_CAP)
        page = chosen[offset : offset + size]
        more = offset + size < len(chosen)
        return JSONResponse(
            {
                "eval_id": report.eval_id(run.id),
                "episodes": [_episode_row(e, repeats[e.index]) for e in page],
                "total": len(chosen),
                "offset": offset,
                "next_cursor": str(offset + size) if more else None,
            }
        )

    @door.get(paths.EVAL_EPISODES_CSV, responses=refusals(404))
    def eval_episodes_csv(
        eval_id: str,
        plat: Plat,
        who: Who,
        task: Annotated[list[str] | None, Query()] = None,
        outcome: Outcome = None,
        arm: Annotated[int | None, Query(ge=0)] = None,
    ) -> Response:
        run = _run(plat, who, eval_id)
        every = plat.runs.episodes(run.id)
        repeats = _repeats(every)
        rows = [_episode_row(e, repeats[e.index]) for e in _filtered(every, task, outcome, arm)]
        names = sorted({name for row in rows for name in row["metrics"]})
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow([*CSV_COLUMNS, *(f"metrics.{name}" for name in names)])
        for row in rows:
            writer.writerow(
                [_cell(row.get(c)) for c in CSV_COLUMNS] + [_cell(row["metrics"].get(n)) for n in names]
            )
        return Response(out.getvalue(), media_type="text/csv")

    @door.get(paths.EVAL_LOGS, responses=refusals(404))
    def eval_logs(
        eval_id: str, plat: Plat, who: Who, limit: Annotated[int, Query(ge=1, le=5000)] = 500
    ) -> JSONResponse:
        """What happened, a line an event: the run's start and end, each episode that ended."""
        run = _run(plat, who, eval_id)
        lines: list[dict[str, Any]] = [{"ts": run.received_at.isoformat(), "line": "eval queued"}]
        if run.started_at is not None:
            lines.append({"ts": run.started_at.isoformat(), "line": "eval running"})
        for e in plat.runs.episodes(run.id):
            if e.finished_at is not None:
                lines.append({"ts": e.finished_at.isoformat(), "line": _episode_line(e)})
        if run.ended_at is not None:
            ended = report.STATUS[RunStatus(run.status)]
            lines.append({"ts": run.ended_at.isoformat(), "line": f"eval {ended}"})
        lines.sort(key=lambda line: line["ts"])
        return JSONResponse({"lines": lines[:limit]})

    @door.get(paths.EVAL_VIDEO, responses=refusals(404))
    def eval_video(eval_id: str, name: str, plat: Plat, who: Who) -> FileResponse:
        return _episode_file(
            plat, who, eval_id, name, ".mp4", lambda r: [v["file"] for v in r.get("videos", [])]
        )

    @door.get(paths.EVAL_TRAJECTORY, responses=refusals(404))
    def eval_trajectory(eval_id: str, name: str, plat: Plat, who: Who) -> FileResponse:
        return _episode_file(plat, who, eval_id, name, ".jsonl.gz", lambda r: [TRAJECTORY])

    @door.post(paths.EVAL_CANCEL, responses=refusals(404))
    def cancel_eval(eval_id: str, plat: Plat, who: Who) -> JSONResponse:
        run = _run(plat, who, eval_id)
        plat.runs.cancel(who, run.id)
        return JSONResponse({"eval_id": report.eval_id(run.id), "status": "canceled"})

    return door


def _report_key(run: Run, base_url: str) -> tuple[str, int, str]:
    """Where a process keeps an ended eval's report as sent (`core.ended`): it names its base URL."""
    return ("sequences.report", run.id, base_url)


def _run(platform: Platform, caller: Caller, eval_id: str) -> Run:
    """The eval `eval_id` names: a whole id, or the start of one (`seq eval ls` shows 8 characters), at
    least `SHORT_ID_HEX` hex digits and naming one eval only."""
    run_id = report.run_id_of(eval_id)
    if run_id is None:
        raise not_found(f"eval_id: {eval_id!r} is no eval id (ev-<hex>)")
    try:
        return platform.runs.get(caller, run_id, Contract.SEQUENCES)
    except Refusal:
        pass
    hexits = eval_id.partition("-")[2]
    found = platform.runs.by_prefix(caller, Contract.SEQUENCES, hexits) if len(hexits) >= SHORT_ID_HEX else []
    if len(found) > 1:
        named = ", ".join(report.eval_id(run.id) for run in found)
        raise bad_request(f"eval_id: {eval_id!r} starts more than one eval ({named}): give more of it")
    if not found:
        raise not_found(f"eval_id: no eval {eval_id!r} that you can see")
    return found[0]


def _with_rerun(
    platform: Platform, caller: Caller, body: EvalRequest
) -> tuple[EvalRequest, list[tuple[str, int]] | None]:
    """The request an eval runs: a rerun takes the earlier eval's, with what this one sets laid over it;
    `rerun_unsuccessful_of` replays only the earlier episodes that did not succeed."""
    earlier_id = body.rerun_of or body.rerun_unsuccessful_of
    if earlier_id is None:
        return body, None
    if body.rerun_of and body.rerun_unsuccessful_of:
        raise bad_request("rerun_of, rerun_unsuccessful_of: name one eval to rerun, not both")
    field_name = "rerun_of" if body.rerun_of else "rerun_unsuccessful_of"
    run = _run(platform, caller, earlier_id)
    laid = {
        **run.plan,
        **{k: v for k, v in body.model_dump(exclude_unset=True).items() if k not in _RERUN_FIELDS},
    }
    asked = EvalRequest.model_validate(laid)
    if body.rerun_of:
        return asked, None
    missed = [(e.benchmark_task, e.seed) for e in platform.runs.episodes(run.id) if not report.succeeded(e)]
    if not missed:
        raise bad_request(f"{field_name}: every episode of {earlier_id} succeeded: nothing to rerun")
    return asked, missed


def _wall_clock(resolved: evals.Resolved) -> float:
    """The robot time the eval may take at most: an upper bound of its wall clock on one worker that plays
    faster than real time."""
    return sum(e.cap_s for e in resolved.plan.episodes)


def _filtered(
    episodes: list[RunEpisode], tasks: list[str] | None, outcome: str | None, arm: int | None
) -> list[RunEpisode]:
    chosen = episodes
    if tasks:
        chosen = [e for e in chosen if e.benchmark_task in tasks]
    if arm is not None:
        chosen = [e for e in chosen if e.endpoint == f"arm-{arm}"]
    if outcome is not None:
        chosen = [e for e in chosen if outcome in _outcomes(e)]
    return chosen


def _outcomes(episode: RunEpisode) -> set[str]:
    """Every outcome filter an episode answers to: how it ended, and whether at its limit or cut."""
    result = episode.result or {}
    found = {_outcome(episode)}
    if result.get("truncated"):
        found.add("truncated")
    if result.get("failure") in TIMEOUTS:
        found.add("timed_out")
    return found


def _outcome(episode: RunEpisode) -> str:
    if episode.state == EpisodeState.FAILED:
        return "error"
    if not report.scored(episode):
        return "pending"
    return "success" if report.succeeded(episode) else "failure"


def cursor_offset(cursor: str | None) -> int:
    """Where a page starts: the `cursor` the previous page handed out (a row offset), refused otherwise."""
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 12:
        raise bad_request(f"cursor: {cursor!r} is not a cursor this list handed out")
    return int(cursor)


def _repeats(episodes: list[RunEpisode]) -> dict[int, int]:
    """How many times each episode's start (its seed) ran before it, in its arm and task (0: the first)."""
    seen: dict[tuple[str, str, int], int] = {}
    counted = {}
    for e in sorted(episodes, key=lambda e: e.index):
        start = (e.endpoint, e.benchmark_task, e.seed)
        counted[e.index] = seen.get(start, 0)
        seen[start] = counted[e.index] + 1
    return counted


def _episode_row(episode: RunEpisode, repeat: int) -> dict[str, Any]:
    result = episode.result or {}
    return {
        "index": episode.index,
        "arm": int(episode.endpoint.rpartition("-")[2]) if episode.endpoint.startswith("arm-") else 0,
        "task": episode.benchmark_task,
        "seed": episode.seed,
        "start": episode.seed,
        "repeat": repeat,
        "success": result.get("success") if report.scored(episode) else None,
        "seconds": result.get("robot_seconds"),
        "max_seconds": episode.cap_s,
        "paused": 0,
        "steps": result.get("steps"),
        "wall_s": result.get("wall_seconds"),
        "terminated": result.get("terminated"),
        "truncated": result.get("truncated"),
        "timed_out": result.get("failure") in TIMEOUTS,
        "error": episode.error,
        "outcome": _outcome(episode),
        "metrics": {k: v for k, v in result.get("metrics", {}).items() if k != "success"},
    }


def _episode_line(episode: RunEpisode) -> str:
    what = _outcome(episode)
    line = f"episode {episode.index} ({episode.benchmark_task}, seed {episode.seed}): {what}"
    return line + (f": {episode.error}" if episode.error else "")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _episode_file(
    platform: Platform,
    caller: Caller,
    eval_id: str,
    name: str,
    suffix: str,
    files: Callable[[dict[str, Any]], list[str]],
) -> FileResponse:
    run = _run(platform, caller, eval_id)
    index_text = name[: -len(suffix)] if name.endswith(suffix) else ""
    if not index_text.isdigit():
        raise not_found(f"{name!r}: an episode's file is <index>{suffix}")
    episode = next((e for e in platform.runs.episodes(run.id) if e.index == int(index_text)), None)
    shown = files(episode.result or {}) if episode is not None else []
    if episode is None or not shown:
        raise not_found(f"episode {index_text} has no {suffix} file")
    key = (episode_folder(ATTEMPT, episode.index) / shown[0]).as_posix()
    path = platform.store.path(run.id, key)
    if not path.is_file():
        raise not_found(f"episode {index_text} has no {suffix} file")
    return FileResponse(path)
