"""Silhouettes of a replay frame against MuJoCo's own render of the same state, from one camera.

`replay_mask` draws a frame the way a viewer would, from the scene's .glb and the frame's poses alone (a tiny
numpy rasteriser: triangles filled, no shading); `mujoco_mask` asks MuJoCo's segmentation render which
pixels show the geoms of the bodies asked for, the others hidden. Both use the GL camera MuJoCo computes for
a free camera, so a replay that places its nodes right covers the same pixels, up to the edges of
tessellation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from yardstick.replay3d.gltf import accessor_array, unpack
from yardstick.replay3d.mujoco_scene import rigid_roots, rotation_matrix

_HIDDEN = 5  # a geom group MuJoCo's default options do not draw


def free_camera(lookat: tuple[float, float, float], distance: float, azimuth: float, elevation: float) -> Any:
    import mujoco

    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.lookat[:] = lookat
    camera.distance, camera.azimuth, camera.elevation = distance, azimuth, elevation
    return camera


def mujoco_mask(
    renderer: Any, model: Any, data: Any, camera: Any, bodies: np.ndarray
) -> tuple[np.ndarray, Any]:
    """(pixels showing a geom drawn in the node of one of `bodies`, the GL camera used) from MuJoCo's
    segmentation render."""
    roots = rigid_roots(model)
    static = ~np.isin(roots[model.geom_bodyid], bodies)
    groups = model.geom_group.copy()
    model.geom_group[static] = _HIDDEN
    try:
        renderer.enable_segmentation_rendering()
        renderer.update_scene(data, camera=camera)
        labels = renderer.render()
        # The scene holds the two eyes of a stereo pair, ipd apart; a mono image is drawn from their mean.
        eyes = renderer.scene.camera
        view: dict[str, Any] = {
            k: (np.array(getattr(eyes[0], k)) + getattr(eyes[1], k)) / 2 for k in ("pos", "forward", "up")
        }
        view.update(
            {
                k: float(getattr(eyes[0], k))
                for k in ("frustum_near", "frustum_top", "frustum_bottom", "frustum_center")
            }
        )
    finally:
        renderer.disable_segmentation_rendering()
        model.geom_group[:] = groups
    return labels[:, :, 0] >= 0, view


def replay_mask(
    glb: bytes, poses: dict[str, tuple[np.ndarray, np.ndarray]], view: dict[str, Any], height: int, width: int
) -> np.ndarray:
    """The pixels a frame's nodes named in `poses` ({node: (pos, quat w x y z)}, Z-up world) cover."""
    document, binary = unpack(glb)
    mask = np.zeros((height, width), dtype=bool)
    forward, up = view["forward"], view["up"]
    right = np.cross(forward, up)
    top, bottom, near = view["frustum_top"], view["frustum_bottom"], view["frustum_near"]
    half_width = (top - bottom) / 2 * width / height
    rows, cols = np.mgrid[0:height, 0:width]
    centres = np.stack([cols.ravel() + 0.5, rows.ravel() + 0.5], axis=1)
    for node in document["nodes"][1:]:
        if node["name"] not in poses or "mesh" not in node:
            continue
        pos, quat = poses[node["name"]]
        rotation = rotation_matrix(quat)
        for primitive in document["meshes"][node["mesh"]]["primitives"]:
            local = accessor_array(document, binary, primitive["attributes"]["POSITION"]).astype(np.float64)
            world = local @ rotation.T + pos
            eye = world - view["pos"]
            depth = eye @ forward
            x = near * (eye @ right) / np.maximum(depth, 1e-9)
            y = near * (eye @ up) / np.maximum(depth, 1e-9)
            screen = np.stack(
                [
                    (x - view["frustum_center"] + half_width) / (2 * half_width) * width,
                    (top - y) / (top - bottom) * height,
                ],
                axis=1,
            )
            indices = accessor_array(document, binary, primitive["indices"]).reshape(-1, 3)
            for triangle in indices:
                if (depth[triangle] <= near).any():
                    continue
                _fill(mask, screen[triangle], centres, width, height)
    return mask


def _fill(mask: np.ndarray, corners: np.ndarray, centres: np.ndarray, width: int, height: int) -> None:
    low = np.floor(corners.min(axis=0)).astype(int)
    high = np.ceil(corners.max(axis=0)).astype(int)
    c0, c1 = max(low[0], 0), min(high[0], width)
    r0, r1 = max(low[1], 0), min(high[1], height)
    if c0 >= c1 or r0 >= r1:
        return
    rr, cc = np.mgrid[r0:r1, c0:c1]
    px, py = cc + 0.5, rr + 0.5
    (ax, ay), (bx, by), (qx, qy) = corners
    area = (bx - ax) * (qy - ay) - (by - ay) * (qx - ax)
    if abs(area) < 1e-12:
        return
    w0 = ((bx - px) * (qy - py) - (by - py) * (qx - px)) / area
    w1 = ((qx - px) * (ay - py) - (qy - py) * (ax - px)) / area
    w2 = 1 - w0 - w1
    inside = (w0 >= 0) & (w1 >= 0) & (w2 >= 0)
    mask[r0:r1, c0:c1] |= inside


def iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0
