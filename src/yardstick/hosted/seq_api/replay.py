"""`seq.replay`: how a benchmark whose simulation has no replay adapter hands over its 3D replay itself
(`seq.Replay(engine="own")`).

As the Sequences SDK documents, both calls do nothing unless a receiver is installed, so the same benchmark
code runs everywhere. They are `yardstick.sdk.replay`'s: a run that records replays installs its receiver
there (`engine.replay_own`), in a box as anywhere else.
"""

from __future__ import annotations

from typing import Any

from yardstick.sdk import replay as _replay
from yardstick.sdk.replay import frame, scene


def _install(receiver: Any) -> None:
    """Where `scene` and `frame` go (None: nowhere): the SDK's own name for it."""
    _replay.install(receiver)


__all__ = ["frame", "scene"]
