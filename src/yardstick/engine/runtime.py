"""What one process builds to play episodes: the policy, then the benchmark's worlds (handed the policy's
declared fields), each built once and reused for every episode this process plays."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from yardstick.engine.guard import Beacon, CallFailed, Guard
from yardstick.engine.loop import Playback, Rebuild, play
from yardstick.engine.policies import InProcessPolicy, PolicyDriver
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.worlds import ManyWorlds, SingleWorld, Worlds
from yardstick.sdk.construct import build
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.load import load_object, source_dir
from yardstick.sdk.specs import BenchmarkSpec, PolicySpec

Kind = Literal["benchmark", "policy"]
Resolver = Callable[[Kind, str], type]

# Building a model or a simulator may take long; a constructor that takes longer than this is stuck.
BUILD_TIMEOUT_S = 600.0


class BuildError(Exception):
    """The benchmark or the policy could not be built: the caller's fault (a bad reference, a refused
    declaration, a constructor that raised)."""


@dataclass(frozen=True)
class Component:
    """A benchmark or policy by reference, with `params` laid over its constructor's keyword arguments."""

    ref: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Work:
    """Everything a process needs to play episodes of a run. Picklable: a pool sends it to each worker.
    `resolver` names the function ("module:function") that turns a reference into a class; the catalog's
    knows the built-in names."""

    benchmark: Component
    policy: Component
    playback: Playback = Playback()
    call_timeout_s: float | None = 60.0
    worlds: int | None = None
    resolver: str = "yardstick.catalog:resolve"


def resolve(work: Work, kind: Kind) -> type:
    resolver: Resolver = load_object(work.resolver)
    component = work.benchmark if kind == "benchmark" else work.policy
    return resolver(kind, component.ref)


def specs_of(work: Work) -> tuple[BenchmarkSpec, PolicySpec]:
    """The declarations a run is played under, read without building anything."""
    return benchmark_spec(resolve(work, "benchmark")), policy_spec(resolve(work, "policy"))


class Runtime:
    """A policy and a benchmark built in this process."""

    def __init__(self, work: Work, beacon: Beacon | None = None) -> None:
        started = time.perf_counter()
        self.work = work
        self.beacon = beacon
        policy_cls = resolve(work, "policy")
        self.policy_spec = policy_spec(policy_cls)
        self.policy: PolicyDriver = InProcessPolicy(
            self._build(policy_cls, self.policy_spec, work.policy), self.policy_spec
        )
        self._benchmark_cls = resolve(work, "benchmark")
        self.benchmark_spec = benchmark_spec(self._benchmark_cls)
        self.worlds = self._build_worlds()
        self.cold_start_s = time.perf_counter() - started

    def _build(
        self, cls: type, spec: BenchmarkSpec | PolicySpec, component: Component, *, worlds: int | None = None
    ) -> Any:
        base = source_dir(cls)
        weights: Any = None
        policy_fields = None
        if isinstance(spec, PolicySpec):
            weights = _absolute(spec.weights, base)
        else:
            policy_fields = self.policy_spec.fields()
        with Guard(BUILD_TIMEOUT_S, self.beacon) as guard:
            try:
                return guard.call(
                    f"{spec.name}'s constructor",
                    lambda: build(
                        cls,
                        spec.constructor,
                        base_dir=base,
                        weights=weights,
                        worlds=worlds,
                        policy=policy_fields,
                        params=component.params,
                    ),
                )
            except CallFailed as failure:
                raise BuildError(failure.reason) from None

    def _build_worlds(self) -> Worlds:
        spec = self.benchmark_spec
        if spec.worlds is None:
            return SingleWorld(self._build(self._benchmark_cls, spec, self.work.benchmark), spec)
        size = min(self.work.worlds or spec.worlds, spec.worlds)
        return ManyWorlds(
            self._build(self._benchmark_cls, spec, self.work.benchmark, worlds=size), spec, size
        )

    def run(self, episodes: Iterable[EpisodeSpec]) -> Iterator[EpisodeResult]:
        """Play `episodes`, yielding each result as it ends. A benchmark that fails is built anew before
        the next episode, so one broken world costs one episode."""
        source = iter(episodes)
        with Guard(self.work.call_timeout_s, self.beacon) as guard:
            while True:
                try:
                    yield from play(
                        source, self.worlds, self.policy, self.benchmark_spec, guard, self.work.playback
                    )
                    return
                except Rebuild:
                    try:
                        self.worlds = self._build_worlds()
                    except BuildError as failure:
                        for episode in source:
                            yield EpisodeResult.failed(
                                episode, f"the benchmark could not be rebuilt: {failure}"
                            )
                        return

    def close(self) -> None:
        self.policy.close()


def _absolute(weights: str | dict[str, str] | None, base: str) -> str | dict[str, str] | None:
    if weights is None:
        return None
    if isinstance(weights, dict):
        return {part: os.path.join(base, path) for part, path in weights.items()}
    return os.path.join(base, weights)
