import json
import struct

import seq

TASKS = {"left": "move the pointer to the left", "right": "move the pointer to the right"}


def scene_glb() -> bytes:
    """A glTF binary of one node, `pointer`, under `seq_root` (a quarter turn about x: Z up made Y up)."""
    gltf = {
        "asset": {"version": "2.0"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [
            {"name": "seq_root", "rotation": [-0.7071068, 0, 0, 0.7071068], "children": [1]},
            {"name": "pointer"},
        ],
    }
    text = json.dumps(gltf, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 4)
    return (
        struct.pack("<4sII", b"glTF", 2, 12 + 8 + len(text))
        + struct.pack("<II", len(text), 0x4E4F534A)
        + text
    )


@seq.benchmark(
    name="own-bench", gpu="cpu", tasks=TASKS, seeds=range(2), max_seconds=3.0, replay=seq.Replay(engine="own")
)
class OwnBench:
    """Hands its replay over itself: the scene at each reset, a frame after the reset and after every step."""

    @seq.reset
    def reset(self, task, seed):
        self.x, self.target, self.steps = 0.01 * seed, {"left": -0.5, "right": 0.5}[task], 0
        seq.replay.scene(0, scene_glb())
        self._frame(None)
        return {"x": self.x, "target": self.target}

    @seq.step
    def step(self, action):
        self.x += float(action[0])
        self.steps += 1
        reached = abs(self.x - self.target) < 0.05
        self._frame({"pointer": {"rgba": [0, 1, 0, 1]}} if reached else None)
        return {"x": self.x, "target": self.target}, reached, reached

    def _frame(self, looks):
        seq.replay.frame(0, self.steps / 10, ["pointer"], [[self.x, 0.0, 0.1]], [[1, 0, 0, 0]], looks=looks)
