"""The episode loop, its executors, and running an evaluation end to end."""

from yardstick.engine.loop import Playback
from yardstick.engine.results import EpisodeResult, EpisodeSpec, Timing
from yardstick.engine.run import RunOutcome, RunRequest, evaluate, prepare
from yardstick.engine.runtime import BuildError, Component, Work

__all__ = [
    "BuildError",
    "Component",
    "EpisodeResult",
    "EpisodeSpec",
    "Playback",
    "RunOutcome",
    "RunRequest",
    "Timing",
    "Work",
    "evaluate",
    "prepare",
]
