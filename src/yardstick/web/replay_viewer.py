"""The 3D replay viewer's page, served by the platform or written into a run folder beside report.html.

The viewer is ES modules of ours (`static/replay/`: the `.seqreplay` reader, the three.js view, the page)
over three.js vendored from npm (`static/three/`, `make three`). Served, the page loads them by an import
map from `/static/`, and fetches an episode's replay, scene and trajectory. Opened as a file, Chromium
fetches nothing and loads no module from file://, so a run folder holds what the page needs as classic
scripts it can load (`write_folder_viewer`):

    replay.html                                  the page: ?episode=3 one episode, ?episode=3&episode=7 two
    viewer/modules.js                            the modules' sources, linked into blob: URLs by link.js
    viewer/data/episodes/000003/replay.seqreplay.js   each file the page reads, in base64 (once a file)
    viewer/data/scenes/<sha256>.glb.js
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

from yardstick.engine.recording import TRAJECTORY
from yardstick.engine.replay_track import SCENE_SUFFIX, SCENES, replay_of
from yardstick.web.folder_templates import folder_templates, write_whole

STATIC = Path(__file__).resolve().parent / "static"
PAGE = "replay.html"
VIEWER = "viewer"
MODULES_SCRIPT = f"{VIEWER}/modules.js"
DATA = f"{VIEWER}/data/"
# Every module the page imports, directly or through three (paths under STATIC): what a run folder carries.
MODULES = (
    "three/build/three.core.js",
    "three/build/three.module.js",
    "three/examples/jsm/utils/BufferGeometryUtils.js",
    "three/examples/jsm/utils/SkeletonUtils.js",
    "three/examples/jsm/loaders/GLTFLoader.js",
    "three/examples/jsm/controls/OrbitControls.js",
    "replay/seqreplay.js",
    "replay/viewer.js",
    "replay/page.js",
)


@dataclass(frozen=True)
class Pane:
    """One episode as the page shows it: what it is, and where its files are (URLs, or in a run folder
    the files' names under the recording folder)."""

    title: str
    subtitle: str
    outcome: str
    replay: str
    scene: str
    trajectory: str | None = None


@dataclass(frozen=True)
class EpisodeFiles:
    """An episode's replay, scene and trajectory among its artifacts (names under the recording folder)."""

    replay: str
    scene: str
    trajectory: str | None


def files_of(artifacts: Iterable[str]) -> EpisodeFiles | None:
    """The replay's files among an episode's artifacts; None without a replay or its scene."""
    names = [str(a) for a in artifacts]
    found = replay_of(names)
    if found is None or found[1] is None:
        return None
    replay, sha = found
    trajectory = next((a for a in names if a.endswith(TRAJECTORY)), None)
    return EpisodeFiles(replay, f"{SCENES}/{sha}{SCENE_SUFFIX}", trajectory)


def _json_in_html(value: Any) -> Markup:
    # Inside <script>, "</" would end the element: JSON's \u003c says the same and cannot.
    return Markup(json.dumps(value, separators=(",", ":")).replace("<", "\\u003c"))


def render_page(
    title: str,
    episodes: Mapping[int, Pane],
    *,
    show: Sequence[int] | None = None,
    static: str | None = None,
    back: tuple[str, str] | None = None,
) -> str:
    """The page. `static`: the URL of the static folder, for a served page (the files are fetched); None
    for a run folder's page (the modules and data come as scripts beside it). `show`: the episodes shown
    (one, or two side by side); None: those the page's address names."""
    config: dict[str, Any] = {
        "mode": "fetch" if static is not None else "script",
        "data": DATA,
        "episodes": {str(index): asdict(pane) for index, pane in episodes.items()},
    }
    if show is not None:
        config["show"] = [str(index) for index in show]
    three = f"{static}three/"
    imports = {"three": f"{three}build/three.module.js", "three/addons/": f"{three}examples/jsm/"}
    return (
        folder_templates()
        .get_template(PAGE)
        .render(
            title=title,
            config=_json_in_html(config),
            static=static or "",
            import_map=_json_in_html({"imports": imports}),
            modules_script=None if static is not None else MODULES_SCRIPT,
            back=back[0] if back else None,
            back_label=back[1] if back else "",
        )
    )


@lru_cache(maxsize=1)
def modules_script() -> str:
    """viewer/modules.js: the modules' sources and the linker that loads them as blob: modules."""
    sources = {name: (STATIC / name).read_text(encoding="utf-8") for name in MODULES}
    link = (STATIC / "replay" / "link.js").read_text(encoding="utf-8")
    return f"window.YardstickModules = {json.dumps(sources)};\n{link}"


def data_script(name: str, payload: bytes) -> str:
    """A file's bytes as a script a page opened from file:// can load (page.js reads them back)."""
    encoded = base64.b64encode(payload).decode("ascii")
    return f"(window.YardstickData ||= {{}})[{json.dumps(name)}] = {json.dumps(encoded)};\n"


def write_folder_viewer(out_dir: Path, recording: Path, title: str, episodes: Mapping[int, Pane]) -> None:
    """Write replay.html, viewer/modules.js and a data script for each file `episodes` name (the files
    under `recording`). A data script already written is kept: an episode's files and a scene named by
    its hash do not change."""
    write_whole(out_dir / MODULES_SCRIPT, modules_script())
    for pane in episodes.values():
        for name in (pane.replay, pane.scene, pane.trajectory):
            if name is None:
                continue
            target = out_dir / (DATA + name + ".js")
            if not target.exists():
                write_whole(target, data_script(name, (recording / name).read_bytes()))
    write_whole(out_dir / PAGE, render_page(title, episodes, back=("report.html", "the run's report")))
