"""A policy for Yardstick's Meta-World benchmarks (metaworld.mt10, metaworld.mt50): Meta-World's own
scripted expert for the episode's task, one action a step at Meta-World's 80 Hz.

Start here for a policy of your own: replace what `infer` answers with your model's actions (load it in
`__init__`, from `init=` or a weights volume). `seq deploy .` deploys it; `seq eval run metaworld-policy
--benchmark metaworld.mt10 --tasks reach-v3 --trials 5` evaluates it. Observations: `state` (39 floats:
the hand, the gripper, the objects, the goal), `prompt` (the task's description); an action is 4 numbers
in [-1, 1] (the hand's motion and the gripper).
"""

import seq


@seq.policy(name="metaworld-policy", gpu="cpu", hz=80, action_chunk_valid_len=1, action_chunk_replan_at=1)
class MetaWorldPolicy(seq.Policy):
    @seq.reset
    def reset(self):
        self.expert = None

    @seq.infer
    def infer(self, obs, *, episode=None):
        if self.expert is None:
            # Imported here, where it runs: the platform has Meta-World installed, your machine need not.
            from metaworld.policies import ENV_POLICY_MAP

            self.expert = ENV_POLICY_MAP[episode.task]()
        return [[float(x) for x in self.expert.get_action(obs["state"])]]
