"""A submission's outputs: their keys, and the stores that keep them (the signed links that hand them out are
`core.signing`'s, their paging `core.paging`'s).

Every object a run writes (`result.json`, `attempts/<n>/episodes/<index>/record.json`, logs, videos) is
kept under a *key*: a relative POSIX path read under the submission's own folder, so
`episodes/0000/meta.json` names the same object whichever store holds the run. The submitter holds no
credential for the store; the gateway lists keys with `submissions.artifacts` and hands each one out as
a signed, expiring URL (`UrlSigner`) that the gateway itself serves.

- `ArtifactStore` is the small protocol the platform writes and reads through; `LocalArtifactStore`
  keeps objects in a directory (`<root>/<submission hex id>/<key>`), written atomically.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable

# The `artifacts.key` column is String(500): a longer key could be written here but never recorded.
MAX_KEY_CHARS = 500
# Most filesystems cap one name at 255 bytes.
MAX_SEGMENT_BYTES = 255

# Submission ids are the contract's Id64: 0 < id < 2**63, bare lowercase hex on the wire.
ID_LIMIT = 1 << 63
_CONTROL = re.compile(r"[\x01-\x1f\x7f]")

# Temporary files live here, beside the submission folders (same filesystem, so the final rename is
# atomic) but never inside one, so a half-written object is never listed. A submission folder is hex,
# never a dot name, so the two cannot meet.
_TMP_DIR = ".tmp"


# --- keys and ids -----------------------------------------------------------------------------------


def validate_key(key: str, *, max_chars: int = MAX_KEY_CHARS, what: str = "artifact key") -> str:
    """Return `key` if it is a canonical relative POSIX path, else raise ValueError naming it and the rule.

    Refused: empty; absolute; `..` or `.` segments; empty segments (a leading, trailing or doubled `/`);
    a backslash; NUL or another control character; text that is not valid UTF-8; more than `max_chars`
    (500) characters; a segment over 255 bytes. One object therefore has exactly one spelling, and no key
    can name anything outside its submission's folder. `what` names the key in the message (a volume's
    file paths are held to the same rules, at their own length).
    """
    if not isinstance(key, str):
        raise TypeError(f"{what} must be a str, not {type(key).__name__}")

    def refuse(rule: str) -> ValueError:
        return ValueError(f"{what} {key!r}: {rule}")

    if not key:
        raise refuse("must not be empty")
    if "\x00" in key:
        raise refuse("must not contain NUL")
    if _CONTROL.search(key):
        raise refuse("must not contain control characters")
    if "\\" in key:
        raise refuse("must not contain a backslash (keys are POSIX paths, '/' separated)")
    if key.startswith("/"):
        raise refuse("must be relative, not absolute (no leading '/')")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise refuse("must be valid UTF-8 text") from None
    if len(key) > max_chars:
        raise refuse(f"must be at most {max_chars} characters, not {len(key)}")
    for segment in key.split("/"):
        if segment == "..":
            raise refuse("must not contain '..' segments (it would leave its folder)")
        if segment == ".":
            raise refuse("must not contain '.' segments")
        if not segment:
            raise refuse("must not contain empty segments (no trailing or doubled '/')")
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise refuse(f"each '/'-separated segment must be at most {MAX_SEGMENT_BYTES} bytes in UTF-8")
    return key


def submission_hex(submission_id: int) -> str:
    """The wire (and folder) form of a submission id: bare lowercase hex. ValueError outside (0, 2**63)."""
    if isinstance(submission_id, bool) or not isinstance(submission_id, int):
        raise TypeError(f"submission_id must be an int, not {type(submission_id).__name__}")
    if not 0 < submission_id < ID_LIMIT:
        raise ValueError(f"submission_id must be in (0, 2**63), not {submission_id}")
    return format(submission_id, "x")


class ArtifactNotFound(LookupError):
    """No object under that key for that submission (the gateway answers 404)."""


# --- stores -----------------------------------------------------------------------------------------


@runtime_checkable
class ArtifactStore(Protocol):
    """Where a submission's objects are kept.

    Deliberately small, so an S3-compatible store (`s3_artifacts`) plugs in with the same calls (`put` as
    PutObject, `open` as GetObject's body, `exists` as HeadObject, `keys` as ListObjectsV2 under the
    submission's prefix, `presigned` as a presigned GET). The content type is recorded by the caller in the
    `artifacts` table; a store may keep it too (S3 as object metadata), the local store does not need it.
    """

    def put(
        self, submission_id: int, key: str, data: bytes, content_type: str, *, durable: bool = True
    ) -> int:
        """Write (or replace) one object, all or nothing; return its size in bytes."""
        ...

    def open(self, submission_id: int, key: str) -> BinaryIO:
        """A readable binary stream of one object; ArtifactNotFound when there is none."""
        ...

    def exists(self, submission_id: int, key: str) -> bool: ...

    def location(self, submission_id: int, prefix: str) -> str:
        """Where the objects under `prefix` are, as an address its owner reads them at (a `file://` folder,
        an `s3://` prefix): a rig plan's answer names it rather than signing links."""
        ...

    def keys(self, submission_id: int, prefix: str = "") -> list[tuple[str, int]]:
        """Every `(key, size)` of one submission under `prefix` (a folder of keys, "logs/"; all: ""), in key
        order (empty when it wrote nothing there)."""
        ...

    def presigned(self, submission_id: int, key: str, *, media_type: str | None = None) -> str | None:
        """A link to one object that its store serves itself, expiring (S3's presigned GET); None for a
        store the platform serves (the local folder: its links are the gateway's, signed by the install)."""
        ...


class LocalArtifactStore:
    """Objects in a local directory: `<root>/<submission hex id>/<key>`.

    A `put` writes a temporary file under `<root>/.tmp`, syncs it and renames it into place, so a
    reader sees the old object or the new one, never a part; a replaced key is replaced whole. Folders
    are made as needed. `path` gives the file itself, for a gateway that serves it directly.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __str__(self) -> str:
        return f"the folder {self.root}"

    def folder(self, submission_id: int) -> Path:
        return self.root / submission_hex(submission_id)

    def location(self, submission_id: int, prefix: str) -> str:
        return (self.folder(submission_id).resolve() / validate_key(prefix.rstrip("/"))).as_uri() + "/"

    def path(self, submission_id: int, key: str) -> Path:
        """Where `key` lives (whether or not it exists yet). ValueError for a bad key or one that escapes."""
        folder = self.folder(submission_id)
        target = folder / validate_key(key)
        # The key's spelling cannot leave the folder, but a symlink planted inside it could: resolve both.
        if not target.resolve().is_relative_to(folder.resolve()):
            raise ValueError(f"artifact key {key!r}: resolves outside the submission's folder")
        return target

    def put(
        self, submission_id: int, key: str, data: bytes, content_type: str = "", *, durable: bool = True
    ) -> int:
        """`durable` False skips the two fsyncs (the file's and its folder's): still all or nothing for a
        reader, but a power cut may lose it. Right for records the database can rebuild, per episode."""
        target = self.path(submission_id, key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ValueError(
                f"artifact key {key!r}: a leading part of it is already an artifact, so it cannot be a folder"
            ) from None
        if target.is_dir():
            raise ValueError(f"artifact key {key!r}: is already a folder of other artifacts")
        tmp_dir = self.root / _TMP_DIR
        tmp_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=tmp_dir, prefix=f"{submission_hex(submission_id)}-")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                if durable:
                    os.fsync(out.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if durable:
            sync_dir(target.parent)
        return len(data)

    def open(self, submission_id: int, key: str) -> BinaryIO:
        target = self.path(submission_id, key)
        if not target.is_file():
            raise ArtifactNotFound(f"no artifact {key!r} in submission {submission_hex(submission_id)}")
        return target.open("rb")

    def exists(self, submission_id: int, key: str) -> bool:
        return self.path(submission_id, key).is_file()

    def presigned(self, submission_id: int, key: str, *, media_type: str | None = None) -> str | None:
        return None

    def keys(self, submission_id: int, prefix: str = "") -> list[tuple[str, int]]:
        folder = self.folder(submission_id)
        if prefix:
            validate_key(prefix.rstrip("/"))  # a folder of keys, never a way out of the submission's
        found: list[tuple[str, int]] = []
        # Only the prefix's folder is walked: a run's log files are listed without its videos' folders.
        for dirpath, _dirs, files in os.walk(folder / prefix):  # symlinked folders are not followed
            here = Path(dirpath)
            for name in files:
                file = here / name
                if file.is_symlink() or not file.is_file():
                    continue
                key = file.relative_to(folder).as_posix()
                try:
                    validate_key(key)
                except ValueError:
                    continue  # something that is not ours (put never writes it): not listed, not served
                found.append((key, file.stat().st_size))
        found.sort()
        return found


def sync_dir(folder: Path) -> None:
    """Make a rename durable: fsync its folder (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
