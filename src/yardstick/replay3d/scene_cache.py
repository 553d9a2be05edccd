"""Exported scenes kept on disk, so a model's scene is exported once a machine rather than once a process.

A MuJoCo model's export costs 0.1-0.5 s (MT10's ten models, ~3 s: more than the replay's poses cost over a
whole eval), and every process of every eval builds its benchmark's models anew. The key is the sha256 of the
model as MuJoCo saves it (mj_saveModel into a buffer: every field the export reads, and nothing of the process
or of the XML's spelling) with `EXPORTER`, the version of what an export makes of a model; the entry is the
scene's .glb and a JSON beside it (the scene's sha256 and its nodes). Reading one back costs the model's save
and two hashes (a few milliseconds for MT10's models), and the .glb is checked against its sha256, so a torn
or edited file is exported again rather than served.

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

ENV = "YARDSTICK_SCENE_CACHE"
# Bump when mujoco_scene's export makes other bytes of the same model (its meshes, materials, textures'
# sizes, what is drawn): the entries of the version before are then never read.
EXPORTER = 1


def folder() -> Path | None:
    """Where scenes are kept, or None when the cache is off."""
    chosen = os.environ.get(ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off") else Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "yardstick" / "scenes"


def model_key(model: Any) -> str:
    """The sha256 of `model` (a mujoco.MjModel) as MuJoCo saves it, under this exporter's version."""
    import mujoco

    saved = np.empty(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, saved)
    digest = hashlib.sha256(f"yardstick scene exporter {EXPORTER}\n".encode())
    digest.update(saved.data)
    return digest.hexdigest()


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


def store(key: str, glb: bytes, said: dict[str, Any]) -> None:
    """Keep the scene under `key` (the .glb first, each file whole under its name or not there at all)."""
    where = folder()
    if where is None:
        return
    try:
        where.mkdir(parents=True, exist_ok=True)
        write_whole(where / f"{key}.glb", glb)
        write_whole(where / f"{key}.json", json.dumps(said).encode())
    except OSError:
        return  # a full disk or a read-only home: the scene was exported, which is all the caller needs


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
