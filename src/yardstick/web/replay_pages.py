"""The 3D replay on the platform's pages: the viewer's page for one episode of a run, or two side by side
(`/v/<token>/replay?episode=3&episode=7`), the scenes the replays are drawn in, and the viewer's static files
(our modules and the vendored three.js). An episode's replay and trajectory are its files on the run page's
route (`/v/<token>/episodes/<index>/<name>`). As with the run page, the token in the link is the credential.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse, HTMLResponse, Response

from yardstick.core import lifecycle
from yardstick.core.refusals import not_found
from yardstick.engine.replay_track import SCENE_SUFFIX, SCENES
from yardstick.http.artifact_files import artifact_file
from yardstick.http.services import Plat
from yardstick.store.models import RunEpisode
from yardstick.web.replay_links import PAGE
from yardstick.web.replay_viewer import STATIC, Pane, files_of, render_page
from yardstick.web.site import CORS, outcome_of, run_or_404

router = APIRouter(include_in_schema=False)
STATIC_URL = "/static/"
GLB = "model/gltf-binary"
SHA256 = re.compile(r"[0-9a-f]{64}")
# Our modules change with the package, three's with `make three`: a day's cache, revalidated after.
STATIC_CACHE = {"Cache-Control": "public, max-age=86400"}
# A scene's bytes are its name's (its sha256): kept for good.
SCENE_CACHE = {**CORS, "Cache-Control": "public, max-age=31536000, immutable"}
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css"}


def pane_of(episode: RunEpisode) -> Pane | None:
    """The episode as the viewer shows it, its files on the run's routes (relative to its replay page);
    None when it recorded no replay."""
    files = files_of((episode.result or {}).get("artifacts", []))
    if files is None:
        return None
    folder = f"episodes/{episode.index}/"
    return Pane(
        title=f"#{episode.index} {episode.task_id} · seed {episode.seed}",
        subtitle=episode.endpoint,
        outcome=outcome_of(episode),
        replay=folder + files.replay.rpartition("/")[2],
        scene=files.scene,  # scenes/<sha256>.glb: the route below
        trajectory=folder + files.trajectory.rpartition("/")[2] if files.trajectory else None,
    )


@router.get(f"/v/{{token}}/{PAGE}", response_class=HTMLResponse)
def replay_page(token: str, platform: Plat, episode: Annotated[list[int], Query()]) -> HTMLResponse:
    """One episode's 3D replay (`?episode=N`), or two side by side on one clock (`?episode=N&episode=M`)."""
    view = run_or_404(platform, token)
    if not 1 <= len(episode) <= 2:
        raise not_found("name one episode, or two to see side by side: ?episode=N[&episode=M]")
    by_index = {e.index: e for e in view.episodes}
    panes = {}
    for index in episode:
        found = by_index.get(index)
        pane = pane_of(found) if found is not None else None
        if pane is None:
            raise not_found(f"episode {index} of this run has no 3D replay")
        panes[index] = pane
    title = view.eval.title if view.eval else view.run.alias or "Run"
    body = render_page(title, panes, show=episode, static=STATIC_URL, back=("./", "the run"))
    return HTMLResponse(body)


@router.get("/v/{token}/scenes/{name}")
def scene_file(token: str, name: str, platform: Plat) -> Response:
    """A scene the run's replays are drawn in, by its sha256 (one copy a run, whatever episode brought it)."""
    view = run_or_404(platform, token)
    sha = name.removesuffix(SCENE_SUFFIX)
    if not name.endswith(SCENE_SUFFIX) or not SHA256.fullmatch(sha):
        raise not_found(f"{name!r}: a scene is named <its sha256>{SCENE_SUFFIX}")
    key = f"{lifecycle.ATTEMPT}{SCENES}/{name}"
    missing = lambda: not_found(f"this run has no scene {sha}")  # noqa: E731
    return artifact_file(platform.artifacts, view.run.id, key, missing, media_type=GLB, headers=SCENE_CACHE)


@router.get("/static/{path:path}")
def static_file(path: str) -> FileResponse:
    """The viewer's modules and three.js, from the package (nothing is loaded from a CDN)."""
    target = (STATIC / path).resolve()
    if not target.is_relative_to(STATIC) or not target.is_file():
        raise not_found(f"no static file {path!r}")
    return FileResponse(target, media_type=MEDIA_TYPES.get(target.suffix), headers=STATIC_CACHE)
