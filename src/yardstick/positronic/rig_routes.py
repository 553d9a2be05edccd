"""The calls a rig process makes (`yardstick rig run`, holding its rig's key): Yardstick's own routes beside
the Positronic contract, which says what a rig plan is and not how a rig talks to the platform.

A rig says hello while it waits (so its org's rig plans read `pending`, not `blocked`), claims the run it
plays next (`core.rigs`), marks each episode begun, and lands each as the vocabulary's episode folder (a tar
in the body). The folder is kept under the run's prefix in the org's store and labelled here, by the
operator's labeler (`operator_labels`); the run's last episode scores it by `positronic-evals`' own rule.

What a rig is told of a policy is an opaque token per endpoint and where to dial it: the operator beside the
robot never learns which policy served an episode (a blind sample), and each episode records its token.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import tarfile
import tempfile
from pathlib import Path
from typing import Annotated, Any, Final

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from eval_vocabulary.episode import SIGNAL_FILE_SUFFIX, VALUE_COLUMN
from eval_vocabulary.outcome import ABSENT, OUTCOME, Outcome, is_scored
from eval_vocabulary.progress import STATE_SIGNAL, highest_stage
from fastapi import Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from positronic_evals.labels import Label
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from yardstick.core.artifacts import validate_key
from yardstick.core.platform import Platform
from yardstick.core.refusals import Refusal, RefusalKind, bad_request, not_found, unauthenticated
from yardstick.core.rigs import ONLINE_S, RigCaller
from yardstick.engine.mp4 import NotAVideo
from yardstick.engine.recording import describe_video
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat
from yardstick.positronic.errors import POSITRONIC
from yardstick.positronic.operator_labels import (
    DEFAULT_RIG_SCORING,
    endpoint_outcome,
    operator_label,
    score_labelled,
)
from yardstick.positronic.own_routes import RIG_BEGIN, RIG_CLAIM, RIG_HELLO, RIG_LAND, RIG_SESSION_HEADER
from yardstick.positronic.views import RIG_EPISODES
from yardstick.store.models import Org, Run, RunEpisode, Task

MAX_FILES: Final = 256

router = door_router(POSITRONIC, tags=["rigs"])


def rig_of(request: Request, plat: Plat) -> RigCaller:
    """The rig whose key the request bears, seen now under the session its header names."""
    header = request.headers.get("authorization", "")
    key = header[7:].strip() if header.lower().startswith("bearer ") else ""
    session = request.headers.get(RIG_SESSION_HEADER, "")
    if not key:
        raise unauthenticated("a rig key is required: Authorization: Bearer <rig key>")
    if not 8 <= len(session) <= 64 or not session.isascii() or not session.isprintable():
        raise bad_request(
            f"{RIG_SESSION_HEADER}: a token of 8 to 64 visible characters, new each time a rig starts"
        )
    rig = plat.rigs.authenticate(key, session)
    if rig is None:
        raise unauthenticated(
            "the rig key is unknown or revoked: an admin issues a new one (yardstick admin rig add)"
        )
    return rig


RigWho = Annotated[RigCaller, Depends(rig_of)]


@router.post(RIG_HELLO, responses=refusals(401))
def rig_hello(plat: Plat, rig: RigWho) -> Response:
    """The rig is online: its org's rig plans of its shape read `pending` while it says so each `online_s`."""
    with plat.db.reading() as session:
        org = session.get(Org, rig.org_id)
    return JSONResponse(
        {"rig": rig.name, "shape": rig.shape, "org": org.slug if org else None, "online_s": ONLINE_S}
    )


@router.post(RIG_CLAIM, responses=refusals(401))
def rig_claim(plat: Plat, rig: RigWho) -> Response:
    """The run this rig plays now, with its unplayed episodes in order; 204 when there is none."""
    while (claim := plat.rigs.claim(rig)) is not None:
        unplayed = plat.rigs.unplayed(claim.run_id)
        if unplayed:
            return JSONResponse(_playbook(plat, claim.run_id, unplayed, claim.dropped))
        finish_rig_run(plat, claim.run_id)  # every episode landed: score it, then look for the next
    return Response(status_code=204)


@router.post(RIG_BEGIN, responses=refusals(401, 404, 409))
def rig_begin(
    plat: Plat, rig: RigWho, submission: Annotated[str, Query()], index: Annotated[int, Query(ge=0)]
) -> Response:
    """The robot starts episode `index` now (the operator pressed Start)."""
    run_id = _run_id(submission)
    if not plat.rigs.begin(rig, run_id, index):
        raise Refusal(
            RefusalKind.CONFLICT,
            f"index: episode {index} of submission {submission} is not this rig's to play now (another rig "
            "holds the run, the episode is recorded already, or there is no such episode)",
        )
    return JSONResponse({"submission": submission, "index": index, "playing": True})


