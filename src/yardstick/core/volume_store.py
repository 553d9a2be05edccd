"""Where a volume's files are kept: `VolumeStore`, the artifact store's sibling for volumes, and a local one.

A volume's objects are named as artifacts are (`artifacts.validate_key`: relative POSIX paths, one spelling
each, nothing outside the volume's own space), under the volume's id. What a submission's store has no need
of, a volume's has: its files arrive in pieces, in order, across requests and restarts (`append` at the
offset already held), so the store keeps a partial object per file of an open upload; a commit lays out a
version's files at once (`commit`), each the object an upload sent or a file of an earlier version (held, not
sent again); a worker mounts a version as a folder (`tree`).

An S3-compatible store plugs in behind the same calls (`s3_volumes.S3VolumeStore`, chosen with the
install's `--artifacts s3://…`): `append` as UploadPart of a multipart upload, `held` as the parts' sizes,
`digest` completing it and reading it back once, `commit` as CopyObject, `tree` as a download into a
worker's local cache.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

from yardstick.core.artifacts import submission_hex, sync_dir, validate_key
from yardstick.core.settings import Settings

# A file's path inside a volume: the contract's 1024 characters, each segment a file name (255 bytes).
MAX_PATH_CHARS = 1024


class VolumeFilesMissing(LookupError):
    """A version (or one of its files) the store does not hold: the volume was deleted, or its folder lost."""


@dataclass(frozen=True)
class FromUpload:
    """A file of the new version: the object an upload sent for its file at `position`."""

    upload_id: int
    position: int


@dataclass(frozen=True)
class FromVersion:
    """A file of the new version: the same file of an earlier version (`version_id`), unchanged."""

    version_id: int
    path: str


@dataclass(frozen=True)
class Placed:
    """Where one file of a version comes from."""

    path: str
    source: FromUpload | FromVersion


@runtime_checkable
class VolumeStore(Protocol):
    """A volume's objects: the partial files of its open uploads, and its versions' files."""

    def held(self, volume_id: int, upload_id: int, position: int) -> int:
        """How many bytes of an upload's file have arrived (0 before the first)."""
        ...

    def append(self, volume_id: int, upload_id: int, position: int, offset: int, data: bytes) -> int:
        """Write `data` at `offset` when that is exactly what is held so far; return what is held after (so a
        caller whose offset was not the held one learns where to go on from, and nothing is written)."""
        ...

    def restart(self, volume_id: int, upload_id: int, position: int) -> None:
        """Forget what arrived of one file (a new session sends it from its first byte)."""
        ...

    def digest(self, volume_id: int, upload_id: int, position: int) -> tuple[int, str]:
        """The size and base64 md5 of what arrived of one file."""
        ...

    def discard(self, volume_id: int, upload_id: int) -> None:
        """Drop everything an upload sent (it was committed, or superseded)."""
        ...

    def commit(self, volume_id: int, version_id: int, files: Sequence[Placed]) -> None:
        """Lay out a version's files, all or nothing. The caller has checked each upload's object is whole (an
        empty file may have none)."""
        ...

    def tree(self, volume_id: int, version_id: int) -> Path:
        """A local folder holding exactly the version's files, for a box to mount read-only."""
        ...

    def open(self, volume_id: int, version_id: int, path: str) -> BinaryIO:
        """One file of a version; VolumeFilesMissing when there is none."""
        ...

    def drop_version(self, volume_id: int, version_id: int) -> None: ...

    def drop(self, volume_id: int) -> None:
        """Remove every object of a volume."""
        ...


def file_key(path: str) -> str:
    """`path` if it can name a file of a volume, else ValueError saying the rule it breaks."""
    return validate_key(path, max_chars=MAX_PATH_CHARS, what="file path")


