"""How the engine talks to a policy: one interface for a class loaded here and, later, a policy across a
wire. The loop hands it the observations of every world that needs an answer at this step."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from yardstick.sdk.episode import Episode
from yardstick.sdk.specs import PolicySpec


class PolicyDriver(Protocol):
    spec: PolicySpec
    wants_seed: bool

    def start(self, episode: Episode) -> None:
        """An episode begins."""

    def infer(self, observations: list[Any], episodes: list[Episode], seeds: list[int]) -> list[Any]:
        """One chunk per observation, in order."""

    def finish(self, episode: Episode) -> None:
        """An episode ended; what the policy keeps for it may go."""

    def close(self) -> None: ...


def inference_seed(episode_seed: int, inferences: int) -> int:
    """The seed a sampling policy draws its answer with: a function of the episode's seed and how many
    answers it gave before, so a rerun of the episode draws the same."""
    state = np.random.SeedSequence([episode_seed % 2**63, inferences]).generate_state(2, np.uint32)
    return int(state[0]) << 32 | int(state[1])


class InProcessPolicy:
    """A decorated policy class's instance, called directly."""

    def __init__(self, instance: Any, spec: PolicySpec) -> None:
        self.spec = spec
        self.wants_seed = "seed" in spec.infer_keywords
        self._wants_episode = "episode" in spec.infer_keywords
        self._infer: Callable[..., Any] = getattr(instance, spec.infer_method)
        self._on_episode: Callable[[Episode], Any] | None = (
            getattr(instance, spec.on_episode_method) if spec.on_episode_method else None
        )
        self._instance = instance

    def start(self, episode: Episode) -> None:
        if self._on_episode is not None:
            self._on_episode(episode)

    def finish(self, episode: Episode) -> None:
        episode.state.clear()

    def close(self) -> None:
        close = getattr(self._instance, "close", None)
        if callable(close):
            close()

    def infer(self, observations: list[Any], episodes: list[Episode], seeds: list[int]) -> list[Any]:
        sizes = self.spec.batch_sizes
        if sizes is None:
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
        keywords: dict[str, Any] = {}
        if self._wants_episode:
            keywords["episode"] = episode
        if self.wants_seed:
            keywords["seed"] = seed
        return keywords