@router.post(RIG_LAND, responses=refusals(401, 404, 409, 413))
async def rig_land(
    request: Request,
    plat: Plat,
    rig: RigWho,
    submission: Annotated[str, Query()],
    index: Annotated[int, Query(ge=0)],
) -> Response:
    """Record episode `index` from its folder (the body: a tar of the vocabulary's files)."""
    body = await request.body()
    return await run_in_threadpool(_land, plat, rig, _run_id(submission), index, body)


def _land(plat: Platform, rig: RigCaller, run_id: int, index: int, body: bytes) -> Response:
    files = _folder_files(body)
    with tempfile.TemporaryDirectory(prefix="ys-rig-episode-") as scratch:
        folder = Path(scratch)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        label = operator_label(folder)
        static = _static(files)
        videos = _videos(folder)
        stage = _furthest(folder)
    outcome = str(static.get(OUTCOME) or ABSENT)
    prefix = f"{RIG_EPISODES}{index:06d}/"
    written = [
        (
            prefix + name,
            plat.artifacts.put(run_id, prefix + name, data, _content_type(name)),
            _content_type(name),
        )
        for name, data in sorted(files.items())
    ]
    # `System` is a verdict (the rig's fault), but the policy is not scored for it.
    scored = is_scored(outcome) and outcome != Outcome.SYSTEM
    result: dict[str, Any] = {
        "outcome": outcome,
        "metrics": {"success": 1.0 if outcome == Outcome.SUCCESS else 0.0} if scored else {},
        "label": label.model_dump(mode="json") if label is not None else None,
        "stage": stage,
        "ended_by": static.get("eval.ended_by"),
        "steps": 0,
        "robot_seconds": float(label.seconds_to_end) if label is not None else 0.0,
        "folder": prefix,
        "videos": videos,
    }
    landed = plat.rigs.land(rig, run_id, index, result, written)
    if not landed.accepted:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"index: episode {index} of submission {run_id:x} was not begun by this rig process "
            "(begin it first)",
        )
    if landed.last:
        finish_rig_run(plat, run_id)
    return JSONResponse({"index": index, "outcome": outcome, "last": landed.last})


def finish_rig_run(plat: Platform, run_id: int) -> bool:
    """Score a rig run whose episodes all landed: `positronic-evals`' rule over the operator's labels (a
    discarded attempt is not scored at all; one nobody judged is not a failure), and each endpoint's kept,
    judged and successful episodes."""
    with plat.db.reading() as session:
        run = session.get(Run, run_id)
        episodes = list(
            session.execute(
                select(RunEpisode).where(RunEpisode.submission_id == run_id).order_by(RunEpisode.index)
            ).scalars()
        )
    if run is None:
        return False
    results = [(e.endpoint, e.result or {}) for e in episodes]
    scores = score_labelled(
        (r.get("outcome"), Label.model_validate(r["label"]) if r.get("label") else None) for _, r in results
    )
    by_endpoint = {
        name: score_labelled(
            (r.get("outcome"), Label.model_validate(r["label"]) if r.get("label") else None)
            for endpoint, r in results
            if endpoint == name
        )
        for name in run.endpoints
    }
    outcome = endpoint_outcome(
        {name: [r.get("outcome") for endpoint, r in results if endpoint == name] for name in run.endpoints}
    )
    return plat.lifecycle.finish(
        run_id,
        judged={
            "primary": scores.primary if scores.episodes > scores.unscored else None,
            # The success rate's interval says nothing of a score with partial credit: none is claimed.
            "low": None,
            "high": None,
            "episodes_scored": scores.episodes - scores.unscored,
            "unscored": scores.unscored,
            "rule": DEFAULT_RIG_SCORING.model_dump(mode="json"),
            "outcome": outcome.model_dump(mode="json"),
            "endpoints": {
                name: {
                    "value": part.primary if part.episodes > part.unscored else None,
                    "low": None,
                    "high": None,
                }
                for name, part in by_endpoint.items()
            },
        },
    )


def token_of(run: Run, endpoint: str) -> str:
    """The opaque name a rig and its operator know an endpoint by: stable within the run, unguessable."""
    keyed = hmac.new((run.replay_token or str(run.id)).encode(), endpoint.encode(), hashlib.sha256)
    return "policy-" + keyed.hexdigest()[:8]


