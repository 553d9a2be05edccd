"""One interface over a benchmark of one world and a vectorized one: worlds are slots, reset and stepped
by index. The loop speaks only this interface, so both kinds run the same code path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from yardstick.sdk.specs import RECORDED_REPLAYS, BenchmarkSpec

# (observation, done, success) or (observation, done, success, metrics), as a benchmark's step returns it.
StepOutcome = Sequence[Any]


class Worlds(Protocol):
    size: int

    def reset(self, slots: list[int], tasks: list[str], seeds: list[int]) -> list[Any]: ...

    def step(self, slots: list[int], actions: list[Any]) -> list[StepOutcome]: ...

    def replay_state(self, slot: int) -> Any:
        """The simulator's state of the episode in `slot`, from the method the benchmark's `replay` names."""
        ...

    def replay_looks(self, slot: int) -> Any:
        """How the episode in `slot` looks now where the simulator does not say (colours, visibility):
        the answer of the `looks` method the benchmark's `replay` names, {node: {"rgba": [r, g, b, a]}} or
        {node: {"visible": False}}."""
        ...


class NoReplay(Exception):
    """The benchmark declares no way to read its simulator's state for a 3D replay, or declares one of an
    engine Yardstick does not read."""


def _state_method(instance: Any, spec: BenchmarkSpec) -> Callable[..., Any]:
    replay = spec.replay
    if replay is not None and replay.engine not in RECORDED_REPLAYS:
        raise NoReplay(
            f"benchmark {spec.name} declares replay engine {replay.engine!r}: Yardstick reads MuJoCo and "
            "hands-over ('own') replays only, so its episodes record none (leave replay out of what is "
            "recorded: --record video,trajectory)"
        )
    if replay is None or replay.state is None:
        raise NoReplay(
            f"benchmark {spec.name} declares no replay state: @benchmark(..., replay={{'engine': 'mujoco', "
            "'state': '<method>'}) names the method that answers its simulator (an MjModel and MjData, a "
            "gymnasium MuJoCo env, dm_control's Physics, robosuite's MjSim)"
        )
    method: Callable[..., Any] = getattr(instance, replay.state)
    return method


def _looks_method(instance: Any, spec: BenchmarkSpec) -> Callable[..., Any]:
    replay = spec.replay
    if replay is None or replay.looks is None:
        raise NoReplay(f"benchmark {spec.name} declares no replay looks")
    method: Callable[..., Any] = getattr(instance, replay.looks)
    return method


class SingleWorld:
    """A benchmark whose instance is one world: reset(task, seed), step(action)."""

    size = 1

    def __init__(self, instance: Any, spec: BenchmarkSpec) -> None:
        self._reset: Callable[[str, int], Any] = getattr(instance, spec.reset_method)
        self._step: Callable[[Any], StepOutcome] = getattr(instance, spec.step_method)
        self._instance, self._spec = instance, spec

    def reset(self, slots: list[int], tasks: list[str], seeds: list[int]) -> list[Any]:
        return [self._reset(tasks[0], seeds[0])]

    def step(self, slots: list[int], actions: list[Any]) -> list[StepOutcome]:
        return [self._step(actions[0])]

    def replay_state(self, slot: int) -> Any:
        return _state_method(self._instance, self._spec)()

    def replay_looks(self, slot: int) -> Any:
        return _looks_method(self._instance, self._spec)()


class ManyWorlds:
    """A vectorized benchmark: reset(worlds, tasks, seeds) and step(worlds, actions), one answer a world."""

    def __init__(self, instance: Any, spec: BenchmarkSpec, size: int) -> None:
        self.size = size
        self._reset: Callable[[list[int], list[str], list[int]], Sequence[Any]] = getattr(
            instance, spec.reset_method
        )
        self._step: Callable[[list[int], list[Any]], Sequence[StepOutcome]] = getattr(
            instance, spec.step_method
        )
        self._instance, self._spec = instance, spec

    def reset(self, slots: list[int], tasks: list[str], seeds: list[int]) -> list[Any]:
        return _one_each(self._reset(slots, tasks, seeds), len(slots), "reset", "observation")

    def step(self, slots: list[int], actions: list[Any]) -> list[StepOutcome]:
        return _one_each(self._step(slots, actions), len(slots), "step", "(observation, done, success)")

    def replay_state(self, slot: int) -> Any:
        return _state_method(self._instance, self._spec)(slot)

    def replay_looks(self, slot: int) -> Any:
        return _looks_method(self._instance, self._spec)(slot)


def _one_each(answers: Sequence[Any], count: int, method: str, what: str) -> list[Any]:
    if not isinstance(answers, (list, tuple)) or len(answers) != count:
        got = f"{len(answers)} answers" if isinstance(answers, (list, tuple)) else type(answers).__name__
        raise ValueError(
            f"a vectorized benchmark's {method} returns one {what} a world it was handed: "
            f"{count} worlds, got {got}"
        )
    return list(answers)
