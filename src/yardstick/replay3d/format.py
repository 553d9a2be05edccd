"""The `.seqreplay` file: one episode's 3D replay, the poses of a scene's moving nodes at every frame.

A replay is drawn in a scene (a glTF binary whose nodes are flat children of a root `seq_root` that turns Z-up
into Y-up, named by its sha256); the replay names the scene and carries, per frame, the world transform (Z up,
metres) of each node that moves. Nodes it does not name stay where the scene put them.

The file is one gzip stream holding, in this order:

    b"seqreplay 1\\n"          magic and format version
    header                     one line of UTF-8 JSON, ended by b"\\n":
        engine                 what recorded it: "mujoco", "own", ...
        scene_sha256           the scene's sha256 (hex), or null
        nodes                  the N moving nodes' names, in the order of the arrays' columns
        frames                 F, the number of frames
        looks                  [[frame, node, change], ...]: from that frame on, `change` holds for that node,
                               {"rgba": [r, g, b, a]} or {"visible": false}; in frame order
        meta                   anything else the recorder said (hz, task, seed, ...): a JSON object
    t                          float64[F] little-endian: seconds since the episode's reset
    step                       int32[F] little-endian: steps played when the frame was taken (0: the reset's)
    pos                        float32[F, N, 3]: each node's position in the world, metres, Z up
    quat                       float32[F, N, 4]: each node's orientation, w x y z

`pos` and `quat` are stored *delta-xor in byte planes*, which is lossless and what makes a replay small: each
float32's 4 bytes are read as a little-endian uint32; each frame's words are XORed with the previous frame's
(frame 0 kept as is); the words are ordered number by number (every frame of node 0's x, then of its y, ...,
then node 1's); and their bytes are regrouped by significance (every word's lowest byte, then every second
byte, ...). A node that did not move is all zeros; one that moved a little shares its high bytes with the
frame before, so the high planes are nearly all zeros and gzip packs them to almost nothing, where raw floats
barely compress. Reading undoes the three steps (`_unplane`, then a cumulative XOR).
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAGIC = b"seqreplay 1\n"
SUFFIX = ".seqreplay"
PARTIAL = ".partial"
# Level 6: within a few percent of 9 on these byte planes at a third of the time (an episode's close).
LEVEL = 6

Floats = npt.NDArray[np.float32]


class NotAReplay(ValueError):
    """The bytes are no `.seqreplay` of a version this reader knows, or are cut short."""


@dataclass(frozen=True)
class Replay:
    """One episode's replay as read back: arrays as the header above describes them."""

    engine: str
    scene_sha256: str | None
    nodes: list[str]
    t: npt.NDArray[np.float64]
    step: npt.NDArray[np.int32]
    pos: Floats
    quat: Floats
    looks: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def frames(self) -> int:
        return len(self.t)


class ReplayWriter:
    """Collects an episode's frames in memory (arrays grown by doubling) and writes them once, at the end.

    `frame` costs two float32 copies of N×3 and N×4: the poses are not encoded until `to_bytes`."""

    def __init__(
        self,
        nodes: Sequence[str],
        *,
        engine: str,
        scene_sha256: str | None = None,
        meta: Mapping[str, Any] | None = None,
        capacity: int = 512,
    ) -> None:
        names = [str(n) for n in nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"nodes: each node is named once; repeated: {sorted(_repeated(names))}")
        self.nodes = names
        self.engine = engine
        self.scene_sha256 = scene_sha256
        self.meta = dict(meta or {})
        self.looks: list[tuple[int, str, dict[str, Any]]] = []
        count, capacity = len(names), max(1, capacity)
        self._t = np.empty(capacity, dtype=np.float64)
        self._step = np.empty(capacity, dtype=np.int32)
        self._pos = np.empty((capacity, count, 3), dtype=np.float32)
        self._quat = np.empty((capacity, count, 4), dtype=np.float32)
        self._frames = 0

    @property
    def frames(self) -> int:
        return self._frames

    def frame(
        self,
        t: float,
        step: int,
        pos: npt.ArrayLike,
        quat: npt.ArrayLike,
        looks: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """The moving nodes at `t` s after the reset, `step` steps in: pos [N, 3], quat [N, 4] (w x y z).
        A bad look raises before anything of the frame is kept."""
        changes = []
        for node, change in (looks or {}).items():
            # A look may touch a node that never moves (a goal marker turning green): any name goes.
            if not isinstance(node, str):
                raise ValueError(f"looks: a node is named by a string, not {node!r}")
            changes.append((node, _look(node, change)))
        index = self._frames
        if index == len(self._t):
            self._grow()
        self._pos[index] = pos  # converts to float32 and checks the shape, in one copy
        self._quat[index] = quat
        self._t[index] = t
        self._step[index] = step
        self._frames = index + 1
        self.looks.extend((index, node, change) for node, change in changes)

    def to_bytes(self) -> bytes:
        """The whole file."""
        count = self._frames
        header = {
            "engine": self.engine,
            "scene_sha256": self.scene_sha256,
            "nodes": self.nodes,
            "frames": count,
            "looks": [[frame, node, change] for frame, node, change in self.looks],
            "meta": self.meta,
        }
        buffer = io.BytesIO()
        # mtime 0: the same episode gives the same bytes (a rerun's replay compares equal as a file).
        with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=LEVEL, mtime=0) as out:
            out.write(MAGIC)
            out.write(json.dumps(header, separators=(",", ":"), allow_nan=False).encode() + b"\n")
            out.write(self._t[:count].astype("<f8").tobytes())
            out.write(self._step[:count].astype("<i4").tobytes())
            out.write(_plane(self._pos[:count]))
            out.write(_plane(self._quat[:count]))
        return buffer.getvalue()

    def write(self, path: str | Path) -> Path:
        """Write the file at `path` (under a `.partial` name first: a file under its own name is whole)."""
        target = Path(path)
        partial = target.with_name(target.name + PARTIAL)
        try:
            partial.write_bytes(self.to_bytes())
            os.replace(partial, target)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return target

    def _grow(self) -> None:
        size = 2 * len(self._t)
        self._t = np.resize(self._t, size)
        self._step = np.resize(self._step, size)
        self._pos = np.resize(self._pos, (size, *self._pos.shape[1:]))
        self._quat = np.resize(self._quat, (size, *self._quat.shape[1:]))