class LocalVolumeStore:
    """A volume's objects in a local folder, `<root>/<volume hex id>/`: `uploads/<upload hex>/<position>` the
    partial files, `versions/<version hex>/<path>` each version's tree. A version's files are hard links to
    the objects that made them, so a file held from an earlier version costs no second copy."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _volume(self, volume_id: int) -> Path:
        return self.root / submission_hex(volume_id)

    def _partial(self, volume_id: int, upload_id: int, position: int) -> Path:
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ValueError(f"position must be a whole number >= 0, not {position!r}")
        return self._volume(volume_id) / "uploads" / submission_hex(upload_id) / str(position)

    def _version(self, volume_id: int, version_id: int) -> Path:
        return self._volume(volume_id) / "versions" / submission_hex(version_id)

    def held(self, volume_id: int, upload_id: int, position: int) -> int:
        try:
            return self._partial(volume_id, upload_id, position).stat().st_size
        except FileNotFoundError:
            return 0

    def append(self, volume_id: int, upload_id: int, position: int, offset: int, data: bytes) -> int:
        partial = self._partial(volume_id, upload_id, position)
        partial.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            # Two requests of one session at once (a client's retry racing its first try) must not interleave:
            # the lock makes "is the offset the held size? then write" one step, across gateway processes too.
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size != offset:
                return size
            os.lseek(fd, offset, os.SEEK_SET)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            return offset + len(data)
        finally:
            os.close(fd)  # releases the lock

    def restart(self, volume_id: int, upload_id: int, position: int) -> None:
        self._partial(volume_id, upload_id, position).unlink(missing_ok=True)

    def digest(self, volume_id: int, upload_id: int, position: int) -> tuple[int, str]:
        partial = self._partial(volume_id, upload_id, position)
        if not partial.exists():
            return 0, _md5(b"")
        found = hashlib.md5()
        size = 0
        with partial.open("rb") as stream:
            while block := stream.read(1 << 20):
                found.update(block)
                size += len(block)
        return size, base64.b64encode(found.digest()).decode()

    def discard(self, volume_id: int, upload_id: int) -> None:
        shutil.rmtree(self._volume(volume_id) / "uploads" / submission_hex(upload_id), ignore_errors=True)

    def commit(self, volume_id: int, version_id: int, files: Sequence[Placed]) -> None:
        target = self._version(volume_id, version_id)
        if target.exists():
            raise ValueError(f"version {submission_hex(version_id)} of this volume is already laid out")
        # Built aside (a dot name no version or upload folder has) and renamed into place: a reader sees the
        # whole version or none of it.
        building = target.parent / f".{target.name}-{secrets.token_hex(4)}"
        building.mkdir(parents=True)
        try:
            for placed in files:
                destination = building / file_key(placed.path)
                destination.parent.mkdir(parents=True, exist_ok=True)
                source = self._source(volume_id, placed.source)
                if isinstance(placed.source, FromUpload):
                    if not source.exists():
                        # Nothing arrived: the caller checked that nothing was to (an empty file).
                        source.parent.mkdir(parents=True, exist_ok=True)
                        source.touch()
                    _sync_file(source)  # what arrived was flushed, not synced, chunk by chunk
                elif not source.is_file():
                    raise VolumeFilesMissing(f"{placed.path}: the store holds no bytes of it")
                try:
                    os.link(source, destination)
                except OSError:  # a store spread over filesystems: a copy, then
                    shutil.copyfile(source, destination)
            _sync_tree(building)
            os.replace(building, target)
            sync_dir(target.parent)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise

    def _source(self, volume_id: int, source: FromUpload | FromVersion) -> Path:
        if isinstance(source, FromUpload):
            return self._partial(volume_id, source.upload_id, source.position)
        return self._version(volume_id, source.version_id) / file_key(source.path)

    def tree(self, volume_id: int, version_id: int) -> Path:
        folder = self._version(volume_id, version_id)
        if not folder.is_dir():
            raise VolumeFilesMissing(f"the store holds no files of version {submission_hex(version_id)}")
        return folder

    def open(self, volume_id: int, version_id: int, path: str) -> BinaryIO:
        folder = self.tree(volume_id, version_id)
        file = folder / file_key(path)
        if not file.resolve().is_relative_to(folder.resolve()) or not file.is_file():
            raise VolumeFilesMissing(f"no file {path!r} in this version")
        return file.open("rb")

    def drop_version(self, volume_id: int, version_id: int) -> None:
        shutil.rmtree(self._version(volume_id, version_id), ignore_errors=True)

    def drop(self, volume_id: int) -> None:
        shutil.rmtree(self._volume(volume_id), ignore_errors=True)


def volume_store(settings: Settings) -> VolumeStore:
    """The store an install keeps its volumes in: the bucket its artifacts are in (`--artifacts s3://…`,
    under `volumes/`), else a folder of its data directory (shared with its workers, as its hosted code
    is)."""
    if settings.artifacts_url is not None:
        from yardstick.core.s3_volumes import S3VolumeStore  # boto3 only for an install that uses it

        return S3VolumeStore(settings.artifacts_url, settings.data_dir / "volume-cache")
    return LocalVolumeStore(settings.volume_root)


def _md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(folder: Path) -> None:
    """Make a version's folders durable before it is renamed into place (its files were synced already)."""
    for dirpath, _dirs, _files in os.walk(folder):
        sync_dir(Path(dirpath))
