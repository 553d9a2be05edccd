"""Helpers for the simulator benchmarks' tests: where a world point lands in a MuJoCo camera's image, and a
policy whose every action depends on what it observed (so two episodes that diverge anywhere differ in
their actions from then on)."""

from __future__ import annotations

from typing import Any

import numpy as np

import yardstick as ys


def project(
    model: Any, data: Any, camera: str, point: np.ndarray, height: int, width: int
) -> tuple[float, float]:
    """The (row, column) at which MuJoCo's camera `camera` sees the world point `point`, in an upright image
    (row 0 at the top): the pinhole model with the camera's vertical field of view."""
    import mujoco

    cam = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    rotation = data.cam_xmat[cam].reshape(3, 3)  # columns: the camera's x (right), y (up), z (backwards)
    local = rotation.T @ (np.asarray(point) - data.cam_xpos[cam])
    focal = (height / 2) / np.tan(np.radians(model.cam_fovy[cam]) / 2)
    column = width / 2 + focal * local[0] / -local[2]
    row = height / 2 - focal * local[1] / -local[2]
    return float(row), float(column)


def red_centre(image: np.ndarray) -> tuple[float, float]:
    """The mean (row, column) of the image's strongly red pixels."""
    pixels = image.astype(np.int16)
    red = (
        (pixels[..., 0] > 120)
        & (pixels[..., 0] - pixels[..., 1] > 100)
        & (pixels[..., 0] - pixels[..., 2] > 100)
    )
    assert red.sum() > 5, "nothing red in the image"
    rows, columns = np.nonzero(red)
    return float(rows.mean()), float(columns.mean())


class _Feedback:
    """Each action a smooth function of the observed state, within the action space."""

    @ys.infer
    def act(self, obs: Any, *, episode: ys.Episode) -> np.ndarray:
        assert episode.action_space is not None
        low, high = (np.asarray(bound, dtype=np.float64) for bound in episode.action_space)
        state = np.asarray(obs["state"], dtype=np.float64)
        phase = np.arange(len(low)) + float(state.sum()) * 7.0
        return (low + (high - low) * (0.5 + 0.4 * np.sin(phase)))[None, :]


@ys.policy(hz=20)
class FeedbackAt20Hz(_Feedback):
    pass


@ys.policy(hz=10)
class FeedbackAt10Hz(_Feedback):
    pass


@ys.policy(hz=50)
class FeedbackAt50Hz:
    """ALOHA's action is joint targets: each a small step from where the joints are, as the state says (a
    jump across a joint's range makes its physics blow up)."""

    @ys.infer
    def act(self, obs: Any) -> np.ndarray:
        state = np.asarray(obs["state"], dtype=np.float64)
        return (state + 0.05 * np.sin(np.arange(len(state)) + float(state.sum()) * 7.0))[None, :]