def read(source: str | Path | bytes) -> Replay:
    """A `.seqreplay` read back, from a path or its bytes. NotAReplay when it is not one, or is cut short."""
    raw = source if isinstance(source, bytes) else Path(source).read_bytes()
    try:
        body = gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise NotAReplay(f"not a gzip stream: {exc}") from None
    if not body.startswith(MAGIC):
        raise NotAReplay(f"no {MAGIC!r} at its start: not a .seqreplay of version 1")
    end = body.find(b"\n", len(MAGIC))
    if end < 0:
        raise NotAReplay("its header line is not ended")
    try:
        header = json.loads(body[len(MAGIC) : end])
        nodes = [str(n) for n in header["nodes"]]
        count = int(header["frames"])
        engine = str(header["engine"])
    except (ValueError, KeyError, TypeError) as exc:
        raise NotAReplay(f"its header is not the JSON this format says: {exc}") from None
    width = len(nodes)
    sizes = (8 * count, 4 * count, 12 * count * width, 16 * count * width)
    if len(body) - end - 1 != sum(sizes):
        raise NotAReplay(f"{len(body) - end - 1} bytes after the header where {sum(sizes)} are due")
    at = end + 1
    parts = []
    for size in sizes:
        parts.append(body[at : at + size])
        at += size
    sha = header.get("scene_sha256")
    return Replay(
        engine=engine,
        scene_sha256=str(sha) if sha is not None else None,
        nodes=nodes,
        t=np.frombuffer(parts[0], dtype="<f8").astype(np.float64),
        step=np.frombuffer(parts[1], dtype="<i4").astype(np.int32),
        pos=_unplane(parts[2], (count, width, 3)),
        quat=_unplane(parts[3], (count, width, 4)),
        looks=[(int(f), str(n), dict(c)) for f, n, c in header.get("looks", [])],
        meta=dict(header.get("meta") or {}),
    )


def _plane(values: Floats) -> bytes:
    """float32[F, ...] as delta-xor words in byte planes (the module's docstring)."""
    words = np.ascontiguousarray(values, dtype="<f4").view("<u4").reshape(len(values), -1)
    deltas = words.copy()
    deltas[1:] ^= words[:-1]
    # Signal by signal (one number's frames together): a fifth smaller than frame by frame once gzipped.
    return np.ascontiguousarray(deltas.T).view(np.uint8).reshape(-1, 4).T.tobytes()


def _unplane(data: bytes, shape: tuple[int, ...]) -> Floats:
    planes = np.frombuffer(data, dtype=np.uint8).reshape(4, -1)
    deltas = np.ascontiguousarray(planes.T).view("<u4").reshape(-1, shape[0]).T
    words = np.bitwise_xor.accumulate(deltas, axis=0) if shape[0] else deltas
    return words.view("<f4").astype(np.float32).reshape(shape)


def _look(node: Any, change: Mapping[str, Any]) -> dict[str, Any]:
    """A look change as the file keeps it: {"rgba": 4 numbers in [0, 1]} and/or {"visible": bool}."""
    kept: dict[str, Any] = {}
    for key, value in dict(change).items():
        if key == "rgba":
            rgba = [float(v) for v in value]
            if len(rgba) != 4 or not all(0.0 <= v <= 1.0 for v in rgba):
                raise ValueError(f"looks[{node!r}].rgba: four numbers in [0, 1], not {value!r}")
            kept["rgba"] = rgba
        elif key == "visible":
            kept["visible"] = bool(value)
        else:
            raise ValueError(f"looks[{node!r}]: a look changes rgba or visible, not {key!r}")
    return kept


def _repeated(names: list[str]) -> set[str]:
    seen: set[str] = set()
    repeated: set[str] = set()
    for name in names:
        (repeated if name in seen else seen).add(name)
    return repeated
