"""The pages: home, boards, and each run's page with its replay (`/v/<token>/`, its data at `data.json`).

Server-rendered (Jinja2), a little inline JavaScript where it helps (filtering and sorting the episode
table, playing an episode's cameras together), no build step. Charts come from matplotlib (`charts.py`).
The run page and its data open without a key: the token in the link is the credential, as a public board's
link is. The data and the videos may be read from any origin, and so may the rankings routes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from yardstick.core import lifecycle
from yardstick.core.boards import RunView, page_url, primary_of
from yardstick.core.platform import Platform
from yardstick.core.refusals import not_found
from yardstick.engine.recording import episode_folder
from yardstick.http.artifact_files import artifact_file
from yardstick.http.services import Plat
from yardstick.scoring.compare import paired_difference
from yardstick.scoring.sequential import anytime_summary
from yardstick.store.models import RunEpisode
from yardstick.store.states import ACTIVE_RUNS, UNPLAYED_EPISODES, EpisodeState
from yardstick.web.charts import (
    CurvePoint,
    Entry,
    board_chart_svg,
    checkpoint_chart_svg,
    stopping_chart_svg,
    success_chart_svg,
)
from yardstick.web.replay_links import replay_links

CORS = {"Access-Control-Allow-Origin": "*"}
REPLAY_COLUMNS = [
    ("task", "Task"),
    ("outcome", "Outcome"),
    ("seed", "Seed"),
    ("endpoint", "Endpoint"),
    ("steps", "Steps"),
]


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("yardstick.web", "templates/site"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda v: "–" if v is None else f"{100 * float(v):.1f}%"
    env.filters["when"] = lambda v: v.strftime("%Y-%m-%d %H:%M UTC") if isinstance(v, dt.datetime) else "–"
    env.filters["when_s"] = lambda v: (
        v.strftime("%Y-%m-%d %H:%M:%S UTC") if isinstance(v, dt.datetime) else "–"
    )
    return env


def _when(value: Any, form: str) -> str:
    return value.strftime(form) if isinstance(value, dt.datetime) else "–"


PAGES = _environment()


def outcome_of(episode: RunEpisode) -> str:
    if episode.state == EpisodeState.FAILED:
        return "Error"
    if episode.state != EpisodeState.DONE or not episode.result:
        return "Pending" if episode.state in UNPLAYED_EPISODES else episode.state.capitalize()
    if "outcome" in episode.result:  # a rig's episode: the operator's verdict, in the vocabulary's words
        return str(episode.result["outcome"])
    return "Success" if episode.result.get("success") else "Failure"


def replay_data(view: RunView, base_url: str) -> dict[str, Any]:
    """The replay object in the contract's shape: about, columns, and per episode its values and videos."""
    url = page_url(base_url, view.run.replay_token or "")
    submission = view.run
    about: list[dict[str, Any]] = []
    if view.board is not None:
        about.append({"key": "board", "label": "Board", "value": view.board.slug})
    if view.eval is not None:
        about.append({"key": "eval", "label": "Eval", "value": view.eval.slug})
    about += [
        {"key": "tag", "label": "Tag", "value": view.tag},
        {"key": "submission_id", "label": "Submission", "value": f"{submission.id:x}"},
        {
            "key": "primary_score",
            "label": view.eval.primary_metric if view.eval else "success_rate",
            "value": primary_of(submission),
        },
    ]
    episodes = []
    on_rig = submission.rig_shape is not None
    for episode in view.episodes:
        result = episode.result or {}
        videos = [{**video, "url": url + video["src"]} for video in _videos(episode)]
        episodes.append(
            {
                "index": episode.index,
                "values": {
                    "task": episode.task_id,
                    "outcome": outcome_of(episode),
                    "seed": episode.seed,
                    "endpoint": episode.endpoint,
                    "steps": result.get("steps"),
                    **({"stage": result.get("stage") or "–"} if on_rig else {}),
                },
                "duration_s": result.get("robot_seconds"),
                "videos": videos,
            }
        )
    named = view.board.title if view.board else view.eval.title if view.eval else submission.alias or "Run"
    title = f"{named} — {view.tag}"
    return {
        "title": title,
        "url": url,
        "about": about,
        "columns": [
            {"key": k, "label": label}
            for k, label in (*REPLAY_COLUMNS, *((("stage", "Furthest stage"),) if on_rig else ()))
        ],
        "episodes": episodes,
    }


