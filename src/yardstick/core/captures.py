"""Captured field data: what robots did on a deployment that captures (`seq policy set P capture=on`).

A deployment's folder under the install's capture root holds, for each episode a robot played on it, a JSON
Lines file its worker writes as the episode goes (`episodes/<worker>/<episode>.jsonl`: an `observe` line for
every observation the robot handed over, an `act` line for every answer, an `end` line when the episode
ended cleanly, or a `broke` line saying why when its worker ended under it: died, stopped, its deployment
stopped), and the robot's label of each episode
(`labels/<episode>.json`, `policy.label`). Values JSON cannot carry are tagged: an array as
`{"__ndarray__": base64, "dtype", "shape"}`, bytes as `{"__bytes__": base64}`. The Sequences CLI's
`seq policy data export` reads these files and writes the dataset on the user's machine.
"""

from __future__ import annotations

import base64
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

__all__ = ["CAPTURE_SETTING", "CapturedEpisode", "Captures", "EpisodeFile", "tagged"]

CAPTURE_SETTING: Final = "capture"
_EPISODE = re.compile(r"[A-Za-z0-9._-]{1,128}")


def tagged(value: Any) -> Any:
    """`value` as a JSON line carries it: arrays and bytes tagged, numpy numbers plain."""
    if isinstance(value, dict):
        return {str(k): tagged(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [tagged(v) for v in value]
    if isinstance(value, np.ndarray):
        return {
            "__ndarray__": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode(),
            "dtype": value.dtype.str,
            "shape": list(value.shape),
        }
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes | bytearray | memoryview):
        return {"__bytes__": base64.b64encode(bytes(value)).decode()}
    return value


@dataclass
class EpisodeFile:
    """One episode's lines, appended as it plays (a file its worker alone writes)."""

    path: Path
    episode_id: str

    def write(self, kind: str, ts: float, **fields: Any) -> None:
        line = {
            "episode_id": self.episode_id,
            "kind": kind,
            "ts": ts,
            **{k: tagged(v) for k, v in fields.items()},
        }
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, separators=(",", ":")) + "\n")


class Captures:
    """The capture folders of an install."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, hosted_id: int) -> Path:
        return self.root / str(hosted_id)

    def episode(self, hosted_id: int, worker_id: int, episode_id: str) -> EpisodeFile:
        if not _EPISODE.fullmatch(episode_id):
            raise ValueError("episode_id: 1 to 128 letters, digits, '.', '_' or '-'")
        where = self.folder(hosted_id) / "episodes" / str(worker_id)
        where.mkdir(parents=True, exist_ok=True)
        return EpisodeFile(where / f"{episode_id}.jsonl", episode_id)

    def broke(self, hosted_id: int, worker_id: int, why: str) -> None:
        """Worker `worker_id` ended: each of its episodes that did not end says where it broke, and why."""
        where = self.folder(hosted_id) / "episodes" / str(worker_id)
        for file in sorted(where.glob("*.jsonl")) if where.is_dir() else []:
            lines = file.read_text(encoding="utf-8").splitlines()
            last = json.loads(lines[-1]) if lines and lines[-1].strip() else None
            if last is not None and last.get("kind") not in ("end", "broke"):
                EpisodeFile(file, str(last["episode_id"])).write("broke", time.time(), why=why)

    def label(self, hosted_id: int, episode_id: str, success: bool, notes: str) -> None:
        if not _EPISODE.fullmatch(episode_id):
            raise ValueError("episode_id: 1 to 128 letters, digits, '.', '_' or '-'")
        where = self.folder(hosted_id) / "labels"
        where.mkdir(parents=True, exist_ok=True)
        body = {"episode_id": episode_id, "success": success, "notes": notes}
        temporary = where / f".{episode_id}.json.tmp"
        temporary.write_text(json.dumps(body), encoding="utf-8")
        temporary.replace(where / f"{episode_id}.json")  # whole or not at all: a reader never sees half

    def labels(self, hosted_id: int) -> dict[str, dict[str, Any]]:
        where = self.folder(hosted_id) / "labels"
        found = {}
        for file in sorted(where.glob("*.json")) if where.is_dir() else []:
            label = json.loads(file.read_text(encoding="utf-8"))
            found[str(label.get("episode_id"))] = label
        return found

    def files(self, hosted_id: int) -> list[tuple[str, int]]:
        """(path inside the deployment's folder, size) of every file, episodes then labels, by name."""
        base = self.folder(hosted_id)
        if not base.is_dir():
            return []
        found = [p for p in base.rglob("*") if p.is_file() and not p.name.startswith(".")]
        return sorted((p.relative_to(base).as_posix(), p.stat().st_size) for p in found)

    def open(self, hosted_id: int, path: str) -> Path | None:
        """The file at `path` in the deployment's folder; None for any path that leaves it or names none."""
        base = self.folder(hosted_id).resolve()
        target = (base / path).resolve()
        if not target.is_relative_to(base) or not target.is_file() or target.name.startswith("."):
            return None
        return target

    def summaries(self, hosted_id: int) -> list[CapturedEpisode]:
        """Every captured episode of the deployment, newest first, each read as a line count: an episode's
        lines carry its camera frames, so only a line's head (its kind and time) is read, and the whole of
        its last line (an `end` or `broke` line is small)."""
        found = []
        for file in (self.folder(hosted_id) / "episodes").glob("*/*.jsonl"):
            summary = _summary(file)
            if summary is not None:
                found.append(summary)
        return sorted(found, key=lambda e: e.began, reverse=True)


@dataclass(frozen=True)
class CapturedEpisode:
    """One captured episode at a glance (the deployment's page)."""

    episode_id: str
    worker_id: int
    began: float
    last: float
    observations: int
    acts: int
    ended: str | None  # "end": the robot ended it; "broke": its worker ended under it; None: playing or left
    why: str | None  # why it broke


# The head every line begins with (EpisodeFile.write): its episode, kind and time, before any value.
_HEAD = re.compile(r'^\{"episode_id":"[^"]*","kind":"(\w+)","ts":([0-9.eE+-]+)')


def _summary(file: Path) -> CapturedEpisode | None:
    counts = {"observe": 0, "act": 0}
    began = last = None
    tail, tail_kind = "", ""
    with file.open(encoding="utf-8") as lines:
        for line in lines:
            head = _HEAD.match(line[:200])
            if head is None:
                continue
            kind, ts = head.group(1), float(head.group(2))
            began = ts if began is None else began
            last = ts
            if kind in counts:
                counts[kind] += 1
            tail, tail_kind = line, kind
    if began is None or last is None:
        return None
    # Only a closing line is parsed whole (and a line still being written is no closing line).
    ended = tail_kind if tail_kind in ("end", "broke") and tail.endswith("\n") else None
    closing = json.loads(tail) if ended is not None else {}
    return CapturedEpisode(
        episode_id=file.stem,
        worker_id=int(file.parent.name),
        began=began,
        last=last,
        observations=counts["observe"],
        acts=counts["act"],
        ended=ended,
        why=closing.get("why") if ended == "broke" else None,
    )
