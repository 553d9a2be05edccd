"""A policy for a container: it reads the observation and answers a chunk of actions, as any Yardstick
policy does; the image serves it on TCP 8000 as the published contract asks."""

import numpy as np
import yardstick.sdk as ys


@ys.policy(hz=10, action_chunk_len=1)
class ReachPolicy:
    @ys.infer
    def infer(self, obs, *, episode: ys.Episode):
        # One row as wide as the benchmark's actions (4 on Meta-World): the engine refuses any other width.
        low, _high = episode.action_space or ([0.0] * 4, [0.0] * 4)
        return np.zeros((1, len(low)), dtype=np.float32)
