"""Where a run page's episode table links the 3D viewer: each episode that recorded a replay to its page,
and in a run of several endpoints (a blind sample's, a comparison's) to it side by side with its pair."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from yardstick.store.models import RunEpisode
from yardstick.web.replay_viewer import files_of

PAGE = "replay"


@dataclass(frozen=True)
class ReplayLinks:
    """An episode's links, relative to its run's page: alone, and beside its pair ("" when it has none)."""

    alone: str
    pair: str
    pair_endpoint: str


def replayed(episode: RunEpisode) -> bool:
    return files_of((episode.result or {}).get("artifacts", [])) is not None


def replay_links(episodes: Sequence[RunEpisode]) -> dict[int, ReplayLinks]:
    """The links of each replayed episode. Its pair is the next endpoint's episode on the same task and trial
    with the same seed (the last endpoint's wraps to the first), when that one was replayed too."""
    endpoints = list(dict.fromkeys(e.endpoint for e in episodes))
    played = {(e.endpoint, e.task_id, e.trial): e for e in episodes if replayed(e)}
    links = {}
    for (endpoint, task, trial), episode in played.items():
        alone = f"{PAGE}?episode={episode.index}"
        other = endpoints[(endpoints.index(endpoint) + 1) % len(endpoints)]
        found = played.get((other, task, trial)) if other != endpoint else None
        if found is not None and found.seed == episode.seed:
            links[episode.index] = ReplayLinks(alone, f"{alone}&episode={found.index}", other)
        else:
            links[episode.index] = ReplayLinks(alone, "", "")
    return links
