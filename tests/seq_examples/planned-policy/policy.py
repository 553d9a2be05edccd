import seq


@seq.policy(name="planned", gpu="cpu", hz=30, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Planned(seq.Policy):
    """Answers what its planner wrote for this robot, as a policy reads a plan: how many plans it was handed,
    and the newest's `goal` and `x` (-1 before the first)."""

    @seq.infer
    def infer(self, obs, *, episode=None):
        plans = episode.state.get("seq.plans") or []
        newest = plans[-1]["value"] if plans else {"goal": -1.0, "x": -1.0}
        return [[float(len(plans)), float(newest["goal"]), float(newest["x"])]]
