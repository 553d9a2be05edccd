"""Evals that grow in rounds until a stopping rule says enough: one policy until its rates are narrow or its
gates decided, or two policies on the same trials until one is better.

The plan is the fixed-n eval's at `max_trials` a task; each round plays the next trials of the tasks still
open, so the episodes played are always a prefix of that plan's trials, seed for seed: a stopped eval is a
subset of the full one. The rule looks only between rounds, and is fed each round's outcomes in trial order,
never in the order episodes finish (a failing episode that runs to its limit finishes last; counting by
finish time would count successes first and break the rule's guarantee).

An episode that fails to play (an error, not a failure of the task) ends the eval after its round: a
decision must not rest on episodes that did not play.

On a Ray cluster a policy's actors are built at the first round and kept until the last (`kept_executors`),
each policy's on its share of the cluster; the pool and the in-process engine start afresh each round, as
their start-up is a fraction of a second's.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from yardstick.engine.executors import Executor
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.run import RunOutcome, RunRequest, evaluate, prepare
from yardstick.scoring.compare import PairedTest
from yardstick.scoring.sequential import SequentialEval, checkpoints

OnResult = Callable[[EpisodeResult], None]


def planned_at_cap(request: RunRequest, max_trials: int) -> list[EpisodeSpec]:
    """The fixed-n plan a sequential eval takes its prefix of (refusals included, before anything runs)."""
    return prepare(dataclasses.replace(request, trials=max_trials))[2]


@contextlib.contextmanager
def kept_executors(requests: Sequence[RunRequest]) -> Iterator[list[Executor | None]]:
    """For each request, the executor its rounds share: a kept Ray executor for a run on a cluster (the
    requests on one cluster splitting its CPUs), None for the others (each round its own). Every kept one
    is closed on the way out, the last made first (the first may have connected this process)."""
    from yardstick.engine.ray_executor import RayExecutor  # a module-level import of Ray's own is lazy

    on_ray = sum(1 for r in requests if r.ray_address is not None)
    kept: list[Executor | None] = [
        RayExecutor(r.ray_address, r.workers, kept=True, share=on_ray) if r.ray_address is not None else None
        for r in requests
    ]
    try:
        yield kept
    finally:
        for executor in reversed(kept):
            if executor is not None:
                executor.close()


def evaluate_until(
    request: RunRequest, rule: SequentialEval, max_trials: int, *, on_result: OnResult | None = None
) -> RunOutcome:
    """Play rounds of the tasks `rule` holds open, up to `max_trials` each."""
    request = dataclasses.replace(request, trials=max_trials)
    by_task = _by_task(planned_at_cap(request, max_trials))
    total: RunOutcome | None = None
    played = 0
    with kept_executors([request]) as (executor,):
        for end in checkpoints(max_trials):
            batch = [e for task, trials in by_task.items() if rule.is_open(task) for e in trials[played:end]]
            played = end
            if not batch:
                break
            outcome = evaluate(request, executor=executor, on_result=on_result, episodes=batch)
            total = _merged(total, outcome)
            for result in _in_trial_order(outcome.results):
                rule.observe(result.task, 1.0 if result.success else 0.0)
            rule.look()
            if outcome.interrupted or any(not r.finished for r in outcome.results):
                break
    assert total is not None  # the first round always plays: every task starts open
    return total


@dataclass
class Compared:
    a: RunOutcome
    b: RunOutcome
    test: PairedTest


def compare_until(
    a: RunRequest,
    b: RunRequest,
    test: PairedTest,
    max_trials: int,
    *,
    until_decided: bool = True,
    on_result: OnResult | None = None,
) -> Compared:
    """Both policies on the same trials, round by round, fed to `test` pair by pair in trial order, until it
    decides (or, with `until_decided` false, through all `max_trials`)."""
    a, b = (dataclasses.replace(r, trials=max_trials) for r in (a, b))
    plan = planned_at_cap(a, max_trials)
    if [(e.task, e.trial, e.seed) for e in plan] != [
        (e.task, e.trial, e.seed) for e in planned_at_cap(b, max_trials)
    ]:
        raise ValueError("the two policies' plans differ: they must play one benchmark's same trials")
    by_task = _by_task(plan)
    outcomes: dict[str, RunOutcome | None] = {"a": None, "b": None}
    played = 0
    with kept_executors([a, b]) as executors:
        for end in checkpoints(max_trials) if until_decided else [max_trials]:
            if test.decided:
                break
            batch = [e for trials in by_task.values() for e in trials[played:end]]
            played = end
            rounds = {
                name: evaluate(request, executor=executor, on_result=on_result, episodes=batch)
                for name, request, executor in (("a", a, executors[0]), ("b", b, executors[1]))
            }
            for name, outcome in rounds.items():
                outcomes[name] = _merged(outcomes[name], outcome)
            success = {
                name: {(r.task, r.trial): r.success for r in outcome.results if r.finished}
                for name, outcome in rounds.items()
            }
            for episode in _in_trial_order(batch):
                key = (episode.task, episode.trial)
                if key in success["a"] and key in success["b"]:
                    test.add(success["a"][key], success["b"][key])
            if any(o.interrupted or any(not r.finished for r in o.results) for o in rounds.values()):
                break
    first, second = outcomes["a"], outcomes["b"]
    assert first is not None and second is not None
    return Compared(first, second, test)


def _by_task(plan: Sequence[EpisodeSpec]) -> dict[str, list[EpisodeSpec]]:
    by_task: dict[str, list[EpisodeSpec]] = {}
    for episode in plan:
        by_task.setdefault(episode.task, []).append(episode)
    return by_task


Played = TypeVar("Played", EpisodeResult, EpisodeSpec)


def _in_trial_order(items: Sequence[Played]) -> list[Played]:
    """Trial by trial, tasks in their planned order within a trial (the plan numbers tasks in order)."""
    return sorted(items, key=lambda item: (item.trial, item.index))


def _merged(total: RunOutcome | None, round_: RunOutcome) -> RunOutcome:
    """One outcome of the whole eval from its rounds: what was planned is what was played."""
    if total is None:
        return round_
    return dataclasses.replace(
        total,
        planned=sorted([*total.planned, *round_.planned], key=lambda e: e.index),
        results=sorted([*total.results, *round_.results], key=lambda r: r.index),
        workers=max(total.workers, round_.workers),
        cold_starts=[*total.cold_starts, *round_.cold_starts],
        wall_s=total.wall_s + round_.wall_s,
        interrupted=total.interrupted or round_.interrupted,
    )
