import numpy as np
import seq


@seq.policy(name="franka-reach", gpu="cpu", hz=15, action_chunk_valid_len=1, action_chunk_replan_at=1)
class FrankaReach(seq.Policy):
    """Moves a Franka's joints toward the goal its observation names, a bounded step a period, hand open."""

    @seq.infer
    def infer(self, obs, *, seed=None, gain: float = 0.5):
        joints = np.asarray(obs["joints"], dtype=np.float64)
        goal = np.asarray(obs["goal"], dtype=np.float64)
        step = np.clip(gain * (goal - joints), -0.05, 0.05)
        return np.concatenate([joints + step, [0.0]])[None, :].astype(np.float32)