def _videos(episode: RunEpisode) -> list[dict[str, Any]]:
    """The episode's camera videos as the replay lists them: `src` relative to the replay's folder."""
    found = []
    for video in (episode.result or {}).get("videos", []):
        found.append(
            {
                "camera": video["camera"],
                "src": f"episodes/{episode.index}/{video['file']}",
                "width": video.get("width"),
                "height": video.get("height"),
                "duration_s": video.get("duration_s"),
            }
        )
    return found


def _comparison(view: RunView, per_endpoint: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Two or more endpoints on the same tasks and seeds: each against the first, paired. `per_endpoint`
    is each endpoint's summary, whose per-task success rates the table shows beside the differences."""
    names = list(dict.fromkeys(e.endpoint for e in view.episodes))
    if len(names) < 2:
        return None
    success: dict[str, dict[tuple[str, int], float]] = {name: {} for name in names}
    for episode in view.episodes:
        if episode.state == EpisodeState.DONE and episode.result is not None:
            success[episode.endpoint][(episode.task_id, episode.trial)] = float(
                bool(episode.result.get("success"))
            )
    base = names[0]
    rows = []
    for other in names[1:]:
        per_task, overall = paired_difference(success[other], success[base])
        rows.append({"endpoint": other, "against": base, "per_task": per_task, "overall": overall})
    rates = {
        name: {
            task: scored["metrics"]["success"]["value"]
            for task, scored in per_endpoint[name]["tasks"].items()
            if "success" in scored["metrics"]
        }
        for name in names
    }
    return {"names": names, "rows": rows, "rates": rates}


router = APIRouter(include_in_schema=False)


def run_or_404(platform: Platform, token: str) -> RunView:
    view = platform.boards.run_by_token(token)
    if view is None:
        raise not_found("no run at this link")
    return view


@router.get("/", response_class=HTMLResponse)
def home(request: Request, platform: Plat) -> HTMLResponse:
    boards = []
    for board, ev in platform.boards.boards(None):
        _, _, rows = platform.boards.board(None, board.slug)
        boards.append({"board": board, "eval": ev, "top": rows[:3], "count": len(rows)})
    recent = [
        {
            "submission": s,
            "eval": e,
            "url": page_url(str(request.base_url), s.replay_token or ""),
            "primary": primary_of(s),
        }
        for s, e in platform.boards.recent_public_runs()
    ]
    return HTMLResponse(PAGES.get_template("home.html").render(boards=boards, recent=recent))


@router.get("/boards/{slug}", response_class=HTMLResponse)
def board_page(request: Request, slug: str, platform: Plat) -> HTMLResponse:
    board, ev, rows = platform.boards.board(None, slug)
    listed = [
        {
            "row": r,
            "url": page_url(str(request.base_url), r.replay_token) if r.replay_token else None,
            "scores": r.scores,
        }
        for r in rows
    ]
    chart = board_chart_svg(
        [
            Entry(
                f"{r.display_name}#{r.tag}",
                r.primary,
                r.scores.get("low"),
                r.scores.get("high"),
                baseline=bool(r.baseline_publisher),
            )
            for r in rows
        ]
    )
    return HTMLResponse(
        PAGES.get_template("board.html").render(board=board, eval=ev, rows=listed, chart=chart)
    )


@router.get("/boards/{slug}/pairwise", response_class=HTMLResponse)
def pairwise_page(slug: str, platform: Plat) -> HTMLResponse:
    """The board's pairwise ranking: who beat whom on the same trials, as a Bradley–Terry ranking."""
    read = platform.pairwise.read(None, slug)
    chart = board_chart_svg([Entry(s.player, s.chance, s.low, s.high) for s in read.ranking.standings])
    return HTMLResponse(
        PAGES.get_template("pairwise.html").render(
            board=read.board, eval=read.eval, ranking=read.ranking, runs=read.runs, chart=chart
        )
    )


@router.get("/boards/{slug}/pairwise.json")
def pairwise_data(slug: str, platform: Plat) -> JSONResponse:
    return JSONResponse(platform.pairwise.read(None, slug).as_json(), headers=CORS)


@router.get("/boards/{slug}/curves", response_class=HTMLResponse)
def curves_page(request: Request, slug: str, platform: Plat) -> HTMLResponse:
    """Each policy's success against its checkpoints on the board's runs, regressions flagged."""
    board, ev, curves = platform.checkpoints.read(None, slug)
    shown = [
        {
            "curve": curve,
            "chart": checkpoint_chart_svg(
                [
                    CurvePoint(p.checkpoint, p.value, p.low, p.high, p.regression is not None)
                    for p in curve.points
                ]
            ),
            "urls": {
                p.run_id: page_url(str(request.base_url), p.replay_token) if p.replay_token else None
                for p in curve.points
            },
        }
        for curve in curves
    ]
    return HTMLResponse(PAGES.get_template("curves.html").render(board=board, eval=ev, curves=shown))


@router.get("/boards/{slug}/curves.json")
def curves_data(slug: str, platform: Plat) -> JSONResponse:
    _, _, curves = platform.checkpoints.read(None, slug)
    return JSONResponse({"curves": [c.as_json() for c in curves]}, headers=CORS)


@router.get("/v/{token}/", response_class=HTMLResponse)
def run_page(platform: Plat, request: Request, token: str) -> HTMLResponse:
    view = run_or_404(platform, token)
    descriptions = {t: "" for t in dict.fromkeys(e.task_id for e in view.episodes)}
    summary, per_endpoint = lifecycle.summarize_run(view.episodes, descriptions)
    looked = (view.run.stopping or {}).get("state")
    if looked:  # a run stopped by a rule shows its anytime-valid intervals, as its result does
        for part in (summary, *per_endpoint.values()):
            anytime_summary(part, looked)
    data = replay_data(view, str(request.base_url))
    # A run of several endpoints is read endpoint by endpoint: pooling them would score no policy.
    parts = per_endpoint if len(per_endpoint) > 1 else {"": summary}
    body = PAGES.get_template("run.html").render(
        view=view,
        s=view.run,
        data=data,
        parts=[
            {"name": name, "summary": part, "chart": success_chart_svg(part)} for name, part in parts.items()
        ],
        comparison=_comparison(view, per_endpoint),
        stopping=view.run.stopping,
        stopping_chart=stopping_chart_svg(looked) if looked else None,
        outcomes=sorted({e["values"]["outcome"] for e in data["episodes"]}),
        tasks=list(descriptions),
        live=view.run.status in ACTIVE_RUNS,
        replays=replay_links(view.episodes),
    )
    return HTMLResponse(body)


@router.get("/v/{token}/data.json")
def run_data(platform: Plat, request: Request, token: str) -> JSONResponse:
    return JSONResponse(replay_data(run_or_404(platform, token), str(request.base_url)), headers=CORS)


@router.get("/v/{token}/episodes/{index}/{name}")
def run_file(token: str, index: int, name: str, platform: Plat) -> Response:
    view = run_or_404(platform, token)
    episode = next((e for e in view.episodes if e.index == index), None)
    result = (episode.result or {}) if episode else {}
    files = {v["file"] for v in result.get("videos", [])}
    # The 3D replay and the trajectory, for the replay page: the files recorded in the episode's folder.
    folder = episode_folder("", index).as_posix() + "/"
    files |= {str(a).removeprefix(folder) for a in result.get("artifacts", []) if str(a).startswith(folder)}
    if episode is None or name not in files:
        raise not_found(f"no file {name!r} for episode {index}")
    key = (episode_folder(lifecycle.ATTEMPT, index) / name).as_posix()
    return artifact_file(
        platform.artifacts,
        view.run.id,
        key,
        lambda: not_found(f"no file {name!r} for episode {index}"),
        media_type="video/mp4" if name.endswith(".mp4") else "application/octet-stream",
        headers=CORS,
    )
