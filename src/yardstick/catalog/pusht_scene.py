"""PushT's 3D replay, handed over by the benchmark itself (`replay={"engine": "own"}`): PushT is 2D (pymunk),
so its scene is its shapes laid flat, and a frame the block's and the agent's poses on the board.

The board's pixels are millimetres (512 px: a 0.512 m board, x and y as gym-pusht's state has them, Z up).
The scene (built once a process, the same bytes every time) holds the board, the goal's T drawn flat where
gym-pusht fixes it, and two moving nodes: `block`, the T as a 30 mm-thick slab in its own frame (the state's
block x, y at its origin, turned by the block's angle about Z), and `agent`, a disc of the agent's radius.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from yardstick.replay3d import shapes
from yardstick.replay3d.gltf import Material, Node, Primitive, glb

PIXEL = 0.001  # metres a board pixel is drawn
NODES = ["block", "agent"]
_BLOCK_HEIGHT = 0.03
_GOAL_HEIGHT = 0.001


@functools.cache
def scene_glb() -> bytes:
    """The scene's glTF binary: board, goal, block and agent (see above)."""
    from yardstick.catalog.pusht import AGENT_RADIUS, BOARD, GOAL

    materials = [
        Material(name="board", rgba=(0.93, 0.93, 0.9, 1.0)),
        Material(name="goal", rgba=(0.45, 0.85, 0.45, 1.0)),
        Material(name="block", rgba=(0.47, 0.53, 0.6, 1.0)),
        Material(name="agent", rgba=(0.25, 0.41, 0.88, 1.0)),
    ]
    half = BOARD * PIXEL / 2
    board = _primitive(shapes.box(half, half, 0.005), (half, half, -0.005), 0)
    goal = [_primitive(mesh, at, 1) for mesh, at in _tee(_GOAL_HEIGHT)]
    nodes = [
        Node(name="board", primitives=[board]),
        Node(
            name="goal",
            translation=(GOAL[0] * PIXEL, GOAL[1] * PIXEL, 0.0),
            rotation=_turn(float(GOAL[2])),
            primitives=goal,
        ),
        Node(name="block", primitives=[_primitive(mesh, at, 2) for mesh, at in _tee(_BLOCK_HEIGHT)]),
        Node(
            name="agent",
            primitives=[_primitive(shapes.cylinder(AGENT_RADIUS * PIXEL, 0.01), (0.0, 0.0, 0.01), 3)],
        ),
    ]
    return glb(nodes, materials)


def poses(state: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The block's and the agent's poses (pos [2, 3] metres, quat [2, 4]) from PushT's state
    (agent x, y, block x, y, block angle)."""
    agent_x, agent_y, block_x, block_y, angle = (float(v) for v in np.asarray(state)[:5])
    pos = np.array([[block_x * PIXEL, block_y * PIXEL, 0.0], [agent_x * PIXEL, agent_y * PIXEL, 0.0]])
    quat = np.array([_turn(angle), (1.0, 0.0, 0.0, 0.0)])
    return pos, quat


def _tee(height: float) -> list[tuple[Any, tuple[float, float, float]]]:
    """The T as two boxes in the block's frame (the bar, y 0-30 px, and the stem, y 30-120 px), each with the
    place of its centre: gym-pusht's `add_tee` at scale 30."""
    bar = shapes.box(60 * PIXEL, 15 * PIXEL, height / 2), (0.0, 15 * PIXEL, height / 2)
    stem = shapes.box(15 * PIXEL, 45 * PIXEL, height / 2), (0.0, 75 * PIXEL, height / 2)
    return [bar, stem]


def _primitive(mesh: Any, at: tuple[float, float, float], material: int) -> Primitive:
    positions, normals, indices = mesh
    return Primitive(
        positions=(positions + np.asarray(at, dtype=np.float32)).astype(np.float32),
        normals=normals,
        indices=indices,
        material=material,
    )


def _turn(angle: float) -> tuple[float, float, float, float]:
    """The quaternion (w x y z) of a turn by `angle` about Z."""
    return (math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2))
