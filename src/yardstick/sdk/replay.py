"""A benchmark that hands over its own 3D replay (`replay={"engine": "own"}`): `scene` once an episode,
`frame` after its reset and after every step.

Both go to the receiver a run installs while it plays and records replays (`engine.replay_own`); with none
installed (a run that records none, a test, a script) they do nothing, so the same benchmark code runs
everywhere. The Sequences SDK's `seq.replay.scene` / `seq.replay.frame` are these calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# What a run installs (`engine.replay_own.HandedReplays`): an object with this module's two calls as
# methods, `scene(slot, glb)` and `frame(slot, t, nodes, pos, quat, *, step, looks)`.
_receiver: Any = None


def install(receiver: Any) -> Any:
    """Send `scene` and `frame` to `receiver` (None: nowhere); the one installed before, to put back."""
    global _receiver
    before, _receiver = _receiver, receiver
    return before


def scene(slot: int, glb: bytes) -> None:
    """The scene of the episode now starting in `slot` (the world's index; any number for a benchmark of one
    world): a glTF binary whose nodes are flat children of a root `seq_root` (Z-up turned Y-up), each named as
    `frame` names it. Given once an episode; the run keeps one copy of the same bytes."""
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
    """The scene in `slot` now: `t` seconds since its reset, `pos` [N, 3] metres in the world (Z up) and
    `quat` [N, 4] (w x y z) of the N `nodes`, the same names every frame of an episode; `step` the steps done
    (by default, the frames handed before this one in the episode); `looks` what changes a node's look from
    this frame on, {node: {"rgba": [r, g, b, a]}} or {node: {"visible": False}}."""
    if _receiver is not None:
        _receiver.frame(int(slot), t, list(nodes), pos, quat, step=step, looks=dict(looks) if looks else None)
