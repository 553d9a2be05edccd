"""Triangle meshes of a simulator's primitive shapes, in the shape's own frame (MuJoCo's conventions: a
cylinder or capsule along z, sizes as half extents). Each returns (positions [V, 3], normals [V, 3],
indices [3K]); edges that are sharp (a box's, a cylinder's rims) get their vertices twice, so per-vertex
normals shade them flat where they should be.

The resolution (`SEGMENTS` around, `RINGS` from pole to pole) is what a browser draws at 60 frames a second
for a few hundred shapes, and close enough to MuJoCo's own that a silhouette differs by a pixel at most."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

SEGMENTS = 24
RINGS = 12

Mesh = tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.uint32]]


def box(hx: float, hy: float, hz: float) -> Mesh:
    positions: list[object] = []
    normals: list[object] = []
    indices: list[int] = []
    for axis in range(3):
        for sign in (1.0, -1.0):
            normal = np.zeros(3)
            normal[axis] = sign
            u, v = np.roll(np.eye(3), 1, axis=0)[axis], np.roll(np.eye(3), 2, axis=0)[axis]
            base = len(positions)
            for a, b in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                positions.append((normal + a * u + b * v) * (hx, hy, hz))
                normals.append(normal)
            indices += [base, base + 1, base + 2, base, base + 2, base + 3]
    return _mesh(positions, normals, indices)


def plane(hx: float, hy: float) -> Mesh:
    positions = [(-hx, -hy, 0.0), (hx, -hy, 0.0), (hx, hy, 0.0), (-hx, hy, 0.0)]
    return _mesh(positions, [(0.0, 0.0, 1.0)] * 4, [0, 1, 2, 0, 2, 3])


def ellipsoid(rx: float, ry: float, rz: float) -> Mesh:
    unit = _sphere_rings(RINGS)
    positions = unit * (rx, ry, rz)
    normals = unit / np.maximum((rx, ry, rz), 1e-12) ** 2
    return _mesh(positions, _unit(normals), _grid(RINGS + 1, SEGMENTS + 1))


def sphere(radius: float) -> Mesh:
    return ellipsoid(radius, radius, radius)


def capsule(radius: float, half_length: float) -> Mesh:
    """Two half spheres joined by a cylinder: the sphere's rings, the upper half lifted by the half length and
    the lower half lowered (its equator ring twice, once in each half, makes the side)."""
    rings = RINGS if RINGS % 2 == 0 else RINGS + 1
    unit = _sphere_rings(rings).reshape(rings + 1, SEGMENTS + 1, 3)
    half = rings // 2
    upper, lower = unit[: half + 1], unit[half:]
    grid = np.concatenate([upper, lower]).reshape(-1, 3)
    offset = np.concatenate(
        [
            np.full((half + 1) * (SEGMENTS + 1), half_length),
            np.full((rings - half + 1) * (SEGMENTS + 1), -half_length),
        ]
    )
    positions = grid * radius
    positions[:, 2] += offset
    return _mesh(positions, grid, _grid(rings + 2, SEGMENTS + 1))


def cylinder(radius: float, half_height: float) -> Mesh:
    angles = np.linspace(0.0, 2 * np.pi, SEGMENTS + 1)
    ring = np.stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)], axis=1)
    side = np.concatenate([ring * radius + (0, 0, half_height), ring * radius - (0, 0, half_height)])
    side_normals = np.concatenate([ring, ring])
    positions, normals = [side], [side_normals]
    indices = [_grid(2, SEGMENTS + 1)]
    for sign in (1.0, -1.0):
        base = sum(len(p) for p in positions)
        cap = np.concatenate([[(0.0, 0.0, sign * half_height)], ring * radius + (0, 0, sign * half_height)])
        positions.append(cap)
        normals.append(np.tile((0.0, 0.0, sign), (len(cap), 1)))
        fan = [(base, base + 1 + i, base + 2 + i) for i in range(SEGMENTS)]
        indices.append(np.asarray(fan, dtype=np.int64).ravel())
    return _mesh(np.concatenate(positions), np.concatenate(normals), np.concatenate(indices))


def _sphere_rings(rings: int) -> npt.NDArray[np.float64]:
    """Unit sphere points, ring by ring from the north pole: (rings + 1) × (SEGMENTS + 1) rows."""
    theta = np.linspace(0.0, np.pi, rings + 1)[:, None]
    phi = np.linspace(0.0, 2 * np.pi, SEGMENTS + 1)[None, :]
    points = np.stack(
        [np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta) * np.ones_like(phi)], axis=-1
    )
    return points.reshape(-1, 3)


def _grid(rows: int, columns: int) -> npt.NDArray[np.int64]:
    """Two triangles for each cell of a rows × columns grid of vertices laid out row by row."""
    r, c = np.meshgrid(np.arange(rows - 1), np.arange(columns - 1), indexing="ij")
    a = (r * columns + c).ravel()
    b, d = a + columns, a + 1
    return np.stack([a, b, d, d, b, b + 1], axis=1).ravel()


def _unit(vectors: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    lengths = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(lengths > 0, lengths, 1.0)


def _mesh(positions: object, normals: object, indices: object) -> Mesh:
    return (
        np.asarray(positions, dtype=np.float32).reshape(-1, 3),
        np.asarray(normals, dtype=np.float32).reshape(-1, 3),
        np.asarray(indices, dtype=np.uint32).ravel(),
    )
