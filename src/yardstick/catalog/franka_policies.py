"""Two scripted policies for a single-arm Franka (`sim_franka.SimulatedFranka`, or a real one): what the rig's
demo serves, so a blind sample has two policies that move the arm differently. Neither looks at the cameras:
each reads the arm's joints (`obs["state"]["joints"]`) and answers joint targets and a gripper command."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

import yardstick.sdk as ys

# DROID's reset pose (`StartPose.droid_reset`): the arm leaning over the table in front of it.
OVER_THE_TABLE = np.array([0.0, -math.pi / 5, 0.0, -4 * math.pi / 5, 0.0, 3 * math.pi / 5, 0.0])
CHUNK = 8


@ys.policy(hz=15, action_chunk_len=CHUNK)
class LeanOver:
    """Eases every joint a fifth of the way to the pose over the table each step, then closes the hand."""

    @ys.infer
    def act(self, obs: dict[str, Any]) -> npt.NDArray[np.float64]:
        joints = np.asarray(obs["state"]["joints"], dtype=np.float64)
        rows = []
        for _ in range(CHUNK):
            joints = joints + 0.2 * (OVER_THE_TABLE - joints)
            near = float(np.max(np.abs(OVER_THE_TABLE - joints))) < 0.05
            rows.append(np.append(joints, 1.0 if near else 0.0))
        return np.stack(rows)


@ys.policy(hz=15, action_chunk_len=CHUNK)
class Sway:
    """Swings the base joint side to side around where the arm stands, the hand open."""

    @ys.on_episode
    def begin(self, episode: ys.Episode) -> None:
        episode.state["step"] = 0

    @ys.infer
    def act(self, obs: dict[str, Any], *, episode: ys.Episode, seed: int) -> npt.NDArray[np.float64]:
        joints = np.asarray(obs["state"]["joints"], dtype=np.float64)
        rows = []
        for _ in range(CHUNK):
            step = episode.state["step"] = episode.state["step"] + 1
            target = joints.copy()
            target[0] = 0.4 * math.sin(step / 15.0)
            rows.append(np.append(target, 0.0))
        return np.stack(rows)
