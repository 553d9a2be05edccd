"""How a policy is called: one interface (`PolicyDriver`) for a decorated class in this process and for a
policy across a wire. The engine's loop hands it the observations of every world due an answer at a step;
the policy server hands it the requests of every session waiting at once."""

from __future__ import annotations

import bisect
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from yardstick.sdk.construct import build
from yardstick.sdk.episode import Episode
from yardstick.sdk.load import source_dir
from yardstick.sdk.specs import BenchmarkSpec, PolicySpec


class PolicyDriver(Protocol):
    spec: PolicySpec
    wants_seed: bool
    # Whether many observations are better asked in one call (a batched policy, a server that pipelines):
    # the engine otherwise asks one world's at a time, so one world's failure fails that world alone.
    asks_together: bool

    def start(self, episode: Episode) -> None:
        """An episode begins."""

    def infer(self, observations: list[Any], episodes: list[Episode], seeds: list[int]) -> list[Any]:
        """One chunk per observation, in order; in a chunk's place, the exception that failed that
        observation's own answer where the others' stand (a policy server's session that raised)."""

    def finish(self, episode: Episode) -> None:
        """An episode ended; what the policy keeps for it may go."""

    def close(self) -> None: ...


def instantiate(
    cls: type,
    spec: BenchmarkSpec | PolicySpec,
    *,
    params: Mapping[str, Any] | None = None,
    worlds: int | None = None,
    policy: Mapping[str, Any] | None = None,
) -> Any:
    """An instance of a decorated class, built by its constructor with its forms filled: a policy's
    weights (relative to its file's folder), a benchmark's worlds and the evaluated policy's fields."""
    base = source_dir(cls)
    weights: Any = None
    if isinstance(spec, PolicySpec) and spec.weights is not None:
        weights = (
            {part: os.path.join(base, path) for part, path in spec.weights.items()}
            if isinstance(spec.weights, dict)
            else os.path.join(base, spec.weights)
        )
    return build(
        cls,
        spec.constructor,
        base_dir=base,
        weights=weights,
        worlds=worlds,
        policy=policy,
        params=dict(params or {}),
    )


def _takes_one(bound: Callable[..., Any]) -> bool:
    """Whether a bound method takes a positional argument (an end hook is handed the episode or nothing)."""
    params = inspect.signature(bound).parameters.values()
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


_MASK64 = (1 << 64) - 1


def _splitmix64(value: int) -> int:
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def inference_seed(episode_seed: int, inferences: int) -> int:
    """The seed a sampling policy draws its answer with: a function of the episode's seed and how many
    answers it gave before, so a rerun of the episode draws the same. SplitMix64 of both: well mixed (seeds
    that differ by one share nothing) and two microseconds, where numpy's SeedSequence takes fifty, and this
    runs once per answer."""
    return _splitmix64(_splitmix64(episode_seed & _MASK64) ^ (inferences & _MASK64)) >> 1


class InProcessPolicy:
    """A decorated policy class's instance, called directly."""

    def __init__(self, instance: Any, spec: PolicySpec) -> None:
        self.spec = spec
        self.wants_seed = "seed" in spec.infer_keywords
        self.asks_together = spec.batch_sizes is not None
        self._wants_episode = "episode" in spec.infer_keywords
        self._infer: Callable[..., Any] = getattr(instance, spec.infer_method)
        self._on_episode: Callable[[Episode], Any] | None = (
            getattr(instance, spec.on_episode_method) if spec.on_episode_method else None
        )
        self._on_end: Callable[..., Any] | None = None
        self._end_takes_episode = False
        if spec.on_episode_end_method:
            self._on_end = getattr(instance, spec.on_episode_end_method)
            self._end_takes_episode = _takes_one(self._on_end)
        self._instance = instance

    def start(self, episode: Episode) -> None:
        if self._on_episode is not None:
            self._on_episode(episode)

    def finish(self, episode: Episode) -> None:
        try:
            if self._on_end is not None:
                if self._end_takes_episode:
                    self._on_end(episode)
                else:
                    self._on_end()
        finally:
            episode.state.clear()

    def close(self) -> None:
        close = getattr(self._instance, "close", None)
        if callable(close):
            close()

    def infer(self, observations: list[Any], episodes: list[Episode], seeds: list[int]) -> list[Any]:
        sizes = self.spec.batch_sizes
        if sizes is None:
            if len(observations) == 1 and len(episodes) == 1 and len(seeds) <= 1:
                # One world asking, as most steps of most runs do: the call without the zip and the list
                # around it (this runs once a step).
                return [self._infer(observations[0], **self._keywords(episodes[0], seeds[0] if seeds else 0))]
            return [
                self._infer(obs, **self._keywords(ep, seed))
                for obs, ep, seed in zip(
                    observations, episodes, seeds or [0] * len(observations), strict=True
                )
            ]
        chunks: list[Any] = []
        start = 0
        while start < len(observations):
            size = min(len(observations) - start, sizes[-1])
            chunks.extend(
                self._batch(
                    observations[start : start + size],
                    episodes[start : start + size],
                    seeds[start : start + size] if seeds else [],
                    sizes,
                )
            )
            start += size
        return chunks

    def _batch(
        self, observations: list[Any], episodes: list[Episode], seeds: list[int], sizes: Sequence[int]
    ) -> list[Any]:
        # A policy that accepts only some batch sizes (a compiled model) is handed the smallest it accepts
        # that holds them all, the last observation repeated; the extra answers are dropped.
        count = len(observations)
        fit = sizes[bisect.bisect_left(sizes, count)]
        pad = fit - count
        keywords: dict[str, Any] = {}
        if self._wants_episode:
            keywords["episode"] = episodes + [episodes[-1]] * pad
        if self.wants_seed:
            keywords["seed"] = seeds + [seeds[-1]] * pad
        answers = self._infer(observations + [observations[-1]] * pad, **keywords)
        if len(answers) != fit:
            raise ValueError(
                f"a batched infer returns one chunk an observation: handed {fit}, got {len(answers)}"
            )
        return list(answers[:count])

    def _keywords(self, episode: Episode, seed: int) -> dict[str, Any]:
        if self._wants_episode:
            return {"episode": episode, "seed": seed} if self.wants_seed else {"episode": episode}
        return {"seed": seed} if self.wants_seed else {}
