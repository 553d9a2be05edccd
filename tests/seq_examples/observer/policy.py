import seq


@seq.policy(name="observer", gpu="cpu", hz=30, action_chunk_valid_len=1, action_chunk_replan_at=1)
class Observer(seq.Policy):
    """Keeps every observation its robot makes (`@seq.observe`) and answers what it kept: how many, the sum of
    their `x`, and the step of the newest."""

    @seq.observe
    def observe(self, obs, *, step=None, episode=None):
        episode.state.setdefault("seen", []).append((step, float(obs["x"])))

    @seq.infer
    def infer(self, *, episode=None):
        seen = episode.state.get("seen", [])
        return [[float(len(seen)), sum(x for _, x in seen), float(seen[-1][0])]]
