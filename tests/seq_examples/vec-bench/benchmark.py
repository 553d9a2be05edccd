import seq

GOALS = {"a": 3, "b/1": 5}


@seq.benchmark(
    name="vec-bench",
    gpu="cpu",
    tasks={"a": "count to three", "b/1": "count to five"},
    seeds=[3, 5, 7],
    max_seconds={"a": 2.0, "b/1": 4.0},
    init={"worlds": "{num_worlds}", "hz": "{policy.hz}"},
)
class VecBench:
    def __init__(self, worlds, hz=10.0):
        self.n = worlds
        self.t = [0] * worlds
        self.goal = [0] * worlds

    @seq.reset
    def reset(self, worlds, tasks, seeds):
        for w, task in zip(worlds, tasks, strict=True):
            self.t[w], self.goal[w] = 0, GOALS[task]
        return [{"t": 0} for _ in worlds]

    @seq.step
    @seq.concurrent(sizes=[4])
    def step(self, worlds, actions):
        out = []
        for w in worlds:
            self.t[w] += 1
            done = self.t[w] >= self.goal[w]
            out.append(({"t": self.t[w]}, done, done))
        return out
