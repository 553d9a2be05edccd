"""A plain Gymnasium environment as a benchmark: CartPole, balanced for ten seconds (its 500 steps).

Start here to bring any Gymnasium environment: change ENV_ID, what a task means and when an episode
succeeds. `seq deploy .` registers it; `seq eval run <policy> --benchmark gym-benchmark` plays it.
Observations: `state` (the environment's observation, as a list of numbers); an action is the
environment's own (CartPole: [0] pushes left, [1] right).
"""

import seq

ENV_ID = "CartPole-v1"
TASKS = {"balance": "keep the pole upright for ten seconds by pushing the cart left or right"}


@seq.benchmark(name="gym-benchmark", gpu="cpu", tasks=TASKS, seeds=range(20), max_seconds=12.0)
class GymBenchmark:
    def __init__(self):
        # Imported here, where it runs: the platform has Gymnasium installed, your machine need not.
        import gymnasium

        self.env = gymnasium.make(ENV_ID)

    @seq.reset
    def reset(self, task, seed):
        obs, _ = self.env.reset(seed=int(seed))
        return {"state": [float(x) for x in obs]}

    @seq.step
    def step(self, action):
        obs, _, terminated, truncated, _ = self.env.step(int(action[0]))
        # Success is lasting until the environment's own time limit without the pole falling.
        return {"state": [float(x) for x in obs]}, terminated or truncated, truncated and not terminated
