import seq

TASKS = {
    "left": "move the point to the target on the left",
    "right": "move the point to the target on the right",
}


@seq.benchmark(name="reach-bench", gpu="cpu", cpu=2, memory=4, tasks=TASKS, seeds=range(4), max_seconds=3.0)
class ReachBench:
    def __init__(self, noise: float = 0.0):
        self.noise = noise
        self.targets = {"left": -0.5, "right": 0.5}

    @seq.reset
    def reset(self, task, seed):
        self.x, self.target, self.t = 0.01 * seed, self.targets[task], 0
        return {"x": self.x, "target": self.target}

    @seq.step
    def step(self, action):
        self.x += float(action[0]) + self.noise
        self.t += 1
        distance = abs(self.x - self.target)
        reached = distance < 0.05
        return {"x": self.x, "target": self.target}, reached, reached, {"distance": distance}
