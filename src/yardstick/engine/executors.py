"""Where episodes run. An executor takes a run's work and its episodes and yields each result as its
episode ends, in any order; the caller sorts. Keep this interface small: the platform's workers and a Ray
executor plug in behind it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import Runtime, Work


class Executor(Protocol):
    name: str
    workers: int
    # Seconds each process took to build its benchmark and policy, as they report it.
    cold_starts: list[float]

    def run(self, work: Work, episodes: Sequence[EpisodeSpec]) -> Iterator[EpisodeResult]: ...

    def close(self) -> None:
        """Let go of what it kept between runs (a kept executor's processes); most keep nothing."""


class InProcessExecutor:
    """Everything in this process, one episode after another: the simplest to debug and to profile."""

    name = "in-process"
    workers = 1

    def __init__(self) -> None:
        self.cold_starts: list[float] = []

    def close(self) -> None:
        """Nothing is kept between runs."""

    def run(self, work: Work, episodes: Sequence[EpisodeSpec]) -> Iterator[EpisodeResult]:
        runtime = Runtime(work)
        self.cold_starts.append(runtime.cold_start_s)
        try:
            yield from runtime.run(episodes)
        finally:
            runtime.close()
