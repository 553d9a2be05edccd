"""Yardstick: evaluate robot policies on benchmarks.

Authoring lives at the top level, so a benchmark or policy file needs one import:

    import yardstick as ys

    @ys.policy(hz=20)
    class Mine:
        @ys.infer
        def act(self, obs): ...
"""

from yardstick.sdk import (
    Episode,
    benchmark,
    concurrent,
    config,
    infer,
    on_episode,
    on_episode_end,
    policy,
    reset,
    step,
    timed,
)

__version__ = "0.1.0"

__all__ = [
    "Episode",
    "__version__",
    "benchmark",
    "concurrent",
    "config",
    "infer",
    "on_episode",
    "on_episode_end",
    "policy",
    "reset",
    "step",
    "timed",
]
