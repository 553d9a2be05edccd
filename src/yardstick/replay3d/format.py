"""The `.seqreplay` file: one episode's 3D replay, the poses of a scene's recorded nodes at every frame.

A replay is drawn in a scene (a glTF binary whose nodes are flat children of a root `seq_root` that turns Z-up
into Y-up, named by its sha256); the replay names the scene and carries, per frame, the pose (Z up, metres) of
each node it records: those that move, and fixtures its benchmark may place anew each episode. Nodes it does
not name stay where the scene put them.

The file is one gzip stream holding, in this order:

    b"seqreplay 3\n"          magic and format version
    header                     one line of UTF-8 JSON, ended by b"\n":
        engine                 what recorded it: "mujoco", "own", ...
        scene_sha256           the scene's sha256 (hex), or null
        nodes                  the N recorded nodes' names, in the order of the numbers below
        parents                for each node, the index in `nodes` of the node its pose is relative to, or -1
                               for a pose in the world; a parent comes before its children
        rest                   for each node, a quaternion [w, x, y, z] in counts of quat_unit: its
                               orientation (relative, as below) at frame 0, rounded
        frames                 F, the number of frames
        t_scale                time counts a second (1000000: microseconds); a time is count / t_scale
        pos_unit               metres a position count is (0.0005: a 0.5 mm grid)
        quat_unit              what a quaternion count is (1/4096)
        looks                  [[frame, node, change], ...]: from that frame on, `change` holds for that node,
                               {"rgba": [r, g, b, a]} or {"visible": false}; in frame order
        meta                   anything else the recorder said (hz, task, seed, ...): a JSON object
    counts                     the rest: (2 + 7 N) × F unsigned LEB128 varints, number by number (below)

The numbers, each a column of F frames, in this order: t (seconds since the episode's reset × t_scale), step
(steps played when the frame was taken, 0: the reset's), then each node's position x, y, z (node 0's, then
node 1's, ...; metres / pos_unit), then each node's orientation w, x, y, z (part / quat_unit). All are rounded
to integer *counts*. A node with a parent holds its pose in its parent's frame at that frame, p_local =
conj(q_parent) (p - p_parent) q_parent and q_local = conj(q_parent) q; the world pose is composed back,
parents first: p = p_parent + q_parent p_local conj(q_parent), q = q_parent q_local (then normalised). A
robot's link hinged to the one before it then keeps a still position and turns about one axis, which is
most of what makes a replay small. A node's orientation is then stored as its turn from its rest (`rest`
normalised, R): q_stored = conj(R) q, read back as q = R q_stored. A hinge's turn about its own axis leaves
the other two of x, y, z at zero when that axis is one of the node's own (as robots' joints are). The
recorder picks the sign of each quaternion (q and -q turn alike) so a node's does not flip from one frame to
the next.

Each column's counts c[f] are stored as the residual of a straight-line guess from the two frames before:

    r[0] = c[0]        r[1] = c[1] - c[0]        r[f] = c[f] - 2 c[f-1] + c[f-2]   (f >= 2)

zigzagged (z = 2r for r >= 0, -2r - 1 below: 0, -1, 1, -2 ... become 0, 1, 2, 3 ...) and written as an
unsigned LEB128 varint (seven bits a byte, lowest first, the high bit set on every byte but a number's last).
A still or steadily moving number is a run of zero bytes, which gzip packs to almost nothing. Reading undoes
it: r = z / 2 for an even z, -(z + 1) / 2 for an odd one, then c[0] = r[0], c[1] = r[1] + c[0],
c[f] = r[f] + 2 c[f-1] - c[f-2] (two running sums). Every count and residual is within ±2^53, so a JS reader
may do it all in plain numbers (not 32-bit bitwise operators).

The grids are below what a viewer shows. A position is within 0.25 mm of the recorded one on each axis, a
quaternion's part within 1/8192, which turns a node by at most ~0.5 mrad: a 1 m link's tip moves < 0.5 mm.
Composing along a chain adds its links' errors; on MT10's Sawyer (ten moving nodes, seven links deep) every
node's reconstructed position stays within 1 mm of MuJoCo's, about a pixel's width of a 1.5 m table scene
drawn 1250 pixels wide. A time is within 0.5 µs.

Versions 1 (float32, lossless) and 2 (world poses on 0.05 mm and 1/32767 grids, byte planes) were earlier
drafts and are not read: 3.5 and 3 times larger than this one on MT10.

The writer's numbers are made in one pass by `_columns.c` where the install compiled it (setup.py), else by
numpy (`_numbers`): the same bytes, held to it by tests/test_replay3d.py. At an episode's close numpy costs
its calls, not its arithmetic (~130 calls: ~0.4 ms warm, ~0.75 ms inside an eval's loop; the C, ~20 µs).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yardstick.replay3d.scene_cache import write_whole

try:  # built by the install where a C compiler is at hand (setup.py); the same bytes as numpy's, sooner
    from yardstick.replay3d import _columns
except ImportError:  # pragma: no cover - an install without a compiler, or another interpreter's box
    _columns = None  # type: ignore[assignment]

try:  # libdeflate: the same gzip stream at level 6 in half zlib's time, ~1% smaller (an episode's close)
    import deflate
except ImportError:  # pragma: no cover - a box's interpreter of an image without it: zlib, equally read
    deflate = None  # type: ignore[assignment]

MAGIC = b"seqreplay 3\n"
VERSION = 3
# The grids (see above): 0.5 mm and 1/4096 are below what a viewer shows; a microsecond, finer than a step.
T_SCALE = 1_000_000
POS_UNIT = 5e-04
QUAT_SCALE = 4096
# Keeps every count and second difference within ±2^53 (a JS number's exact integers): 10 km, 1e9 s.
POS_LIMIT = 10_000.0
T_LIMIT = 1e9
# A unit quaternion's part is within ±1; float32 arithmetic may leave it a hair past (clipped when written).
QUAT_LIMIT = 1.0 + 1e-4
SUFFIX = ".seqreplay"
PARTIAL = ".partial"
# Level 6: within a few percent of 9 on these varints at a third of the time (an episode's close); with
# libdeflate at 6 it is smaller than zlib's 9 (1082 against 1092 bytes a MT10 episode, 47 against 89 µs).
LEVEL = 6

Floats = npt.NDArray[np.float32]


class NotAReplay(ValueError):
    """The bytes are no `.seqreplay` of a version this reader knows, or are cut short."""


@dataclass(frozen=True)
class Replay:
    """One episode's replay as read back: arrays as the header above describes them, poses in the world
    (composed from their parents' where the file holds them relative)."""

    engine: str
    scene_sha256: str | None
    nodes: list[str]
    parents: list[int]
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

    Two ways in: `frame` for poses handed over one frame at a time (checked as they come, so a bad one is
    named at its frame), and `extend` for a simulator's frames kept by its recorder (mujoco_poses), checked
    all together. The poses are not encoded until `to_bytes`."""

    def __init__(
        self,
        nodes: Sequence[str],
        *,
        engine: str,
        scene_sha256: str | None = None,
        meta: Mapping[str, Any] | None = None,
        parents: Sequence[int] | None = None,
        capacity: int = 512,
    ) -> None:
        names = [str(n) for n in nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"nodes: each node is named once; repeated: {sorted(_repeated(names))}")
        self.nodes = names
        self.parents = _parents(parents, len(names))
        self.engine = engine
        self.scene_sha256 = scene_sha256
        self.meta = dict(meta or {})
        self.looks: list[tuple[int, str, dict[str, Any]]] = []
        count, capacity = len(names), max(1, capacity)
        self._t = np.empty(capacity, dtype=np.float64)
        self._step = np.empty(capacity, dtype=np.int32)
        # float64, as simulators keep poses: a gather is then a copy with no conversion.
        self._pos = np.empty((capacity, count, 3), dtype=np.float64)
        self._quat = np.empty((capacity, count, 4), dtype=np.float64)
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
        """The recorded nodes at `t` s after the reset, `step` steps in: pos [N, 3], quat [N, 4] (w x y z).
        A bad look, or a pose off the file's grids (not finite, a position past ±10 km, a quaternion's part
        past ±1), raises before anything of the frame is kept."""
        for node in looks or {}:
            # A look may touch a node that never moves (a goal marker turning green): any name goes.
            if not isinstance(node, str):
                raise ValueError(f"looks: a node is named by a string, not {node!r}")
        # One frame is a batch of one: the same checks (a NaN fails them too), before anything is kept.
        self.extend(
            np.array([t], dtype=np.float64),
            np.array([step], dtype=np.int32),
            np.asarray(pos, dtype=np.float64)[None],
            np.asarray(quat, dtype=np.float64)[None],
            [(0, node, change) for node, change in (looks or {}).items()],
        )

    def extend(
        self,
        t: npt.NDArray[np.float64],
        step: npt.NDArray[np.int32],
        pos: npt.NDArray[np.float64],
        quat: npt.NDArray[np.float64],
        looks: Sequence[tuple[int, str, Mapping[str, Any]]] = (),
        *,
        handed: bool = False,
    ) -> None:
        """Frames [F] at once, as a simulator's recorder kept them: times, steps, poses [F, N, 3] and
        [F, N, 4], and look changes as (frame among these, node, change); checked all together, and nothing
        kept when one is off the file's grids or a look is bad (named). `handed`: the caller lets go of the
        arrays (writes to them no more), so a writer with no frames yet keeps them rather than a copy."""
        _check_frames(t, pos, quat, first=self._frames)
        changes = [(self._frames + int(frame), node, _look(node, change)) for frame, node, change in looks]
        if handed and not self._frames and len(t):  # (empty arrays would leave no room to grow)
            self._t, self._step, self._pos, self._quat = t, step, pos, quat
            self._frames = len(t)
        else:
            count = self._frames + len(t)
            while count > len(self._t):
                self._grow()
            at = slice(self._frames, count)
            self._t[at], self._step[at], self._pos[at], self._quat[at] = t, step, pos, quat
            self._frames = count
        self.looks.extend(changes)

    def look(self, looks: Mapping[str, Mapping[str, Any]]) -> None:
        """Changes to how nodes look from the last frame on, said after it (a looks method asked once the
        frame was handed); a bad one raises, naming it, before any is kept."""
        if not self._frames:
            raise ValueError("looks: a look changes from a frame on, and no frame is kept yet")
        changes = [(self._frames - 1, node, _look(node, change)) for node, change in looks.items()]
        self.looks.extend(changes)

    def to_bytes(self) -> bytes:
        """The whole file."""
        count = self._frames
        header: dict[str, Any] = {
            "engine": self.engine,
            "scene_sha256": self.scene_sha256,
            "nodes": self.nodes,
            "parents": self.parents,
            "rest": [],  # below, once the poses are relative
            "frames": count,
            "t_scale": T_SCALE,
            "pos_unit": POS_UNIT,
            "quat_unit": 1 / QUAT_SCALE,
            "looks": [[frame, node, change] for frame, node, change in self.looks],
            "meta": self.meta,
        }
        rest, body = _numbers(
            self._t[:count], self._step[:count], self._pos[:count], self._quat[:count], self.parents
        )
        header["rest"] = rest
        head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
        whole = b"".join((MAGIC, head, b"\n", body))
        # mtime 0 (libdeflate's always): the same episode gives the same bytes on one install (a rerun's
        # replay compares equal as a file; zlib, where libdeflate is missing, packs other bytes, read alike).
        if deflate is not None:
            return bytes(deflate.gzip_compress(whole, LEVEL))  # it answers a bytearray
        return gzip.compress(whole, LEVEL, mtime=0)

    def write(self, path: str | Path) -> Path:
        """Write the file at `path`, whole or not at all (a recorder makes its file ahead instead:
        engine.files_ahead)."""
        target = Path(path)
        write_whole(target, self.to_bytes())
        return target

    def _grow(self) -> None:
        self._t, self._step, self._pos, self._quat = doubled(self._t, self._step, self._pos, self._quat)


def _numbers(
    t: npt.NDArray[np.float64],
    step: npt.NDArray[np.int32],
    pos: npt.NDArray[np.float64],
    quat: npt.NDArray[np.float64],
    parents: list[int],
    *,
    compiled: bool = _columns is not None,
) -> tuple[list[list[int]], bytes]:
    """An episode's frames [F] as the file keeps them: each node's rest orientation (counts) and the varints
    after the header; by _columns.c (`compiled`, where the install built it) or numpy, the same either way."""
    count, width = len(t), len(parents)
    if compiled:
        assert _columns is not None
        rest_bytes, body = _columns.encode(
            np.ascontiguousarray(t, dtype=np.float64),
            np.ascontiguousarray(step, dtype=np.int32),
            np.ascontiguousarray(pos, dtype=np.float64),
            np.ascontiguousarray(quat, dtype=np.float64),
            np.asarray(parents, dtype=np.int64),
            float(T_SCALE),
            POS_UNIT,
            float(QUAT_SCALE),
        )
        return np.frombuffer(rest_bytes, dtype=np.int64).reshape(width, 4).tolist(), body
    pos, quat = _relative(pos, np.clip(quat, -1.0, 1.0), parents)
    quat = _continuous(quat)
    rest = np.rint(quat[0] * QUAT_SCALE) if count else np.tile([QUAT_SCALE, 0.0, 0.0, 0.0], (width, 1))
    quat = _multiply(_normalised(rest) * _CONJUGATE, quat)
    # The file's columns, one a row: t, step, then node by node x, y, z, then node by node w, x, y, z.
    columns = np.concatenate(
        [
            np.rint(t[None] * T_SCALE),
            step[None].astype(np.float64),
            np.rint(pos.reshape(count, 3 * width).T / POS_UNIT),
            np.rint(quat.reshape(count, 4 * width).T * QUAT_SCALE),
        ],
    ).astype(np.int64)
    return rest.astype(np.int64).tolist(), _encode(columns)


def doubled(*arrays: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], ...]:
    """Each of a recorder's frame arrays with room for twice its frames (the kept ones first, the rest not
    yet written): one copy a doubling, so a frame costs no copy of those before it."""
    return tuple(np.resize(array, (2 * len(array), *array.shape[1:])) for array in arrays)


def _check_frames(
    t: npt.NDArray[np.float64],
    pos: npt.NDArray[np.float64],
    quat: npt.NDArray[np.float64],
    *,
    first: int = 0,
) -> None:
    """Every frame's poses and time on the file's grids, a bad one named by its number in the file (the
    batch's own first frame is `first`)."""
    for name, values, limit, rule in (
        ("pos", pos, POS_LIMIT, f"finite metres within ±{POS_LIMIT:g}"),
        ("quat", quat, QUAT_LIMIT, "a unit quaternion (parts within ±1)"),
        ("t", t, T_LIMIT, f"finite seconds within ±{T_LIMIT:g}"),
    ):
        if values.size and -limit <= values.min() and values.max() <= limit:
            continue  # the common case in two reductions (a NaN fails both comparisons)
        fits = (np.abs(values) <= limit).all(axis=tuple(range(1, values.ndim)))
        if not fits.all():
            frame = int(np.flatnonzero(~fits)[0])
            raise ValueError(f"{name}: {rule}, not {values[frame].tolist()} (frame {first + frame})")


def read(source: str | Path | bytes) -> Replay:
    """A `.seqreplay` read back, from a path or its bytes. NotAReplay when it is not one, or is cut short."""
    raw = source if isinstance(source, bytes) else Path(source).read_bytes()
    try:
        body = gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise NotAReplay(f"not a gzip stream: {exc}") from None
    if not body.startswith(MAGIC):
        raise NotAReplay(f"no {MAGIC!r} at its start: not a .seqreplay of version {VERSION}")
    end = body.find(b"\n", len(MAGIC))
    if end < 0:
        raise NotAReplay("its header line is not ended")
    try:
        header = json.loads(body[len(MAGIC) : end])
        nodes = [str(n) for n in header["nodes"]]
        parents = _parents(header["parents"], len(nodes))
        rest = np.asarray(header["rest"], dtype=np.float64).reshape(len(nodes), 4)
        count = int(header["frames"])
        engine = str(header["engine"])
        units = float(header["t_scale"]), float(header["pos_unit"]), float(header["quat_unit"])
    except (ValueError, KeyError, TypeError) as exc:
        raise NotAReplay(f"its header is not the JSON this format says: {exc}") from None
    width = len(nodes)
    columns = _decode(body[end + 1 :], count, 2 + 7 * width)
    pos = columns[:, 2 : 2 + 3 * width].reshape(count, width, 3) * units[1]
    quat = columns[:, 2 + 3 * width :].reshape(count, width, 4) * units[2]
    quat = _multiply(_normalised(rest * units[2])[None], quat)
    pos, quat = _composed(pos, quat, parents)
    sha = header.get("scene_sha256")
    return Replay(
        engine=engine,
        scene_sha256=str(sha) if sha is not None else None,
        nodes=nodes,
        parents=parents,
        t=columns[:, 0] / units[0],  # a division: 12500 / 1e6 is 0.0125, where 12500 × 1e-6 is not
        step=columns[:, 1].astype(np.int32),
        pos=pos.astype(np.float32),
        quat=quat.astype(np.float32),
        looks=[(int(f), str(n), dict(c)) for f, n, c in header.get("looks", [])],
        meta=dict(header.get("meta") or {}),
    )


def _encode(columns: npt.NDArray[np.int64]) -> bytes:
    """int64[M, F] counts (a column of frames a row) as the file keeps them: row by row, second differences
    zigzagged, LEB128. Most numbers take one byte (a still or steadily moving part): every number's first
    byte is written at once, and only the few longer ones go on to their next bytes."""
    residuals = columns.copy()
    residuals[:, 1:] -= columns[:, :-1]
    residuals[:, 2:] -= columns[:, 1:-1] - columns[:, :-2]
    zigzag = ((residuals << 1) ^ (residuals >> 63)).view(np.uint64).ravel()
    longer = np.flatnonzero(zigzag > 0x7F)
    sizes = np.ones(len(zigzag), dtype=np.int64)
    rest = zigzag[longer] >> np.uint64(7)  # the longer numbers' bits past their first byte
    extra = np.zeros(len(longer), dtype=np.int64)
    while True:
        more = rest > 0
        if not more.any():
            break
        extra += more
        rest >>= np.uint64(7)
    sizes[longer] += extra
    starts = np.cumsum(sizes) - sizes
    out = np.empty(int(starts[-1] + sizes[-1]) if len(sizes) else 0, dtype=np.uint8)
    out[starts] = (zigzag & np.uint64(0x7F)).astype(np.uint8)
    out[starts[longer]] |= 0x80
    # The longer numbers' later bytes, a byte place at a time over those still going.
    values, at, left = zigzag[longer] >> np.uint64(7), starts[longer] + 1, extra
    while len(values):
        out[at] = (values & np.uint64(0x7F)).astype(np.uint8) | np.where(left > 1, 0x80, 0).astype(np.uint8)
        going = left > 1
        values, at, left = values[going] >> np.uint64(7), at[going] + 1, left[going] - 1
    return out.tobytes()


def _decode(data: bytes, frames: int, width: int) -> npt.NDArray[np.float64]:
    """float64[F, M] counts back from the varints (NotAReplay when there are not F × M of them, exactly)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if not len(raw) and frames * width == 0:
        return np.zeros((frames, width))
    last = raw < 0x80  # a number's last byte
    if frames * width != int(last.sum()) or not last[-1]:
        raise NotAReplay(f"{int(last.sum())} numbers after the header where {frames * width} are due")
    number = np.concatenate([[0], np.cumsum(last)[:-1]]).astype(np.intp)
    first = np.concatenate([[0], np.flatnonzero(last)[:-1] + 1]).astype(np.intp)
    place = np.arange(len(raw)) - first[number]
    if place.max() > 9:
        raise NotAReplay("a number longer than ten bytes")
    zigzag = np.zeros(frames * width, dtype=np.uint64)
    np.add.at(zigzag, number, (raw & 0x7F).astype(np.uint64) << (7 * place).astype(np.uint64))
    residuals = (zigzag >> np.uint64(1)).astype(np.int64) ^ -(zigzag & np.uint64(1)).astype(np.int64)
    residuals = residuals.reshape(width, frames).T
    # Two running sums undo the second difference: the first gives each frame's step from the one before.
    steps = residuals.copy()
    steps[1:] = np.cumsum(residuals[1:], axis=0)
    return np.cumsum(steps, axis=0).astype(np.float64)


def _parents(parents: Sequence[int] | None, count: int) -> list[int]:
    """Each node's parent index (-1: the world), checked: as many as nodes, each before its child."""
    if parents is None:
        return [-1] * count
    kept = [int(p) for p in parents]
    if len(kept) != count or not all(-1 <= p < i for i, p in enumerate(kept)):
        raise ValueError(f"parents: one a node, -1 or a node before it, not {list(parents)!r}")
    return kept


def _relative(
    pos: npt.NDArray[np.float64], quat: npt.NDArray[np.float64], parents: list[int]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """World poses [F, N, ...] as the file keeps them: each node with a parent in its parent's frame.

    Every node's parent is read in the world, as recorded, so all nodes are done at once, written out
    component by component: an episode's close is a few hundred small arrays, where numpy's per-call cost
    is what counts (this costs a fifth of composing `_rotate` and `_multiply` node by node)."""
    frames = len(pos)
    # A node without a parent is read against the world: an identity pose put last, where index -1 reads.
    world_pos = np.concatenate([pos, np.zeros((frames, 1, 3))], axis=1)
    world_quat = np.concatenate([quat, np.tile([1.0, 0.0, 0.0, 0.0], (frames, 1, 1))], axis=1)
    up, d = world_quat[:, parents], pos - world_pos[:, parents]
    # The parent's inverse turn: w, and -x, -y, -z as the vector part u.
    w, ux, uy, uz = up[..., 0], -up[..., 1], -up[..., 2], -up[..., 3]
    dx, dy, dz = d[..., 0], d[..., 1], d[..., 2]
    # v' = v + w t + u × t, t = 2 u × v: the inverse turn of the offset to the node.
    tx, ty, tz = 2 * (uy * dz - uz * dy), 2 * (uz * dx - ux * dz), 2 * (ux * dy - uy * dx)
    local_pos = np.empty_like(pos)
    local_pos[..., 0] = dx + w * tx + uy * tz - uz * ty
    local_pos[..., 1] = dy + w * ty + uz * tx - ux * tz
    local_pos[..., 2] = dz + w * tz + ux * ty - uy * tx
    bw, bx, by, bz = quat[..., 0], quat[..., 1], quat[..., 2], quat[..., 3]
    local_quat = np.empty_like(quat)
    local_quat[..., 0] = w * bw - ux * bx - uy * by - uz * bz
    local_quat[..., 1] = w * bx + ux * bw + uy * bz - uz * by
    local_quat[..., 2] = w * by - ux * bz + uy * bw + uz * bx
    local_quat[..., 3] = w * bz + ux * by - uy * bx + uz * bw
    return local_pos, local_quat


def _composed(
    pos: npt.NDArray[np.float64], quat: npt.NDArray[np.float64], parents: list[int]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The file's poses [F, N, ...] back in the world, parents first; quaternions normalised."""
    for node, parent in enumerate(parents):
        if parent >= 0:
            pos[:, node] = pos[:, parent] + _rotate(quat[:, parent], pos[:, node])
            quat[:, node] = _multiply(quat[:, parent], quat[:, node])
        quat[:, node] = _normalised(quat[:, node])
    return pos, quat


def _normalised(quat: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Quaternions [..., 4] of length 1: the squares summed in w, x, y, z order, one IEEE operation at a time,
    as the browser's reader does, so both read the same float32s."""
    w, x, y, z = np.moveaxis(quat, -1, 0)
    norm = np.sqrt(w * w + x * x + y * y + z * z)[..., None]
    return quat / np.where(norm > 0, norm, 1.0)


def _continuous(quat: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each node's quaternions [F, N, 4] signed so none flips from the frame before (q and -q turn alike)."""
    if len(quat) < 2:
        return quat
    flips = (quat[1:] * quat[:-1]).sum(axis=-1) < 0
    sign = np.concatenate([np.ones((1, quat.shape[1])), np.cumprod(np.where(flips, -1.0, 1.0), axis=0)])
    signed: npt.NDArray[np.float64] = quat * sign[..., None]
    return signed


_CONJUGATE = np.array([1.0, -1.0, -1.0, -1.0])


def _multiply(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Hamilton products of quaternions [..., 4] (w x y z)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = aw * bw - ax * bx - ay * by - az * bz
    out[..., 1] = aw * bx + ax * bw + ay * bz - az * by
    out[..., 2] = aw * by - ax * bz + ay * bw + az * bx
    out[..., 3] = aw * bz + ax * by - ay * bx + az * bw
    return out


def _rotate(quat: npt.NDArray[np.float64], vector: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Vectors [..., 3] turned by unit quaternions [..., 4]: q v conj(q)."""
    pure = np.concatenate([np.zeros((*vector.shape[:-1], 1)), vector], axis=-1)
    return _multiply(_multiply(quat, pure), quat * _CONJUGATE)[..., 1:]


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
