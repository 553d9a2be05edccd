"""A policy that acts uniformly at random: the floor any policy should beat."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from yardstick.sdk.decorators import infer, policy
from yardstick.sdk.episode import Episode


@policy(hz=80, action_chunk_len=1)
class RandomPolicy:
    """Draws each action uniformly from the benchmark's action space (`episode.action_space`) when it
    declares one, else from `dim` numbers in [low, high]. Draws come from the seed the engine hands each
    request, so a rerun replays the same actions."""

    def __init__(self, dim: int = 4, low: float = -1.0, high: float = 1.0) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim: an action is at least 1 number, not {dim!r}")
        for field, value in (("low", low), ("high", high)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{field}: a bound is a finite number, not {value!r}")
        if low > high:
            raise ValueError(f"low: the range [low, high] needs low <= high, not [{low}, {high}]")
        self.dim = dim
        self.low = float(low)
        self.high = float(high)

    @infer
    def act(self, obs: Any, *, episode: Episode, seed: int) -> npt.NDArray[np.float32]:
        """A chunk of one row, shape (1, dim)."""
        if episode.action_space is not None:
            low = np.asarray(episode.action_space[0], dtype=np.float64)
            high = np.asarray(episode.action_space[1], dtype=np.float64)
        else:
            low = np.full(self.dim, self.low)
            high = np.full(self.dim, self.high)
        action = np.random.default_rng(seed).uniform(low, high)
        # uniform draws from [low, high); float32 rounding could reach just past high, so clip back in.
        return np.clip(action.astype(np.float32), low.astype(np.float32), high.astype(np.float32))[None, :]


# The random policy at the rate of each built-in benchmark that plays at one rate only: `-p random` on such a
# benchmark names one of these (the benchmark's BUILTIN_POLICIES say which).
@policy(hz=20, action_chunk_len=1)
class RandomAt20Hz(RandomPolicy):
    """RandomPolicy at 20 Hz: LIBERO's control rate."""


@policy(hz=10, action_chunk_len=1)
class RandomAt10Hz(RandomPolicy):
    """RandomPolicy at 10 Hz: PushT's control rate."""


@policy(hz=50, action_chunk_len=1)
class RandomAt50Hz(RandomPolicy):
    """RandomPolicy at 50 Hz: ALOHA's control rate."""