def _playbook(plat: Platform, run_id: int, unplayed: list[int], dropped: tuple[int, ...]) -> dict[str, Any]:
    """What the rig needs to play the run's `unplayed` episodes: each one's task, instruction, cap and scene
    (the plan's resolved draws), and the endpoints by token with where to dial them."""
    with plat.db.reading() as session:
        run = session.get(Run, run_id)
        if run is None:
            raise not_found(f"submission: no run {run_id:x}")
        rows = (
            session.execute(
                select(RunEpisode)
                .where(RunEpisode.submission_id == run_id, RunEpisode.index.in_(unplayed))
                .order_by(RunEpisode.index)
            )
            .scalars()
            .all()
        )
        described = {
            t.task_id: t.description
            for t in session.execute(select(Task).where(Task.eval_id == run.eval_id)).scalars()
        }
    tasks = run.resolved.get("tasks") or []
    episodes = []
    for e in rows:
        resolved = tasks[e.task_pos] if e.task_pos < len(tasks) else {}
        instruction = described.get(e.task_id, "")
        episodes.append(
            {
                "index": e.index,
                "task_id": e.task_id,
                "benchmark_task": e.benchmark_task,
                "seed": e.seed,  # the trial's, for its folder's `eval.seed`
                "instruction": instruction,
                "cap_s": e.cap_s,
                "endpoint": token_of(run, e.endpoint),
                "items": (run.benchmark_params.get("items") or {}).get(e.benchmark_task),
                "scene": {
                    key: resolved.get(key)
                    for key in (
                        "policy_preset",
                        "tote_placement",
                        "start_pose",
                        "camera_vantage",
                        "external_cameras",
                        "clutter_objects",
                    )
                },
            }
        )
    return {
        "submission": f"{run.id:x}",
        "blind": len(run.endpoints) > 1,
        "endpoints": {
            token_of(run, name): {k: v for k, v in target.items() if k != "credential"}
            for name, target in run.endpoints.items()
        },
        "episodes": episodes,
        "dropped": list(dropped),
    }


def _run_id(submission: str) -> int:
    try:
        return int(submission, 16)
    except ValueError:
        raise bad_request(f"submission: {submission!r} is not a submission id (hexadecimal)") from None


def _folder_files(body: bytes) -> dict[str, bytes]:
    """The files of an episode folder's tar: regular files in one folder, each name an artifact key's."""
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as archive:
            for member in archive.getmembers():
                if member.isdir():
                    continue
                name = member.name.removeprefix("./")
                if not member.isfile() or "/" in name:
                    raise bad_request(
                        f"body: {member.name!r} is not a file of the folder itself (no links, no folders)"
                    )
                try:
                    validate_key(name)
                except ValueError as exc:
                    raise bad_request(f"body: {exc}") from None
                handle = archive.extractfile(member)
                files[name] = handle.read() if handle is not None else b""
                if len(files) > MAX_FILES:
                    raise bad_request(f"body: an episode folder holds at most {MAX_FILES} files")
    except tarfile.TarError as exc:
        raise bad_request(f"body: not a tar of an episode folder ({exc})") from None
    if "static.json" not in files or "meta.json" not in files:
        raise bad_request(
            "body: an episode folder holds static.json and meta.json (positronic-eval-vocabulary)"
        )
    return files


def _furthest(folder: Path) -> str | None:
    """The highest rung of the ladder the operator marked (whatever the verdict: a discarded attempt's marks
    still say how far it got), or None."""
    marks = folder / f"{STATE_SIGNAL}{SIGNAL_FILE_SUFFIX}"
    if not marks.is_file():
        return None
    try:
        codes = pq.read_table(marks, columns=[VALUE_COLUMN]).column(VALUE_COLUMN).to_pylist()
    except (pa.ArrowInvalid, KeyError) as exc:
        raise bad_request(f"body: {marks.name} is not the ladder's signal: {exc}") from None
    reached = highest_stage(str(code) for code in codes)
    return None if reached is None else str(reached)


def _videos(folder: Path) -> list[dict[str, Any]]:
    """The folder's camera videos as the replay page lays them out; a file that is no H.264 MP4 (a rig
    wrote bytes of its own choosing) is named as such and not offered to a browser."""
    found = []
    for path in sorted(folder.glob("*.mp4")):
        try:
            found.append(describe_video(path))
        except NotAVideo as exc:
            raise bad_request(f"body: {path.name} is not a video: {exc}") from None
    return found


def _static(files: dict[str, bytes]) -> dict[str, Any]:
    try:
        loaded = json.loads(files["static.json"])
    except ValueError:
        raise bad_request("body: static.json is not JSON") from None
    if not isinstance(loaded, dict):
        raise bad_request("body: static.json holds one JSON object")
    return loaded


def _content_type(name: str) -> str:
    if name.endswith(".json"):
        return "application/json"
    if name.endswith(".mp4"):
        return "video/mp4"
    if name.endswith(".parquet"):
        return "application/vnd.apache.parquet"
    return "application/octet-stream"
