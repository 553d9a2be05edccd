"""Exported scenes kept on disk, so a model's scene is exported once a machine rather than once a process.

A MuJoCo model's export costs 0.1-0.5 s (MT10's ten models, ~3 s: more than the replay's poses cost over a
whole eval), and every process of every eval builds its benchmark's models anew. The key is the sha256 of the
model's arrays as they sit in memory (every array of mjModel, the names among them, so every field the export
reads, and nothing of the process or of the XML's spelling) but for what a scene does not draw (collision
trees, `bvh_*`, derived from the meshes and a third of a Meta-World model's 21 MB; sites) and the scene's
nodes' own placement (which a replay records: a key that held it would change with the episode a model was
first seen in, as Meta-World places a task's fixture by seed), with MuJoCo's version and `EXPORTER`, the
version of what an export makes of a model. Hashing the arrays where they are costs 7.5 ms a Meta-World
model, where saving the model into a buffer first (mj_saveModel) and hashing that took 43 ms. The entry is
the scene's .glb and a JSON beside it (the scene's sha256 and its nodes); the .glb is checked against its
sha256 when read, so a torn or edited file is exported again rather than served.

The folder is `$YARDSTICK_SCENE_CACHE`, else `$XDG_CACHE_HOME/yardstick/scenes`, else
`~/.cache/yardstick/scenes`; `YARDSTICK_SCENE_CACHE=off` keeps none. A folder that cannot be written costs
only the export: the cache is never a reason an episode's replay is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ENV = "YARDSTICK_SCENE_CACHE"
# Bump when mujoco_scene's export makes other bytes of the same model (its meshes, materials, textures'
# sizes, what is drawn): the entries of the version before are then never read.
EXPORTER = 4
# Arrays the key leaves out: what MuJoCo derives from the meshes the key holds (collision trees, convex
# hulls' faces), and sites, which a scene does not draw (Meta-World moves its goal sites each seed).
_UNDRAWN = ("bvh_", "mesh_poly", "site_")
# A node's own place, which the scene leaves out (a replay places every node each frame): a benchmark may set
# it anew each episode (Meta-World's door, by its body_pos). Their rows are left out of the key.
_PLACEMENT = ("body_pos", "body_quat")


def folder() -> Path | None:
    """Where scenes are kept, or None when the cache is off."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off") else Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "yardstick" / "scenes"


def model_key(model: Any, placed: npt.NDArray[np.intp]) -> str:
    """The sha256 of `model`'s (a mujoco.MjModel's) arrays and names, under MuJoCo's and this exporter's
    versions, but for the placement of the bodies `placed` (the scene's nodes). Each array is hashed under
    its name and shape, so the same bytes split otherwise differ."""
    import mujoco

    digest = hashlib.sha256(f"yardstick scene exporter {EXPORTER}, mujoco {mujoco.__version__}\n".encode())
    for name in _array_names(model):
        array = getattr(model, name)
        if name in _PLACEMENT:
            array = array.copy()
            array[placed] = 0
        digest.update(f"\n{name} {array.dtype.str} {array.shape}\n".encode())
        digest.update(np.ascontiguousarray(array).data)
    digest.update(b"\nnames\n" + bytes(model.names))
    return digest.hexdigest()


_ARRAYS: dict[type, list[str]] = {}


def _array_names(model: Any) -> list[str]:
    """The names of an MjModel's array fields (the properties that answer arrays; its sizes are their
    shapes), found once a binding: sorted, so the key hashes them in one order in every process."""
    kind = type(model)
    names = _ARRAYS.get(kind)
    if names is None:
        names = _ARRAYS[kind] = sorted(
            name
            for name, member in vars(kind).items()
            if isinstance(member, property)
            and not name.startswith(("_", *_UNDRAWN))
            and isinstance(getattr(model, name), np.ndarray)
        )
    return names


def load(key: str) -> tuple[bytes, dict[str, Any]] | None:
    """The .glb and what was said of it under `key`, or None (no cache, no entry, or one not whole)."""
    where = folder()
    if where is None:
        return None
    try:
        said = json.loads((where / f"{key}.json").read_text())
        glb = (where / f"{key}.glb").read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(said, dict) or hashlib.sha256(glb).hexdigest() != said.get("sha256"):
        return None
    return glb, said


def store(key: str, glb: bytes, said: dict[str, Any]) -> Path | None:
    """Keep the scene under `key` (the .glb first, each file whole under its name or not there at all); the
    .glb's path, or None when it could not be kept."""
    where = folder()
    if where is None:
        return None
    try:
        where.mkdir(parents=True, exist_ok=True)
        write_whole(where / f"{key}.glb", glb)
        write_whole(where / f"{key}.json", json.dumps(said).encode())
    except OSError:
        return None  # a full disk or a read-only home: the scene was exported, all the caller needs
    return where / f"{key}.glb"


def glb_path(key: str) -> Path | None:
    """Where the .glb of `key` is kept (read by `load`), or None when the cache is off."""
    where = folder()
    return None if where is None else where / f"{key}.glb"


def write_whole(target: Path, data: bytes) -> None:
    """`data` at `target`, whole or not at all: written under a name of its own (several processes may write
    the same file at once) and renamed into place, readable as a file written plainly is (0644)."""
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(partial, 0o644)
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
