"""The files an episode recorded in a box, arriving as bytes on its channel, written into the run's folder.

Nothing leaves a box by a path: a path names whatever the box has put there by the time it is read (a link to
a platform file, a FIFO, a hard link), so the box sends the bytes and the platform writes them, into a folder
only the platform sees, each file created anew (never through a link) under a name held to the recorder's own
shape: `episodes/<the episode's index, six digits>/<a camera's video>.mp4 | trajectory.jsonl.gz |
replay.seqreplay`, or `scenes/<sha256>.glb` (a 3D replay's scene, which the box sends once: an episode naming
one that arrived before keeps it). A file is kept only once it arrived whole, within its size, and (a video)
passed `mp4.inspect`, (a trajectory) opens as gzip, (a replay) reads as one, (a scene) is a glTF binary whose
sha256 is its name; anything else is dropped, said in the episode's `recording_error`, and never fails the
episode. A scene arrives under a name of its own and takes its place by a rename once checked, so a copy
being read (uploaded) is never the one being written.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Final

from yardstick.engine import mp4
from yardstick.engine.recording import TRAJECTORY, VIDEO_SUFFIX, episode_folder
from yardstick.engine.replay_track import REPLAY, SCENE_FILE
from yardstick.replay3d import format as replay_format

MAX_FILE_BYTES: Final = 1024**3
MAX_EPISODE_BYTES: Final = 2 * 1024**3
FILE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
GZIP_MAGIC: Final = b"\x1f\x8b"
GLB_MAGIC: Final = b"glTF"
_ARRIVALS = itertools.count()


class Abuse(Exception):
    """A box that sent files out of turn: not a recording's problem but a box to stop listening to."""


@dataclass
class _File:
    path: Path
    fd: int | None
    final: Path | None = None  # a scene's own name, once it is checked (it arrives under another)
    size: int = 0
    whole: bool = False
    problem: str | None = None


@dataclass
class Inbound:
    """The recorded files of the episodes a box is playing, into `target` (the run's recording folder)."""

    target: Path
    files: dict[str, _File] = field(default_factory=dict)
    _bytes: dict[int, int] = field(default_factory=dict)

    def chunk(self, name: object, data: object, end: bool, playing: set[int]) -> None:
        """One message of a file: `data` (base64) appended, or `end`. `playing`: the episodes in play."""
        if not isinstance(name, str):
            raise Abuse("a file message without a name")
        found = self.files.get(name)
        if found is None:
            found = self.files[name] = self._open(name, playing)
        if found.whole:
            raise Abuse(f"{name}: more of a file it had ended")
        if end:
            found.whole = found.problem is None
            self._close(found)
            return
        if found.problem is not None:
            return
        try:
            raw = base64.b64decode(data if isinstance(data, str) else "", validate=True)
        except (binascii.Error, ValueError):
            raise Abuse(f"{name}: a chunk that is no base64") from None
        index = _index(name)
        total = self._bytes.get(index, 0) + len(raw)
        if found.size + len(raw) > MAX_FILE_BYTES or total > MAX_EPISODE_BYTES:
            self._drop(
                found,
                f"{name}: larger than a recorded file may be ({MAX_FILE_BYTES // 1024**2} MiB); dropped",
            )
            return
        assert found.fd is not None
        os.write(found.fd, raw)
        found.size += len(raw)
        self._bytes[index] = total

    def take(self, index: int, named: list[str]) -> tuple[list[str], list[str]]:
        """The files episode `index` named in its result that arrived whole and hold what they say, and a line
        a problem for the rest. What is taken is forgotten here (its files stay, for the caller)."""
        kept: list[str] = []
        problems: list[str] = []
        for name in named:
            found = self.files.pop(name, None)
            if found is None and SCENE_FILE.fullmatch(name) and (self.target / name).is_file():
                kept.append(name)  # sent whole and checked for an episode before
                continue
            if found is None:
                problems.append(f"{name}: named by the episode but never sent; dropped")
                continue
            self._close(found)
            if found.problem is not None:
                problems.append(found.problem)
                continue
            if not found.whole:
                self._drop(found, f"{name}: cut short; dropped")
                problems.append(found.problem or "")
                continue
            problem = _checked(found.path)
            if problem is not None:
                self._drop(found, f"{name}: {problem}; dropped")
                problems.append(found.problem or "")
                continue
            if found.final is not None:
                os.replace(found.path, found.final)
            kept.append(name)
        for name in [n for n in self.files if _index(n) == index]:  # sent, but not named by the result
            self._drop(self.files.pop(name), "")
        self._bytes.pop(index, None)
        self._bytes.pop(-1, None)  # scenes', counted while they arrive
        return kept, problems

    def discard(self) -> None:
        """Drop every file not taken (the box died mid-episode)."""
        for found in self.files.values():
            self._drop(found, "")
        self.files.clear()
        self._bytes.clear()

    def _open(self, name: str, playing: set[int]) -> _File:
        problem = _name_problem(name, playing)
        if problem is not None:
            raise Abuse(problem)
        parts = PurePosixPath(name).parts
        if len(parts) == 2:  # a scene
            final = self.target / name
            final.parent.mkdir(parents=True, exist_ok=True)
            path = final.with_name(f"{final.name}.{next(_ARRIVALS)}.arriving")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            return _File(path, fd, final)
        folder = episode_folder(self.target, int(parts[1]))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / parts[2]
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # an earlier attempt's, in the platform's own folder
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        return _File(path, fd)

    @staticmethod
    def _close(found: _File) -> None:
        if found.fd is not None:
            with contextlib.suppress(OSError):
                os.close(found.fd)
            found.fd = None

    def _drop(self, found: _File, problem: str) -> None:
        self._close(found)
        found.problem = found.problem or problem or None
        found.whole = False
        with contextlib.suppress(OSError):
            found.path.unlink()


def _index(name: str) -> int:
    parts = PurePosixPath(name).parts
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else -1


def _name_problem(name: str, playing: set[int]) -> str | None:
    if SCENE_FILE.fullmatch(name):
        return None
    parts = PurePosixPath(name).parts
    if len(parts) != 3 or parts[0] != "episodes" or not re.fullmatch(r"[0-9]{6}", parts[1]):
        return f"{name!r}: a recorded file is episodes/<index>/<file>"
    if int(parts[1]) not in playing:
        return f"{name!r}: a file of an episode the box is not playing"
    file = parts[2]
    if not FILE_NAME.fullmatch(file) or not (file.endswith(VIDEO_SUFFIX) or file in (TRAJECTORY, REPLAY)):
        return f"{name!r}: a recorded file is a camera's video (.mp4), {TRAJECTORY} or {REPLAY}"
    return None


def _checked(path: Path) -> str | None:
    """What is wrong with a file that arrived whole, or None: a video's structure, a trajectory's gzip, a
    replay read back, a scene's magic and sum."""
    if path.name.endswith(".arriving"):
        data = path.read_bytes()
        if not data.startswith(GLB_MAGIC):
            return "not a glTF binary"
        if hashlib.sha256(data).hexdigest() != path.name.split(".", 1)[0]:
            return "its sha256 is not its name"
        return None
    if path.name == REPLAY:
        try:
            replay_format.read(path)
        except replay_format.NotAReplay as wrong:
            return f"not a 3D replay ({wrong})"
        return None
    if path.name.endswith(VIDEO_SUFFIX):
        try:
            mp4.inspect(path)
        except mp4.NotAVideo as wrong:
            return f"not an MP4 video ({wrong})"
        return None
    with open(path, "rb") as handle:
        if handle.read(2) != GZIP_MAGIC:
            return "not gzip"
    return None
