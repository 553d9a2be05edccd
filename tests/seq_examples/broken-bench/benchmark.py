import seq


@seq.benchmark(name="broken-bench", gpu="cpu", tasks={"only": "never starts"}, seeds=[0], max_seconds=1.0)
class BrokenBench:
    @seq.reset
    def reset(self, task, seed):
        raise FileNotFoundError("scenes/kitchen.xml")

    @seq.step
    def step(self, action):
        return {}, True, True
