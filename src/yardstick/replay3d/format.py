"""The `.seqreplay` file: one episode's 3D replay, the poses of a scene's moving nodes at every frame.

A replay is drawn in a scene (a glTF binary whose nodes are flat children of a root `seq_root` that turns Z-up
into Y-up, named by its sha256); the replay names the scene and carries, per frame, the world transform (Z up,
metres) of each node that moves. Nodes it does not name stay where the scene put them.

The file is one gzip stream holding, in this order:

    b"seqreplay 2\\n"          magic and format version
    header                     one line of UTF-8 JSON, ended by b"\\n":
        engine                 what recorded it: "mujoco", "own", ...
        scene_sha256           the scene's sha256 (hex), or null
        nodes                  the N moving nodes' names, in the order of the arrays' columns
        frames                 F, the number of frames
        pos_unit               metres a position count is (5e-05: a 0.05 mm grid)
        quat_unit              what a quaternion count is (1/32767)
        looks                  [[frame, node, change], ...]: from that frame on, `change` holds for that node,
                               {"rgba": [r, g, b, a]} or {"visible": false}; in frame order
        meta                   anything else the recorder said (hz, task, seed, ...): a JSON object
    t                          float64[F] little-endian: seconds since the episode's reset
    step                       int32[F] little-endian: steps played when the frame was taken (0: the reset's)
    pos                        counts[F, N, 3]: each node's world position (Z up), metres / pos_unit, rounded
    quat                       counts[F, N, 4]: each node's orientation w x y z, part / quat_unit, rounded

`pos` and `quat` are integers on a grid (a position within 0.025 mm, a quaternion's part within 1.5e-5),
stored as *second differences, zigzagged, in byte planes*, which is what makes a replay small. Taking each
number's frames in turn (every frame of node 0's x, then of its y, ..., then node 1's x; for quat node 0's
w, x, y, z, ...), a count c[f] is kept as the residual of a straight-line guess from the two frames before:

    r[0] = c[0]        r[1] = c[1] - c[0]        r[f] = c[f] - 2 c[f-1] + c[f-2]   (f >= 2)

A node at rest is all zeros from frame 1 on, one moving steadily nearly so. Each residual is zigzagged into
a uint32 (z = (r << 1) ^ (r >> 31): 0, -1, 1, -2 ... become 0, 1, 2, 3 ...), and the uint32s, in that order,
are written as four byte planes: every uint32's lowest byte, then every one's second byte, then third, then
highest. The high planes are then nearly all zeros and gzip packs them to almost nothing. Reading undoes
it: the planes regrouped into little-endian uint32s, r = (z >> 1) ^ -(z & 1), then c[0] = r[0],
c[1] = r[1] + c[0], c[f] = r[f] + 2 c[f-1] - c[f-2] (two running sums), and a position is c × pos_unit
metres, a quaternion's part c × quat_unit. A position is within ±10 km (2e8 counts) and a quaternion's part
within [-1, 1] (32767 counts), so every count and residual fits an int32 (a JS reader may use Int32Array).

Version 1 (float32 poses, delta-xor, lossless) was an early draft and is not read: about 3.5 times larger.
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

MAGIC = b"seqreplay 2\n"
# The grids (see above): 0.05 mm is far below what a viewer shows; 1/32767 puts a quaternion in int16's range.
POS_UNIT = 5e-05
QUAT_SCALE = 32767
# A position counts at most 2e8 (10 km / 0.05 mm), so a second difference (at most 4x that) fits an int32.
POS_LIMIT = 10_000.0
# A unit quaternion's part is within ±1; float32 arithmetic may leave it a hair past (clipped when written).
QUAT_LIMIT = 1.0 + 1e-4
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
        A bad look, or a pose off the file's grids (not finite, a position past ±10 km, a quaternion's part
        past ±1), raises before anything of the frame is kept."""
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
        # One comparison a kind (a NaN fails it too): a few microseconds, where a bad pose would only show at
        # the episode's end, as a replay that cannot be written.
        if not (np.abs(self._pos[index]) <= POS_LIMIT).all():
            raise ValueError(f"pos: finite metres within ±{POS_LIMIT:g}, not {np.asarray(pos).tolist()}")
        if not (np.abs(self._quat[index]) <= QUAT_LIMIT).all():
            raise ValueError(f"quat: a unit quaternion (parts within ±1), not {np.asarray(quat).tolist()}")
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
            "pos_unit": POS_UNIT,
            "quat_unit": 1 / QUAT_SCALE,
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
            out.write(_encode(self._pos[:count], 1 / POS_UNIT))
            out.write(_encode(np.clip(self._quat[:count], -1.0, 1.0), QUAT_SCALE))
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
        raise NotAReplay(f"no {MAGIC!r} at its start: not a .seqreplay of version 2")
    end = body.find(b"\n", len(MAGIC))
    if end < 0:
        raise NotAReplay("its header line is not ended")
    try:
        header = json.loads(body[len(MAGIC) : end])
        nodes = [str(n) for n in header["nodes"]]
        count = int(header["frames"])
        engine = str(header["engine"])
        units = float(header["pos_unit"]), float(header["quat_unit"])
    except (ValueError, KeyError, TypeError) as exc:
        raise NotAReplay(f"its header is not the JSON this format says: {exc}") from None
    width = len(nodes)
    sizes = (8 * count, 4 * count, 12 * count * width, 16 * count * width)  # a count is 4 bytes
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
        pos=_decode(parts[2], (count, width, 3), units[0]),
        quat=_decode(parts[3], (count, width, 4), units[1]),
        looks=[(int(f), str(n), dict(c)) for f, n, c in header.get("looks", [])],
        meta=dict(header.get("meta") or {}),
    )


def _encode(values: Floats, scale: float) -> bytes:
    """float32[F, ...] as counts on a grid of 1/scale, second differences zigzagged in byte planes (above)."""
    counts = np.rint(values.reshape(len(values), -1).astype(np.float64) * scale).astype(np.int64)
    residuals = counts.copy()
    residuals[1:] -= counts[:-1]
    residuals[2:] -= counts[1:-1] - counts[:-2]
    zigzag = ((residuals << 1) ^ (residuals >> 63)).astype("<u4")
    # Number by number (one number's frames together), so a still or steady number is a run of zeros.
    return np.ascontiguousarray(zigzag.T).view(np.uint8).reshape(-1, 4).T.tobytes()


def _decode(data: bytes, shape: tuple[int, ...], unit: float) -> Floats:
    planes = np.frombuffer(data, dtype=np.uint8).reshape(4, -1)
    zigzag = np.ascontiguousarray(planes.T).view("<u4").reshape(-1, shape[0]).T.astype(np.int64)
    residuals = (zigzag >> 1) ^ -(zigzag & 1)
    # Two running sums undo the second difference: the first gives each frame's step from the one before.
    steps = residuals.copy()
    steps[1:] = np.cumsum(residuals[1:], axis=0)
    counts = np.cumsum(steps, axis=0)
    return (counts * unit).astype(np.float32).reshape(shape)


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
