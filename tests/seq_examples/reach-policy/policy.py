import seq


@seq.policy(name="reach-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class ReachPolicy(seq.Policy):
    @seq.infer
    def infer(self, obs, *, seed=None, gain: float = 1.0):
        step = max(-0.1, min(0.1, gain * (obs["target"] - obs["x"])))
        return [[step]]
