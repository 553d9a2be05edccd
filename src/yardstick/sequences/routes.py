"""The Sequences front door's eval routes: `POST /v1/eval` (a dry run, or a run on the platform's queue and
workers like any other), the report, its details, episodes (paged, and as CSV), logs, videos, trajectories,
3D replays and their scenes, and cancelling. An eval names a policy the caller may run (`model`) and a
benchmark (`benchmark`): the org's registered ones, or the platform's catalogue."""

from __future__ import annotations

import asyncio
import csv
import io
import re
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from yardstick.core.accounts import Caller
from yardstick.core.ended import has_ended
from yardstick.core.lifecycle import ATTEMPT
from yardstick.core.platform import Platform
from yardstick.core.refusals import Refusal, RefusalKind, not_found
from yardstick.engine.failures import FailureKind
from yardstick.engine.recording import TRAJECTORY, episode_folder
from yardstick.engine.replay_track import REPLAY, SCENE_SUFFIX, SCENES, replay_of
from yardstick.http.artifact_files import artifact_file
from yardstick.http.auth import Who, audit_target, unaudited
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat, Purch
from yardstick.sequences import eval_logs as eval_logs_page
from yardstick.sequences import eval_report, filing, paging, paths
from yardstick.sequences.errors import SEQUENCES
from yardstick.sequences.models import (
    EvalDryRunResponse,
    EvalReport,
    EvalRequest,
    EvalResponse,
)
from yardstick.store.models import Run, RunEpisode
from yardstick.store.states import ACTIVE_RUNS, Contract

PAGE, PAGE_CAP = 50, 500
GLB = "model/gltf-binary"
# The episodes an eval's details carry whole, as the contract's do; the rest are paged (/episodes).
DETAILS_EPISODES = 5000
# How long a report waits for a playing run to end before answering that it still runs.
REPORT_WAIT_S, REPORT_POLL_S = 5.0, 0.2
CSV_COLUMNS = (
    "index", "arm", "task", "seed", "start", "repeat", "success", "seconds", "max_seconds", "paused", "steps",
    "wall_s", "terminated", "truncated", "timed_out", "error",
)  # fmt: skip
TIMEOUTS = (FailureKind.POLICY_TIMEOUT, FailureKind.BENCHMARK_TIMEOUT, FailureKind.LATENCY_BUDGET)
OUTCOMES = ("success", "failure", "error", "truncated", "timed_out", "pending")
Outcome = Annotated[str | None, Query(pattern=f"^({'|'.join(OUTCOMES)})$")]


router = door_router(SEQUENCES, tags=["sequences: evals"])


@router.post(
    paths.EVALS,
    response_model=EvalResponse | EvalDryRunResponse,
    responses=refusals(402, 403, 404, 409, 424, 429),
)
def create_eval(body: EvalRequest, request: Request, plat: Plat, who: Who) -> JSONResponse:
    """Run a policy on a benchmark (or, with `dry_run`, say what would run). Answers at once; the eval
    plays on the platform's workers."""
    answer = filing.file_eval(plat, who, body)
    if isinstance(answer, EvalDryRunResponse):
        unaudited(request)  # a dry run changes nothing
    else:
        audit_target(request, answer.eval_id)
    return JSONResponse(answer.model_dump(mode="json", exclude_none=True))


@router.get(paths.EVAL, response_model=EvalReport, responses=refusals(404))
async def get_eval(eval_id: str, request: Request, plat: Plat, who: Who, purchases: Purch) -> Response:
    """The eval_report. A run still playing is waited for a few seconds first: the CLI polls every 10 s, so a
    short eval answers `completed` on its first poll instead of one poll later."""
    known = eval_report.run_id_of(eval_id)
    kept = plat.runs.kept(who, known, Contract.SEQUENCES) if known is not None else None
    base_url = str(request.base_url)
    if kept is not None and (body := plat.ended.get(_report_key(kept, base_url))) is not None:
        return Response(body, media_type="application/json")  # read and built before: no trip to a thread
    run = await run_in_threadpool(filing.eval_run, plat, who, eval_id)
    deadline = time.monotonic() + REPORT_WAIT_S
    while run.status in ACTIVE_RUNS and time.monotonic() < deadline:
        await asyncio.sleep(REPORT_POLL_S)
        run = await run_in_threadpool(filing.eval_run, plat, who, eval_id)

    def shown(latest: Run) -> str:
        with plat.db.one_read():
            episodes, held = plat.runs.episodes(latest.id), purchases.held(latest.id)
        built = eval_report.build(latest, episodes, base_url=base_url, reservation=held)
        return built.model_dump_json(exclude_none=True)

    if has_ended(run.status):  # its report never changes again (`core.ended`): built once a process
        ended, key = run, _report_key(run, base_url)
        body = await run_in_threadpool(plat.ended.kept, key, lambda: shown(ended))
        return Response(body, media_type="application/json")
    # The episodes and the hold read in one trip to a thread, not two: a trip costs about a small query.
    return Response(await run_in_threadpool(shown, run), media_type="application/json")


