"""What a policy is told about the episode it is acting in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

# A class attribute, true on a policy that takes each observation a robot makes (the Sequences SDK's
# `@seq.observe`): its server advertises it, and a client that holds more observations than it asks with
# (a robot's on the act plane) sends them all (`Episode.earlier`).
OBSERVES_EACH: Final = "__yardstick_observes_each__"


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
    # (step, observation) of those made since the last answer, before the one asked with, in order: a
    # robot observes faster than it acts; a policy that observes each is handed them first. Empty in evals.
    earlier: list[tuple[int, Any]] = field(default_factory=list)
    # The observation asked with was handed before (a robot that acts again with nothing new observed): a
    # policy that observes each does not observe it twice.
    again: bool = False

    @property
    def steps(self) -> int:
        """How many answers of this episode came before this one: the Sequences SDK's `Episode.steps` (an
        answer counts once however many control steps it plays as)."""
        return self.inferences
