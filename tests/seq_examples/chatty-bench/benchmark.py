import os
import sys

import seq

TASKS = {"near": "reach the target nearby", "far": "reach a target past where a second takes it"}
TARGETS = {"near": 0.3, "far": 5.0}


@seq.benchmark(
    name="chatty-bench",
    gpu="cpu",
    tasks=TASKS,
    seeds=range(2),
    max_seconds=1.0,
    secrets=[seq.Secret.from_name("chatty")],
)
class Chatty:
    """Prints on both streams as it plays, once with its secret in the line."""

    @seq.reset
    def reset(self, task, seed):
        print(f"bench stdout: reset {task} seed {seed}")
        print(f"bench stderr: token {os.environ.get('CHATTY_TOKEN')}", file=sys.stderr)
        self.x, self.target = 0.0, TARGETS[task]
        return {"x": self.x, "target": self.target}

    @seq.step
    def step(self, action):
        self.x += float(action[0])
        done = abs(self.x - self.target) < 0.05
        return {"x": self.x, "target": self.target}, done, done
