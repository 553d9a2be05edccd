"""What a policy is told about the episode it is acting in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Episode:
    """One episode as the policy sees it.

    `inferences` counts the answers given so far in this episode (0 on the first request); `state` is the
    policy's own, empty at the episode's start, and the same dict on every request after — so a batched
    policy keeps one memory per episode without tracking ids itself.
    """

    id: str
    task: str
    description: str
    seed: int
    trial: int
    action_space: tuple[list[float], list[float]] | None = None
    inferences: int = 0
    # The episode's step (from 0) at which the observation the policy is asked with was made.
    step: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    # The session settings this episode runs with: the policy's declared defaults, with what a remote
    # session asked for laid over them.
    params: dict[str, Any] = field(default_factory=dict)