@router.get(paths.EVAL_DETAILS, responses=refusals(404))
def eval_details(eval_id: str, plat: Plat, who: Who) -> JSONResponse:
    run = filing.eval_run(plat, who, eval_id)
    episodes = plat.runs.episodes(run.id)
    repeats = _repeats(episodes)
    answer = run.resolved or {}
    selection = answer.get("layout", {}).get("selection", {})
    return JSONResponse(
        {
            "manifest": {
                "benchmark": answer.get("benchmark"),
                "benchmark_version": answer.get("benchmark_version"),
                "adapter": answer.get("adapter"),
                "model": answer.get("model"),
                "model_version": answer.get("model_version"),
                "episodes": run.episodes_total,
                "seeds": sorted({s for t in selection.get("tasks", []) for s in t["seeds"]}),
                "params": (run.plan or {}).get("params"),
                "rerun_of": answer.get("rerun_of"),
                "rerun_unsuccessful_of": answer.get("rerun_unsuccessful_of"),
            },
            "progress": eval_report.progress(run, episodes),
            "max_seconds": selection.get("max_seconds"),
            "repeats": {"episodes": selection.get("repeats", 0)},
            "means": eval_report.means(episodes),
            "episodes": [_episode_row(e, repeats[e.index]) for e in episodes[:DETAILS_EPISODES]],
            "episodes_total": run.episodes_total,
            "time_limit": {"note": "each episode runs at most its task's max_seconds on the robot's clock"},
        }
    )


@router.get(paths.EVAL_EPISODES, responses=refusals(404))
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
    run = filing.eval_run(plat, who, eval_id)
    every = plat.runs.episodes(run.id)
    repeats = _repeats(every)
    chosen = _filtered(every, task, outcome, arm)
    page = paging.window(cursor, limit, len(chosen), cap=PAGE_CAP)
    return JSONResponse(
        {
            "eval_id": eval_report.eval_id(run.id),
            "episodes": [_episode_row(e, repeats[e.index]) for e in page.of(chosen)],
            **paging.shown(page),
        }
    )


