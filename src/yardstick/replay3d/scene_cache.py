"""Exported scenes kept on disk, so a model's scene is exported once a machine rather than once a process.

A MuJoCo model's export costs 0.1-0.5 s (MT10's ten models, ~3 s: more than the replay's poses cost over a
whole eval), and every process of every eval builds its benchmark's models anew. The key is a hash of the
model's arrays as they sit in memory (every array of mjModel, the names among them, so every field the export
reads, and nothing of the process or of the XML's spelling) but for what a scene does not draw (collision
trees, `bvh_*`, derived from the meshes and a third of a Meta-World model's 21 MB; sites) and the scene's
nodes' own placement (which a replay records: a key that held it would change with the episode a model was
first seen in, as Meta-World places a task's fixture by seed), with MuJoCo's version and `EXPORTER`, the
version of what an export makes of a model. The hash is BLAKE3 where it is installed (a dependency), else
SHA-256: a Meta-World model's 9.6 MB (6 MB of them its textures) take 1.6 ms against SHA-256's 5.4 (saving
the model into a buffer first, mj_saveModel, and hashing that took 43 ms). That is the bulk of finding a
scene once a model a process, and it runs beside the episode's first steps (`mujoco_poses.scenes_soon`),
which it slowed: 7 ms of the first recorded episode of each MT10 task in a run, with SHA-256. The entry is
the scene's .glb and a JSON beside it (the scene's sha256, the contract's name of it, its nodes, and the
.glb's BLAKE3); the .glb is checked against its hash when read (BLAKE3 where both sides have it, 0.3 ms for
1.6 MB, else its sha256, 0.9 ms), so a torn or edited file is exported again rather than served.

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

try:
    from blake3 import blake3
except ImportError:  # pragma: no cover - an install without its wheel: SHA-256, 3.4 times slower
    blake3 = None  # type: ignore[assignment,misc]

# The hash named in what a key hashes first: a key of one is never a key of the other.
_HASH = "blake3" if blake3 is not None else "sha256"

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
    """The hash (BLAKE3, else SHA-256) of `model`'s (a mujoco.MjModel's) arrays and names, under MuJoCo's
    and this exporter's versions, but for the placement of the bodies `placed` (the scene's nodes). Each
    array is hashed under its name and shape, so the same bytes split otherwise differ."""
    import mujoco

    digest = blake3() if blake3 is not None else hashlib.sha256()
    digest.update(f"yardstick scene exporter {EXPORTER}, mujoco {mujoco.__version__}, {_HASH}\n".encode())
    for name in _array_names(model):
        array = getattr(model, name)
        if name in _PLACEMENT:
            array = array.copy()
            array[placed] = 0
        digest.update(f"\n{name} {array.dtype.str} {array.shape}\n".encode())
        digest.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)  # bytes, as BLAKE3 takes
    digest.update(b"\nnames\n" + bytes(model.names))
    return str(digest.hexdigest())


def _whole(glb: bytes, said: dict[str, Any]) -> bool:
    """Whether `glb` is the file kept under `said` (its BLAKE3 where it was kept with one and this install
    has it, else its sha256)."""
    if blake3 is not None and isinstance(said.get("blake3"), str):
        return bool(blake3(glb).hexdigest() == said["blake3"])
    return hashlib.sha256(glb).hexdigest() == said.get("sha256")


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
    if not isinstance(said, dict) or not _whole(glb, said):
        return None
    return glb, said


def store(key: str, glb: bytes, said: dict[str, Any]) -> Path | None:
    """Keep the scene under `key` (the .glb first, each file whole under its name or not there at all); the
    .glb's path, or None when it could not be kept."""
    where = folder()
    if where is None:
        return None
    if blake3 is not None:
        said = {**said, "blake3": blake3(glb).hexdigest()}
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
