import sys

import seq


@seq.policy(name="chatty-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1)
class ChattyPolicy(seq.Policy):
    """Says so when an episode starts, on both streams."""

    @seq.reset
    def reset(self):
        print("policy stdout: a new episode")
        print("policy stderr: a new episode", file=sys.stderr)

    @seq.infer
    def infer(self, obs, *, gain: float = 1.0):
        return [[gain * max(-0.1, min(0.1, obs["target"] - obs["x"]))]]
