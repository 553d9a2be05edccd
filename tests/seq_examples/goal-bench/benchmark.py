import json

import seq

GOALS = seq.Volume.from_name("reach-goals")
TASKS = {
    "near": "move the point to the near goal the assets place",
    "far": "move the point to the far goal the assets place",
}


@seq.benchmark(name="goal-bench", gpu="cpu", tasks=TASKS, seeds=range(2), max_seconds=3.0, assets=GOALS)
class GoalBench:
    """Its goals are not in its code: reset reads them from its assets volume, mounted read-only."""

    @seq.reset
    def reset(self, task, seed):
        goals = json.loads((GOALS.path / "goals" / "goals.json").read_text())
        self.x, self.target = 0.01 * seed, float(goals[task])
        return {"x": self.x, "target": self.target}

    @seq.step
    def step(self, action):
        self.x += float(action[0])
        distance = abs(self.x - self.target)
        reached = distance < 0.05
        return {"x": self.x, "target": self.target}, reached, reached, {"goal": self.target}
