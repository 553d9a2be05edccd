import json
from pathlib import Path

import seq


@seq.policy(
    name="weighted-policy",
    gpu="cpu",
    hz=10,
    action_chunk_valid_len=1,
    action_chunk_replan_at=1,
    weights="vol://reach-ckpt",
    init={"checkpoint": "{weights}"},
)
class WeightedPolicy(seq.Policy):
    """What it does is in its weights, not its code: the constructor reads them from the folder the platform
    mounted them at."""

    def __init__(self, checkpoint):
        learned = json.loads((Path(checkpoint) / "policy.json").read_text())
        self.sign, self.most = float(learned["sign"]), float(learned["most"])

    @seq.infer
    def infer(self, obs, *, seed=None):
        step = max(-self.most, min(self.most, self.sign * (obs["target"] - obs["x"])))
        return [[step]]
