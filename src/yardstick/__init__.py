"""Yardstick: evaluate robot policies on benchmarks.

Authoring lives at the top level, so a benchmark or policy file needs one import:

    import yardstick as ys

    @ys.policy(hz=20)
    class Mine:
        @ys.infer
        def act(self, obs): ...
"""

import os
from typing import TYPE_CHECKING, Any

# gRPC (the grpc wire, positronic-wire) restarts its threads in every forked child by default; a child forked
# to exec a box (its preexec step) then hangs on a lock one of them holds, for ever (seen in the suite). We
# fork only to exec, so its fork handlers are off unless the user says otherwise. Read when grpc is imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    # The SDK (and numpy under it) is imported on first use, so `yardstick --version` and a process that
    # needs only a submodule start without it.
    if name in __all__ and name != "__version__":
        from yardstick import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module 'yardstick' has no attribute {name!r}")
