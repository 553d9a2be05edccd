"""Expand a run's choice of tasks and trials into the episodes to play."""

from __future__ import annotations

from collections.abc import Sequence

from yardstick.engine.results import EpisodeSpec
from yardstick.sdk.errors import SpecError
from yardstick.sdk.specs import BenchmarkSpec
from yardstick.sdk.suggest import did_you_mean


def seed_of_trial(seeds: Sequence[int], trial: int) -> tuple[int, bool]:
    """The seed trial k of a task runs, `seeds[k % len(seeds)]` (every seed once before any twice), and
    whether it repeats one an earlier trial ran."""
    return seeds[trial % len(seeds)], trial >= len(seeds)


def plan_episodes(
    spec: BenchmarkSpec,
    *,
    tasks: Sequence[str] | None = None,
    trials: int | None = None,
    seeds: Sequence[int] | None = None,
) -> list[EpisodeSpec]:
    """Trial k of each task runs seeds[k % len(seeds)]: every seed once before any twice. `seeds` narrows the
    benchmark's own (each must be one of them); `trials` defaults to one per seed. Episodes are numbered
    task by task, trial by trial, in the order the tasks are given."""
    chosen_tasks = list(tasks) if tasks else list(spec.tasks)
    unknown = [t for t in chosen_tasks if t not in spec.tasks]
    if unknown:
        raise SpecError(
            "run",
            "tasks",
            f"{', '.join(map(repr, unknown))} is not a task of {spec.name}"
            f"{did_you_mean(unknown[0], spec.tasks)} (it has {', '.join(spec.tasks)})",
        )
    if len(set(chosen_tasks)) != len(chosen_tasks):
        raise SpecError("run", "tasks", "names each task once")
    chosen_seeds = list(seeds) if seeds else list(spec.seeds)
    if seeds:
        foreign = [s for s in chosen_seeds if s not in spec.seeds]
        if foreign:
            raise SpecError(
                "run",
                "seeds",
                f"{foreign} are not seeds of {spec.name}: a run picks among its "
                f"{len(spec.seeds)} seeds ({_span(spec.seeds)})",
            )
        if len(set(chosen_seeds)) != len(chosen_seeds):
            raise SpecError("run", "seeds", "names each seed once")
    count = len(chosen_seeds) if trials is None else trials
    if count < 1:
        raise SpecError("run", "trials", f"at least 1 trial a task, not {count}")
    episodes: list[EpisodeSpec] = []
    for task in chosen_tasks:
        for trial in range(count):
            seed, repeat = seed_of_trial(chosen_seeds, trial)
            episodes.append(
                EpisodeSpec(index=len(episodes), task=task, trial=trial, seed=seed, repeat=repeat)
            )
    return episodes


def _span(seeds: Sequence[int]) -> str:
    ordered = list(seeds)
    if ordered == list(range(ordered[0], ordered[0] + len(ordered))):
        return f"{ordered[0]}..{ordered[-1]}"
    return ", ".join(map(str, ordered[:8])) + (", ..." if len(ordered) > 8 else "")
