import seq


@seq.policy(name="delta-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class DeltaPolicy(seq.Policy):
    """Reads {state, target} and answers {delta}: not the I/O of reach-bench, whose observation is {x, target}
    and whose step plays [dx]."""

    @seq.infer
    def infer(self, obs, *, seed=None):
        print(f"delta-policy asked at state {obs['state']:.3f}")
        return {"delta": [max(-0.1, min(0.1, obs["target"] - obs["state"]))]}
