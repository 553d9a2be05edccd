"""A run's episodes on disk as they land: `episodes.jsonl` in the run folder, one line per episode, each
line flushed and fsynced before the next episode is counted, so a kill, an out-of-memory or a dropped SSH
session loses at most the episodes in play. `eval run --resume` reads it back and plays only the rest.

An fsync per episode costs about a millisecond on this machine's disk, against episodes of seconds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType

from yardstick.engine.results import EpisodeResult, EpisodeSpec

JOURNAL = "episodes.jsonl"


class Journal:
    """Appends each result to `folder/episodes.jsonl`, durably."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / JOURNAL
        self._file = self.path.open("a", encoding="utf-8")

    def append(self, result: EpisodeResult) -> None:
        self._file.write(json.dumps(result.to_dict(), default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def read_journal(folder: Path) -> list[EpisodeResult]:
    """The episodes a run folder's journal holds, by index (a later line for an index wins). A last line a
    kill cut short is not an episode: it is dropped, and the file is cut back to the whole lines."""
    path = folder / JOURNAL
    if not path.exists():
        return []
    raw = path.read_bytes()
    whole = raw[: raw.rfind(b"\n") + 1]
    if len(whole) != len(raw):
        with path.open("r+b") as file:
            file.truncate(len(whole))
    results: dict[int, EpisodeResult] = {}
    for line in whole.decode("utf-8").splitlines():
        if line.strip():
            result = EpisodeResult.from_dict(json.loads(line))
            results[result.index] = result
    return [results[index] for index in sorted(results)]


def foreign_episodes(done: list[EpisodeResult], planned: list[EpisodeSpec]) -> list[int]:
    """The indices of `done` that are not this plan's episodes (another task or seed at that index)."""
    plan = {spec.index: (spec.task, spec.seed) for spec in planned}
    return [r.index for r in done if plan.get(r.index) != (r.task, r.seed)]
