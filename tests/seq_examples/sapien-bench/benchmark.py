import seq

TASKS = {"left": "move the pointer to the left", "right": "move the pointer to the right"}


@seq.benchmark(
    name="sapien-bench",
    gpu="cpu",
    tasks=TASKS,
    seeds=range(2),
    max_seconds=3.0,
    replay=seq.Replay(engine="sapien", state="scene"),
)
class SapienBench:
    """Declares a SAPIEN replay as the contract says. SAPIEN is not installed here: the pointer is plain
    Python, and `scene` is never asked for (Yardstick does not read SAPIEN)."""

    def scene(self):
        raise AssertionError("Yardstick reads no SAPIEN scene")

    @seq.reset
    def reset(self, task, seed):
        self.x, self.target = 0.01 * seed, {"left": -0.5, "right": 0.5}[task]
        return {"x": self.x, "target": self.target}

    @seq.step
    def step(self, action):
        self.x += float(action[0])
        reached = abs(self.x - self.target) < 0.05
        return {"x": self.x, "target": self.target}, reached, reached
