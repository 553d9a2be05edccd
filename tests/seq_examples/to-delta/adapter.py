import sys

import seq


@seq.adapter(name="to-delta", pairs=[("reach-bench", "delta-policy")])
class ToDelta:
    """reach-bench's {x, target} -> delta-policy's {state, target}; its {delta} -> one action, [dx]."""

    def __init__(self, *, scale: float = 1.0, refuse_left: bool = False):
        self.scale = scale
        self.refuse_left = refuse_left

    @seq.observation
    def to_policy(self, obs):
        if self.refuse_left and obs["target"] < 0:
            raise ValueError("this adapter does not go left")
        print(f"to-delta sends state {obs['x']:.3f}", file=sys.stderr)
        return {"state": obs["x"], "target": obs["target"]}

    @seq.action
    def to_env(self, answer):
        return [[answer["delta"][0] * self.scale]]
