"""Run an evaluation: resolve it, expand it into episodes, play them on an executor, collect the results."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from yardstick.engine.executors import Executor, InProcessExecutor
from yardstick.engine.plan import plan_episodes
from yardstick.engine.pool import PoolExecutor
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.runtime import Work, specs_of
from yardstick.sdk.specs import BenchmarkSpec, PolicySpec


@dataclass(frozen=True)
class RunRequest:
    """What a user asks for. `workers` 0 plays in this process; None, one worker process per core."""

    work: Work
    tasks: Sequence[str] | None = None
    trials: int | None = None
    seeds: Sequence[int] | None = None
    workers: int | None = None
    # A Ray cluster to play on (`auto`, or its head's HOST:PORT); None plays on this machine.
    ray_address: str | None = None


@dataclass
class RunOutcome:
    request: RunRequest
    benchmark: BenchmarkSpec
    policy: PolicySpec
    planned: list[EpisodeSpec]
    results: list[EpisodeResult] = field(default_factory=list)
    executor: str = ""
    workers: int = 0
    cold_starts: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False

    @property
    def complete(self) -> bool:
        return (
            not self.interrupted
            and len(self.results) == len(self.planned)
            and all(r.finished for r in self.results)
        )


def prepare(request: RunRequest) -> tuple[BenchmarkSpec, PolicySpec, list[EpisodeSpec]]:
    """Everything about a run that can be refused, refused before anything is built or started."""
    benchmark, policy = specs_of(request.work)
    episodes = plan_episodes(benchmark, tasks=request.tasks, trials=request.trials, seeds=request.seeds)
    return benchmark, policy, episodes


def executor_for(workers: int | None, ray_address: str | None = None) -> Executor:
    if ray_address is not None:
        from yardstick.engine.ray_executor import RayExecutor  # Ray only for a run that uses it

        return RayExecutor(ray_address, workers)
    return InProcessExecutor() if workers == 0 else PoolExecutor(workers)


def evaluate(
    request: RunRequest,
    *,
    executor: Executor | None = None,
    on_result: Callable[[EpisodeResult], None] | None = None,
    episodes: Sequence[EpisodeSpec] | None = None,
) -> RunOutcome:
    """Play the run, or only `episodes` of its plan (a round of a sequential eval). Ctrl-C stops it
    cleanly: the outcome says `interrupted` and holds what finished."""
    benchmark, policy, planned = prepare(request)
    if episodes is None:
        episodes = planned
    elif not set(episodes) <= set(planned):
        raise ValueError("a round's episodes must come from the run's own plan")
    episodes = list(episodes)
    chosen = executor or executor_for(request.workers, request.ray_address)
    outcome = RunOutcome(
        request=request,
        benchmark=benchmark,
        policy=policy,
        planned=episodes,
        executor=chosen.name,
        workers=min(chosen.workers, len(episodes)),
    )
    started = time.perf_counter()
    try:
        for result in chosen.run(request.work, episodes):
            outcome.results.append(result)
            if on_result is not None:
                on_result(result)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        outcome.wall_s = time.perf_counter() - started
        outcome.cold_starts = list(chosen.cold_starts)
        outcome.results.sort(key=lambda r: r.index)
    return outcome