@router.get(paths.EVAL_EPISODES_CSV, responses=refusals(404))
def eval_episodes_csv(
    eval_id: str,
    plat: Plat,
    who: Who,
    task: Annotated[list[str] | None, Query()] = None,
    outcome: Outcome = None,
    arm: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    run = filing.eval_run(plat, who, eval_id)
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


@router.get(paths.EVAL_LOGS, responses=refusals(404))
def eval_logs(
    eval_id: str,
    plat: Plat,
    who: Who,
    side: eval_logs_page.Side | None = None,
    arm: Annotated[int | None, Query(ge=0)] = None,
    machine: Annotated[str | None, Query(max_length=200)] = None,
    after: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
) -> JSONResponse:
    """The eval's events and what its boxes printed, by side (`eval_logs`)."""
    run = filing.eval_run(plat, who, eval_id)
    query = eval_logs_page.LogQuery(side=side, arm=arm, machine=machine, after=after, limit=limit)
    return JSONResponse(eval_logs_page.page(plat, run, eval_id, query))


@router.get(paths.EVAL_VIDEO, responses=refusals(404))
def eval_video(eval_id: str, name: str, plat: Plat, who: Who) -> Response:
    return _episode_file(plat, who, eval_id, name, ".mp4", lambda r: [v["file"] for v in r.get("videos", [])])


@router.get(paths.EVAL_TRAJECTORY, responses=refusals(404))
def eval_trajectory(eval_id: str, name: str, plat: Plat, who: Who) -> Response:
    return _episode_file(plat, who, eval_id, name, ".jsonl.gz", lambda r: [TRAJECTORY])


@router.get(paths.EVAL_REPLAY, responses=refusals(404))
def eval_replay(eval_id: str, index: str, plat: Plat, who: Who) -> Response:
    """An episode's 3D replay (`.seqreplay`, format in `yardstick.replay3d.format`)."""
    return _episode_file(
        plat, who, eval_id, f"{index}{REPLAY}", REPLAY, lambda r: [REPLAY] if _replayed(r) else []
    )


@router.get(paths.EVAL_SCENE, responses=refusals(404))
def eval_scene(eval_id: str, sha256: str, plat: Plat, who: Who) -> Response:
    """A scene the eval's replays are drawn in (a glTF binary), by the sha256 its episodes name: one copy a
    run, whichever episode brought it."""
    run = filing.eval_run(plat, who, eval_id)
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise not_found(f"{sha256!r}: a scene is named by its sha256, 64 lowercase hex digits")
    key = f"{ATTEMPT}{SCENES}/{sha256}{SCENE_SUFFIX}"
    missing = lambda: not_found(f"eval {eval_id} has no scene {sha256}")  # noqa: E731
    return _cached(artifact_file(plat.artifacts, run.id, key, missing, media_type=GLB, relay=True))


@router.post(paths.EVAL_CANCEL, responses=refusals(404, 409))
def cancel_eval(eval_id: str, plat: Plat, who: Who) -> JSONResponse:
    run = filing.eval_run(plat, who, eval_id)
    try:
        plat.runs.cancel(who, run.id)
    except Refusal as exc:
        # The platform refuses an ended run as a bad request in its own words; an ended eval is a state
        # (the CLI's exit 5), said with the eval's id and its status as this contract names them.
        if exc.kind is not RefusalKind.BAD_REQUEST:
            raise
        ended = filing.eval_run(plat, who, eval_id)
        raise Refusal(
            RefusalKind.CONFLICT,
            f"eval_id: eval {eval_report.eval_id(run.id)} already ended"
            f" ({eval_report.STATUS[ended.status]}): there is nothing to cancel",
            field="eval_id",
        ) from None
    return JSONResponse({"eval_id": eval_report.eval_id(run.id), "status": "canceled"})


def _report_key(run: Run, base_url: str) -> tuple[str, int, str]:
    """Where a process keeps an ended eval's report as sent (`core.ended`): it names its base URL."""
    return ("sequences.eval_report", run.id, base_url)


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
    found = {eval_report.outcome(episode)}
    if result.get("truncated"):
        found.add("truncated")
    if result.get("failure") in TIMEOUTS:
        found.add("timed_out")
    return found


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
    replay = replay_of([str(kept) for kept in result.get("artifacts", [])])
    return {
        "index": episode.index,
        "arm": int(episode.endpoint.rpartition("-")[2]) if episode.endpoint.startswith("arm-") else 0,
        "task": episode.benchmark_task,
        "seed": episode.seed,
        "start": episode.seed,
        "repeat": repeat,
        "success": result.get("success") if eval_report.scored(episode) else None,
        "seconds": result.get("robot_seconds"),
        "max_seconds": episode.cap_s,
        "paused": 0,
        "steps": result.get("steps"),
        "wall_s": result.get("wall_seconds"),
        "terminated": result.get("terminated"),
        "truncated": result.get("truncated"),
        "timed_out": result.get("failure") in TIMEOUTS,
        "error": episode.error,
        "outcome": eval_report.outcome(episode),
        "metrics": {k: v for k, v in result.get("metrics", {}).items() if k != "success"},
        # Which files it has (`seq eval report --trajectories / --replays` reads these marks).
        "trajectory": any(str(kept).endswith(TRAJECTORY) for kept in result.get("artifacts", [])),
        "replay": replay is not None,
        "scene_sha256": replay[1] if replay is not None else None,
        # Ours, beside the contract's: what the episode's recording could not keep, and why (a replay
        # dropped by a looks method gone wrong, one drawn from a scene its model changed after).
        "recording_error": result.get("recording_error"),
    }


def _replayed(result: dict[str, Any]) -> bool:
    return replay_of([str(kept) for kept in result.get("artifacts", [])]) is not None


def _cached(answer: Response) -> Response:
    """A scene's bytes are its name's: a browser or proxy may keep them for good."""
    answer.headers["Cache-Control"] = "private, max-age=31536000, immutable"
    return answer


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
) -> Response:
    run = filing.eval_run(platform, caller, eval_id)
    index_text = name[: -len(suffix)] if name.endswith(suffix) else ""
    if not index_text.isdigit():
        raise not_found(f"{name!r}: an episode's file is <index>{suffix}")
    episode = next((e for e in platform.runs.episodes(run.id) if e.index == int(index_text)), None)
    shown = files(episode.result or {}) if episode is not None else []
    if episode is None or not shown:
        raise not_found(f"episode {index_text} has no {suffix} file")
    key = (episode_folder(ATTEMPT, episode.index) / shown[0]).as_posix()
    return artifact_file(
        platform.artifacts,
        run.id,
        key,
        lambda: not_found(f"episode {index_text} has no {suffix} file"),
        relay=True,
    )
