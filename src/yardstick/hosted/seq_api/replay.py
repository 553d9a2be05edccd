"""`seq.replay`: how a benchmark whose simulation has no replay adapter hands over its 3D replay itself.

As the Sequences SDK documents for any run off its platform, both calls do nothing unless a receiver is
installed, so the same benchmark code runs everywhere. Yardstick installs none yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_receiver: Any = None


def _install(receiver: Any) -> None:
    """Where `scene` and `frame` go (None: nowhere)."""
    global _receiver
    _receiver = receiver


def scene(slot: int, glb: bytes) -> None:
    """The scene of the episode starting in `slot`: a glTF binary (given once an episode)."""
    if _receiver is not None:
        _receiver.scene(int(slot), bytes(glb))


def frame(
    slot: int,
    t: float,
    nodes: Sequence[str],
    pos: Any,
    quat: Any,
    step: int | None = None,
    looks: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """The scene in `slot` `t` seconds after its reset: each node's position and orientation."""
    if _receiver is not None:
        _receiver.frame(int(slot), t, list(nodes), pos, quat, step=step, looks=dict(looks) if looks else None)


__all__ = ["frame", "scene"]
