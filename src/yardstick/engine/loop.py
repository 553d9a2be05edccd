"""The episode loop, on a virtual robot clock.

Every world is a slot holding one episode. A step is 1/hz seconds of robot time. A chunk's rows are
timed from the step its request was sent at: row i plays at step sent + i. By default the world waits
while the policy thinks (the answer arrives at the step it was asked); with `Playback.charge_inference`
the answer arrives `ceil(latency × hz)` steps later and the previous chunk plays on meanwhile, holding its
last row if it runs out, as a robot's controller does; the stale head of the new chunk is skipped. The
policy is asked again `action_chunk_exec_len` steps after the last request (never before its answer
arrived). A policy that prefetches (`PolicySpec.prefetch`, the Sequences contract's playback) is asked
`action_chunk_exec_len` steps into the chunk playing, and its answer's row 0 plays once that chunk's valid
rows (at most `action_chunk_len`) have played; it is asked again `action_chunk_exec_len` steps into the
new chunk. With exec_len equal to the chunk's rows that is the same playback as without. An episode
ends when the benchmark says done, or when max_seconds of robot time have passed (the task's own or the
limit the run set in its place, or the run's cap on the episode where that is tighter).

A run that records (`Recording`) gives each episode an EpisodeRecorder at its reset: the reset's
observation is frame 0, every step adds the action played and the new observation, and the episode's end
(finished or failed) closes it. Off, recording costs a step one `is None` test a world.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.guard import (
    BENCHMARK_RESET,
    BENCHMARK_STEP,
    POLICY_INFER,
    POLICY_ON_EPISODE,
    CallFailed,
    Guard,
    describe,
)
from yardstick.engine.recording import EpisodeRecorder, Recording
from yardstick.engine.replay_own import HandedReplays
from yardstick.engine.results import EpisodeResult, EpisodeSpec, Timing, Truncation
from yardstick.engine.worlds import Worlds
from yardstick.sdk import timing as bench_timing
from yardstick.sdk.calls import PolicyDriver, inference_seed
from yardstick.sdk.episode import Episode
from yardstick.sdk.specs import BenchmarkSpec


@dataclass(frozen=True)
class Playback:
    """How inference time meets the robot's clock. `charge_inference` off: the world pauses while the
    policy thinks. On: the robot moves on; the delay is `latency_ms` when given (reproducible), else the
    measured time of each call."""

    charge_inference: bool = False
    latency_ms: float | None = None


@dataclass(eq=False, slots=True)  # slots: its fields are read and written several times a step
class _Slot:
    spec: EpisodeSpec
    episode: Episode
    max_steps: int
    limit: Truncation  # which limit `max_steps` is: the task's, or the run's cap
    started: float
    obs: Any = None
    step: int = 0
    chunk: Any = None  # the rows being played
    chunk_len: int = 0
    chunk_sent: int = 0  # the step its request was sent at
    pending: Any = None  # an answer on its way, with pending_len, arriving at step `arrival`
    pending_len: int = 0
    pending_sent: int = 0
    arrival: int = 0
    next_request: int = 0
    done: bool = False
    success: bool = False
    metrics: Any = None
    timing: Timing = field(default_factory=Timing)
    recorder: EpisodeRecorder | None = None


class Rebuild(Exception):
    """The benchmark failed in a way that may have broken its worlds: build them again before going on."""


def max_steps(limit_s: float, hz: float) -> int:
    # The tolerance keeps 6.25 s at 80 Hz at 500 steps whatever the float rounding.
    return max(1, math.floor(limit_s * hz + 1e-9))


def play(
    episodes: Iterable[EpisodeSpec],
    worlds: Worlds,
    policy: PolicyDriver,
    spec: BenchmarkSpec,
    guard: Guard,
    playback: Playback = Playback(),
    recording: Recording | None = None,
) -> Iterator[EpisodeResult]:
    """Play `episodes` on `worlds`, yielding each result as its episode ends. Raises Rebuild (after
    yielding the failed episodes) when the benchmark failed: the caller builds new worlds and calls again
    with the rest of the same iterator. With `recording`, each episode is recorded as it plays."""
    slots: list[_Slot | None] = [None] * worlds.size
    recording = recording if recording is not None and recording.active else None
    # A benchmark that hands its replay over itself hands it to a receiver installed while it plays.
    owns = spec.replay is not None and spec.replay.engine == "own"
    wanted = recording is not None and recording.replay and owns
    handed = HandedReplays(worlds.size, policy.spec.hz) if wanted else None
    try:
        with handed if handed is not None else contextlib.nullcontext():
            yield from _play(slots, episodes, worlds, policy, spec, guard, playback, recording, handed)
    finally:
        # Left before their episodes ended (the caller stopped): finish their files all the same.
        for slot in slots:
            if slot is not None and slot.recorder is not None:
                slot.recorder.close()
                slot.recorder = None


def _play(
    slots: list[_Slot | None],
    episodes: Iterable[EpisodeSpec],
    worlds: Worlds,
    policy: PolicyDriver,
    spec: BenchmarkSpec,
    guard: Guard,
    playback: Playback,
    recording: Recording | None,
    handed: HandedReplays | None,
) -> Iterator[EpisodeResult]:
    pspec = policy.spec
    hz = pspec.hz
    replan = pspec.replan_every
    valid_rows = pspec.action_chunk_len
    width = len(spec.action_space[0]) if spec.action_space else None
    prefetch = pspec.prefetch
    fixed_delay = (
        math.ceil(playback.latency_ms / 1000 * hz - 1e-9)
        if playback.charge_inference and playback.latency_ms is not None
        else None
    )
    source = iter(episodes)
    exhausted = False
    clock = time.perf_counter

    while True:
        # Fill free worlds with the next episodes. (`None in slots` first: most steps find no world free.)
        free = [i for i, slot in enumerate(slots) if slot is None] if None in slots else []
        if free and not exhausted:
            fresh: list[EpisodeSpec] = []
            for _ in free:
                nxt = next(source, None)
                if nxt is None:
                    exhausted = True
                    break
                fresh.append(nxt)
            if fresh:
                yield from _begin(
                    fresh, free[: len(fresh)], slots, worlds, policy, spec, guard, hz, recording, handed
                )
        active = [(i, slot) for i, slot in enumerate(slots) if slot is not None]
        if not active:
            if exhausted:
                return
            continue  # the episodes just begun all failed to start: the next ones take their worlds
        tick = clock()
        for _, slot in active:
            if slot.pending is not None and slot.step >= slot.arrival:
                _take_pending(slot)

        # Ask the policy for every world whose chunk is due.
        due = [slot for _, slot in active if slot.pending is None and slot.step >= slot.next_request]
        policy_s = 0.0
        if due:
            answered: list[tuple[_Slot, Any, int]] = []
            t0 = clock()
            for asked in _calls(due, policy.asks_together):
                try:
                    answers = _ask(asked, policy, guard, valid_rows, width)
                except CallFailed as failure:
                    answers = _each_alone(asked, failure, policy, guard, valid_rows, width)
                for slot, chunk, rows in answers:
                    if isinstance(chunk, CallFailed):
                        yield _end(slots, slot, policy, chunk)
                    else:
                        answered.append((slot, chunk, rows))
            policy_s = clock() - t0
            # The worlds whose own call failed have ended; the others play on.
            active = [(i, slot) for i, slot in active if slots[i] is slot]
            if not active:
                continue
            delay = (
                fixed_delay
                if fixed_delay is not None
                else (math.ceil(policy_s * hz - 1e-9) if playback.charge_inference else 0)
            )
            share = policy_s / len(due)
            for slot, chunk, rows in answered:
                slot.timing.policy += share
                slot.episode.inferences += 1
                # The first answer of an episode finds the robot at rest: nothing plays while it comes.
                wait = delay if slot.chunk is not None else 0
                starts = slot.step
                if prefetch and slot.chunk is not None:
                    # Asked ahead: its rows play once the chunk playing has played all of its own.
                    starts = max(starts, slot.chunk_sent + slot.chunk_len)
                slot.pending, slot.pending_len, slot.pending_sent = chunk, rows, starts
                slot.arrival = max(starts, slot.step + wait)
                slot.next_request = max(starts + min(replan, rows), slot.arrival)

        # Each world plays the row its clock has reached.
        slots_now: list[int] = []
        actions: list[Any] = []
        for index, slot in active:
            if slot.pending is not None and slot.step >= slot.arrival:
                _take_pending(slot)
            row = slot.step - slot.chunk_sent
            actions.append(slot.chunk[row if row < slot.chunk_len else slot.chunk_len - 1])
            slots_now.append(index)
        t0 = clock()
        try:
            outcomes = guard.call(BENCHMARK_STEP, worlds.step, slots_now, actions)
        except CallFailed as failure:
            bench_timing.drain("rendering")
            for _, slot in active:
                yield _end(slots, slot, policy, failure)
            raise Rebuild(failure.reason) from None
        step_s = clock() - t0
        render_s = bench_timing.drain("rendering")
        # Shares of this step's costs; what the clock saw beyond them is the engine's own. Counted before
        # any episode ends, so a result is complete when it is yielded.
        count = len(active)
        overhead = (clock() - tick - policy_s - step_s) / count
        for _, slot in active:
            slot.timing.simulation += (step_s - render_s) / count
            slot.timing.rendering += render_s / count
            slot.timing.overhead += overhead
        for (_, slot), outcome, action in zip(active, outcomes, actions, strict=True):
            try:
                slot.obs, slot.done, slot.success, slot.metrics = _unpack(outcome)
            except CallFailed as failure:
                yield _end(slots, slot, policy, failure)
                continue
            slot.step += 1
            if slot.recorder is not None:
                _record(slot, slot.recorder, action, hz)
            if slot.done or slot.step >= slot.max_steps:
                yield _end(slots, slot, policy, None)


def _calls(due: list[_Slot], together: bool) -> list[list[_Slot]]:
    """The calls that answer the worlds due: one for all of them for a driver that asks them together, else
    one a world, so a policy that raises or hangs on one world's observation fails that world's episode
    alone."""
    return [due] if together else [[slot] for slot in due]


def _ask(
    asked: list[_Slot], policy: PolicyDriver, guard: Guard, valid_rows: int, width: int | None
) -> list[tuple[_Slot, Any, int]]:
    """One guarded call of the policy for `asked`: each world with its chunk and how many rows may play, or
    with the failure of its own answer (its rows 0) where the driver failed it alone."""
    seeds = [inference_seed(s.spec.seed, s.episode.inferences) for s in asked] if policy.wants_seed else []
    for slot in asked:
        slot.episode.step = slot.step
    chunks = guard.call(POLICY_INFER, policy.infer, [s.obs for s in asked], [s.episode for s in asked], seeds)
    if len(chunks) != len(asked):
        raise CallFailed(
            f"policy.infer answered {len(chunks)} chunks for {len(asked)} observations",
            FailureKind.MALFORMED_ANSWER,
        )
    answers: list[tuple[_Slot, Any, int]] = []
    for slot, chunk in zip(asked, chunks, strict=True):
        if isinstance(chunk, Failed):
            answers.append((slot, CallFailed(describe(POLICY_INFER.name, chunk), chunk.kind), 0))
        else:
            try:
                answers.append((slot, chunk, _rows(chunk, valid_rows, width)))
            except CallFailed as failure:
                answers.append((slot, failure, 0))
    return answers


def _each_alone(
    asked: list[_Slot],
    failure: CallFailed,
    policy: PolicyDriver,
    guard: Guard,
    valid_rows: int,
    width: int | None,
) -> list[tuple[_Slot, Any, int]]:
    """A batched call that raised, asked again one world at a time: the failure lands on the worlds whose own
    observation raises, and the others play on. Only a raise is asked again: a hang would cost every world
    another call limit, and a policy that died fails them all."""
    if len(asked) == 1 or failure.kind is not FailureKind.POLICY_CRASH:
        return [(slot, failure, 0) for slot in asked]
    answers: list[tuple[_Slot, Any, int]] = []
    for slot in asked:
        try:
            answers += _ask([slot], policy, guard, valid_rows, width)
        except CallFailed as own:
            answers.append((slot, own, 0))
    return answers


def _record(slot: _Slot, recorder: EpisodeRecorder, action: Any, hz: float) -> None:
    """The step just played: its action and what came of it, then the observation it left."""
    started = time.perf_counter()
    played = slot.step - 1
    recorder.action(played, played / hz, action, slot.success, slot.metrics, done=slot.done)
    recorder.frame(slot.step, slot.step / hz, slot.obs)
    slot.timing.recording += time.perf_counter() - started


def _take_pending(slot: _Slot) -> None:
    slot.chunk, slot.chunk_len, slot.chunk_sent = slot.pending, slot.pending_len, slot.pending_sent
    slot.pending = None


def _begin(
    fresh: list[EpisodeSpec],
    where: list[int],
    slots: list[_Slot | None],
    worlds: Worlds,
    policy: PolicyDriver,
    spec: BenchmarkSpec,
    guard: Guard,
    hz: float,
    recording: Recording | None,
    handed: HandedReplays | None,
) -> Iterator[EpisodeResult]:
    started = time.perf_counter()
    try:
        observations = guard.call(
            BENCHMARK_RESET, worlds.reset, where, [e.task for e in fresh], [e.seed for e in fresh]
        )
    except CallFailed as failure:
        bench_timing.drain("rendering")
        for episode in fresh:
            yield EpisodeResult.failed(episode, failure)
        # Worlds of a vectorized benchmark are built together and go down together.
        rebuilt = Failed(f"its worlds were rebuilt after another failed: {failure.reason}", failure.kind)
        for slot in [s for s in slots if s is not None]:
            yield _end(slots, slot, policy, rebuilt)
        raise Rebuild(failure.reason) from None
    reset_s = time.perf_counter() - started
    render_s = bench_timing.drain("rendering")
    for index, episode, obs in zip(where, fresh, observations, strict=True):
        seen = Episode(
            params=dict(policy.spec.session_params),
            id=str(episode.index),
            task=episode.task,
            description=spec.tasks[episode.task],
            seed=episode.seed,
            trial=episode.trial,
            action_space=(list(spec.action_space[0]), list(spec.action_space[1]))
            if spec.action_space
            else None,
        )
        limit_s: float = spec.limit(episode.task) if episode.limit_s is None else episode.limit_s
        limit: Truncation = "task" if episode.limit_s is None else "cap"
        if episode.cap_s is not None and episode.cap_s < limit_s:
            limit_s, limit = episode.cap_s, "cap"
        slot = _Slot(
            spec=episode,
            episode=seen,
            max_steps=max_steps(limit_s, hz),
            limit=limit,
            started=started,
            obs=obs,
        )
        slot.timing.simulation += (reset_s - render_s) / len(fresh)
        slot.timing.rendering += render_s / len(fresh)
        slots[index] = slot
        if recording is not None:
            opened = time.perf_counter()
            said = spec.replay is not None and spec.replay.looks is not None
            looks = (lambda at=index: worlds.replay_looks(at)) if said else None
            if handed is not None:
                track = handed.track(index, looks)
                slot.recorder = EpisodeRecorder.open(recording, episode.index, hz, track=track)
            else:
                replays = recording.replay and (spec.replay is not None or not recording.replay_if_declared)
                state = (lambda at=index: worlds.replay_state(at)) if replays else None
                slot.recorder = EpisodeRecorder.open(recording, episode.index, hz, state, looks=looks)
            slot.recorder.frame(0, 0.0, obs)
            slot.timing.recording += time.perf_counter() - opened
        try:
            guard.call(POLICY_ON_EPISODE, policy.start, seen)
        except CallFailed as failure:
            yield _end(slots, slot, policy, failure)


def _end(
    slots: list[_Slot | None], slot: _Slot, policy: PolicyDriver, failure: Failed | None
) -> EpisodeResult:
    slots[slots.index(slot)] = None
    # A policy failing to let go of an episode costs that episode nothing.
    with contextlib.suppress(Exception):
        policy.finish(slot.episode)
    artifacts: list[str] = []
    recording_error = None
    recorder = slot.recorder
    if recorder is not None:
        slot.recorder = None
        closing = time.perf_counter()
        artifacts = recorder.relative(recorder.close())
        recording_error = recorder.error
        slot.timing.recording += time.perf_counter() - closing
    spec = slot.spec
    error = failure.reason if failure is not None else None
    metrics = _numbers(slot.metrics) if error is None else {}
    if error is None:
        metrics["success"] = 1.0 if slot.success else 0.0
    truncated = error is None and not slot.done
    return EpisodeResult(
        index=spec.index,
        task=spec.task,
        trial=spec.trial,
        seed=spec.seed,
        repeat=spec.repeat,
        success=bool(slot.success) and error is None,
        terminated=bool(slot.done) and error is None,
        truncated=truncated,
        truncated_by=slot.limit if truncated else None,
        steps=slot.step,
        robot_seconds=slot.step / policy.spec.hz,
        inferences=slot.episode.inferences,
        metrics=metrics,
        error=error,
        failure=failure.kind if failure is not None else None,
        wall_seconds=time.perf_counter() - slot.started,
        timing=slot.timing,
        artifacts=artifacts,
        recording_error=recording_error,
    )


def _rows(chunk: Any, valid: int, width: int | None) -> int:
    """How many rows of `chunk` may play: its length, at most the policy's action_chunk_len. Where the
    benchmark declares its action space (`width` numbers), a row of numbers of another size is the policy's
    fault, said on the first step, rather than played into the simulator (silently, or failing there as
    the benchmark's)."""
    try:
        count = len(chunk)
        chunk[0]
    except (TypeError, IndexError, KeyError):
        raise CallFailed(
            f"policy.infer answered {type(chunk).__name__}: a chunk is rows of actions, the first "
            "played first (shape (T, ...), T >= 1)",
            FailureKind.MALFORMED_ANSWER,
        ) from None
    if count < 1:
        raise CallFailed(
            "policy.infer answered an empty chunk: a chunk holds at least one row",
            FailureKind.MALFORMED_ANSWER,
        )
    if width is not None:
        row = np.asarray(chunk[0])
        if row.dtype.kind in "biuf" and row.size != width:
            raise CallFailed(
                f"policy.infer answered actions of {row.size} number{'s' if row.size != 1 else ''} "
                f"(a row of shape {row.shape}); the benchmark's action_space takes {width}: a chunk is "
                f"rows of actions, shape (T, {width}), even for one action",
                FailureKind.MALFORMED_ANSWER,
            )
    return min(count, valid)


def _unpack(outcome: Any) -> tuple[Any, bool, bool, Any]:
    if isinstance(outcome, tuple) and len(outcome) in (3, 4):
        metrics = outcome[3] if len(outcome) == 4 else None
        if metrics is None or isinstance(metrics, dict):
            return outcome[0], bool(outcome[1]), bool(outcome[2]), metrics
    raise CallFailed(
        f"benchmark.step answered {_shape(outcome)}: it returns (observation, done, success) or "
        "(observation, done, success, metrics) with metrics a dict",
        FailureKind.BENCHMARK_CRASH,
    )


def _shape(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return type(value).__name__


def _numbers(metrics: Any) -> dict[str, float]:
    """The numeric metrics of an episode's last step; others (text, arrays) are not aggregated."""
    if not metrics:
        return {}
    kept: dict[str, float] = {}
    for name, value in metrics.items():
        try:
            if isinstance(value, (bool, int, float)) or (hasattr(value, "ndim") and value.ndim == 0):
                kept[str(name)] = float(value)
        except (TypeError, ValueError):
            continue
    return kept
