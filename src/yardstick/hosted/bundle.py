"""A code bundle, as an upload carries it: `{format: "tar.gz", data: base64, sha256: hex of the decoded
bytes}`.

`unpack` checks it and lays its files out in a folder of their own, which becomes the code's import root;
anything unsafe or malformed is refused with `BundleRefused(field, rule)` and leaves nothing on disk: the
files go into a temporary folder beside the destination, renamed into place only once every member passed.
The same bytes give the same folder (callers key a version's folder by its sha256), so unpacking them
again returns what is there. `pack` makes the bundle the Sequences SDK makes of a folder (sorted members,
mtime 0, owner 0, mode 0o644, PAX, gzip mtime 0), for tests and for code the platform ships itself.

Nothing of a member's metadata is trusted: no links, devices or fifos; names that stay inside the folder
and within the filesystem's limits (UTF-8, each part at most 255 bytes, the whole path at most 4000); modes
reduced to 0o644 (0o755 when any execute bit was set) and 0o755 for folders; limits on the count of files,
on each file and on the whole once unpacked, so a small upload cannot fill a disk (a zip bomb).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from yardstick.hosted.errors import BundleRefused

FORMAT: Final = "tar.gz"
MAX_CODE_BUNDLE_BYTES: Final = 8 * 1024 * 1024  # decoded, as the Sequences contract bounds it
MAX_FILES: Final = 10_000
MAX_FILE_BYTES: Final = 32 * 1024 * 1024
MAX_UNPACKED_BYTES: Final = 64 * 1024 * 1024
MAX_NAME_BYTES: Final = 1024
# A filesystem's own limits: a part of a path (NAME_MAX), and the whole path where it is unpacked (PATH_MAX,
# with room left for the version's folder around it).
MAX_PART_BYTES: Final = 255
MAX_PATH_BYTES: Final = 4000
MAX_DEPTH: Final = 64
# Base64 of MAX_CODE_BUNDLE_BYTES: a longer text is refused before it is decoded.
_MAX_DATA_CHARS: Final = 4 * -(-MAX_CODE_BUNDLE_BYTES // 3)
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_CHUNK: Final = 64 * 1024
# The fields of the upload, as a refusal names them.
F_FORMAT, F_DATA, F_SHA256 = "code.format", "code.data", "code.sha256"


@dataclass(frozen=True)
class Bundle:
    """An unpacked bundle: its folder (the import root), how many files and bytes it holds, and the sha256
    of the bytes it came from."""

    folder: Path
    files: int
    size: int
    sha256: str


def unpack(format: str, data_b64: str, sha256: str, dest: Path) -> Bundle:
    """Check the bundle and unpack it into `dest` (which must not exist yet, or must hold these same bytes
    already). Raises BundleRefused naming the field and the rule; on any refusal nothing is left on disk."""
    raw = decode(format, data_b64, sha256)
    dest = Path(dest)
    found = _existing(dest, sha256)
    if found is not None:
        return found
    dest.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".unpacking", dir=dest.parent))
    try:
        files, size = _extract(raw, temporary)
        os.chmod(temporary, 0o755)
        bundle = Bundle(folder=dest, files=files, size=size, sha256=sha256)
        # The record goes down first: a folder that exists always has one, even after a crash.
        _record(dest).write_text(json.dumps({"sha256": sha256, "files": files, "size": size}))
        try:
            os.rename(temporary, dest)
        except OSError:
            # Another process unpacked the same bytes first: theirs stands.
            found = _existing(dest, sha256) if dest.exists() else None
            if found is None:
                _record(dest).unlink(missing_ok=True)
                raise
            shutil.rmtree(temporary, ignore_errors=True)
            return found
        return bundle
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def decode(format: str, data_b64: str, sha256: str) -> bytes:
    """The bundle's bytes, once its format, base64, size and sha256 are right."""
    if format != FORMAT:
        raise BundleRefused(F_FORMAT, f"a code bundle is {FORMAT!r}, not {format!r}")
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise BundleRefused(F_SHA256, "the sha256 of the decoded bytes is 64 lower-case hex digits")
    if not isinstance(data_b64, str):
        raise BundleRefused(F_DATA, f"base64 text, not {type(data_b64).__name__}")
    if len(data_b64) > _MAX_DATA_CHARS:
        raise BundleRefused(F_DATA, f"decodes to more than {MAX_CODE_BUNDLE_BYTES} bytes, the limit")
    try:
        raw = base64.b64decode(data_b64, validate=True)
    except (binascii.Error, ValueError):
        raise BundleRefused(F_DATA, "not valid base64 (standard alphabet, padded, no line breaks)") from None
    if len(raw) > MAX_CODE_BUNDLE_BYTES:
        raise BundleRefused(F_DATA, f"decodes to {len(raw)} bytes; the limit is {MAX_CODE_BUNDLE_BYTES}")
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise BundleRefused(F_SHA256, "does not match the sha256 of the decoded data")
    if raw[:2] != b"\x1f\x8b":
        raise BundleRefused(F_DATA, "not gzip: a code bundle is a gzip-compressed tar")
    return raw


def tree_sha256(folder: Path) -> str:
    """The hash of the files under `folder` as the Sequences SDK names a code tree (what `seq deploy` prints
    as "tree sha256" and checks a version's source against): sha256 over sorted `path<TAB>size<TAB>sha256`
    lines."""
    root = Path(folder)
    lines = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            name = path.relative_to(root).as_posix()
            lines.append((name.encode(), f"{name}\t{path.stat().st_size}\t{_file_sha256(path)}\n"))
    return hashlib.sha256("".join(line for _, line in sorted(lines)).encode()).hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def pack(folder: Path) -> tuple[str, str, str]:
    """(format, base64 data, sha256) of a deterministic bundle of every file under `folder`."""
    raw = pack_bytes(folder)
    return FORMAT, base64.b64encode(raw).decode("ascii"), hashlib.sha256(raw).hexdigest()


def pack_bytes(folder: Path, top: str = "") -> bytes:
    """A deterministic tar.gz of every file under `folder` (names sorted, times and owners zeroed), under a
    top folder `top` when one is named."""
    root = Path(folder)
    files = sorted((path.relative_to(root).as_posix(), path) for path in root.rglob("*") if path.is_file())
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, path in files:
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = path.stat().st_size
            info.mode, info.mtime, info.uid, info.gid, info.uname, info.gname = 0o644, 0, 0, 0, "", ""
            with path.open("rb") as source:
                tar.addfile(info, source)
    return buffer.getvalue()


def _record(dest: Path) -> Path:
    return dest.with_name(dest.name + ".bundle.json")


def _existing(dest: Path, sha256: str) -> Bundle | None:
    """The bundle already at `dest`, when these bytes made it; FileExistsError when other bytes did."""
    if not dest.exists():
        return None
    try:
        record = json.loads(_record(dest).read_text())
    except (OSError, ValueError):
        record = {}
    if record.get("sha256") != sha256:
        raise FileExistsError(
            f"{dest} holds another bundle than {sha256}: key a version's folder by its sha256"
        )
    return Bundle(folder=dest, files=int(record["files"]), size=int(record["size"]), sha256=sha256)


class _Counted(io.RawIOBase):
    """The decompressed stream, refused once it passes what an archive of the limits can hold: a few
    members' headers beyond MAX_UNPACKED_BYTES of content."""

    def __init__(self, source: gzip.GzipFile, limit: int) -> None:
        self._source = source
        self._limit = limit
        self.read_so_far = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._source.read(len(buffer))
        self.read_so_far += len(data)
        if self.read_so_far > self._limit:
            raise BundleRefused(
                F_DATA, f"unpacks to more than {MAX_UNPACKED_BYTES} bytes, the limit (a compression bomb?)"
            )
        buffer[: len(data)] = data
        return len(data)


def _extract(raw: bytes, into: Path) -> tuple[int, int]:
    """Write every member of the gzip tar `raw` under `into`; (files, bytes)."""
    # Headers (512 bytes a member, a PAX record each) on top of the content limit.
    stream = _Counted(gzip.GzipFile(fileobj=io.BytesIO(raw)), MAX_UNPACKED_BYTES + 2048 * (MAX_FILES + 8))
    files = size = 0
    seen: set[str] = set()
    try:
        with tarfile.open(fileobj=io.BufferedReader(stream, _CHUNK), mode="r|") as tar:
            for member in tar:
                name = _member_name(member)
                if name in seen:
                    raise BundleRefused(F_DATA, f"member {name!r} appears twice")
                seen.add(name)
                target = into.joinpath(*PurePosixPath(name).parts)
                if len(str(target).encode()) > MAX_PATH_BYTES:
                    raise BundleRefused(
                        F_DATA, f"member {name!r}: its path unpacked is longer than {MAX_PATH_BYTES} bytes"
                    )
                if member.isdir():
                    _folder(target, name)
                    continue
                files += 1
                if files > MAX_FILES:
                    raise BundleRefused(F_DATA, f"holds more than {MAX_FILES} files, the limit")
                if member.size > MAX_FILE_BYTES:
                    raise BundleRefused(
                        F_DATA, f"member {name!r} is {member.size} bytes; a file is at most {MAX_FILE_BYTES}"
                    )
                size += member.size
                if size > MAX_UNPACKED_BYTES:
                    raise BundleRefused(
                        F_DATA,
                        f"unpacks to more than {MAX_UNPACKED_BYTES} bytes, the limit (a compression bomb?)",
                    )
                _write(tar, member, name, target)
    except BundleRefused:
        raise
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise BundleRefused(F_DATA, f"not a readable gzip tar archive ({exc})") from None
    except OSError as exc:  # a name the filesystem refuses all the same
        raise BundleRefused(F_DATA, f"a member cannot be written as it is named ({exc.strerror})") from None
    if not seen:
        raise BundleRefused(F_DATA, "the archive is empty: a bundle holds the code it deploys")
    return files, size


def _member_name(member: tarfile.TarInfo) -> str:
    raw = member.name
    if member.issym() or member.islnk():
        raise BundleRefused(F_DATA, f"member {raw!r} is a link; links (symbolic or hard) are refused")
    if not (member.isfile() or member.isdir()) or member.type == tarfile.GNUTYPE_SPARSE:
        raise BundleRefused(
            F_DATA, f"member {raw!r} is a device, fifo or special file; only files and folders are taken"
        )
    if not raw or "\x00" in raw or len(raw.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise BundleRefused(F_DATA, f"member {raw!r}: a name is 1 to {MAX_NAME_BYTES} bytes, no NUL")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise BundleRefused(F_DATA, f"member {raw!r}: a name is UTF-8 text") from None
    if raw.startswith("/") or "\\" in raw or re.match(r"[A-Za-z]:", raw):
        raise BundleRefused(F_DATA, f"member {raw!r} has an absolute path; names are relative to the folder")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BundleRefused(F_DATA, f"member {raw!r} climbs out of the folder ('..' is refused)")
    if not parts:
        raise BundleRefused(F_DATA, f"member {raw!r} names the folder itself")
    if len(parts) > MAX_DEPTH:
        raise BundleRefused(F_DATA, f"member {raw!r} is nested deeper than {MAX_DEPTH} folders")
    for part in parts:
        if len(part.encode()) > MAX_PART_BYTES:
            raise BundleRefused(
                F_DATA,
                f"member {raw!r}: each part of a name is at most {MAX_PART_BYTES} bytes (the filesystem's)",
            )
    return "/".join(parts)


def _folder(target: Path, name: str) -> None:
    try:
        target.mkdir(mode=0o755, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise BundleRefused(F_DATA, f"member {name!r} collides with another member") from None


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, name: str, target: Path) -> None:
    _folder(target.parent, name)
    source = tar.extractfile(member)
    if source is None:  # pragma: no cover - a regular member always has a file
        raise BundleRefused(F_DATA, f"member {name!r} cannot be read")
    executable = bool(member.mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    try:
        # O_EXCL and O_NOFOLLOW: nothing written here ever lands through a link or over another member.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except (FileExistsError, IsADirectoryError, NotADirectoryError):
        raise BundleRefused(F_DATA, f"member {name!r} collides with another member") from None
    with os.fdopen(fd, "wb") as out:
        written = 0
        while chunk := source.read(_CHUNK):
            written += len(chunk)
            out.write(chunk)
        if written != member.size:
            raise BundleRefused(F_DATA, f"member {name!r} is truncated")
    os.chmod(target, 0o755 if executable else 0o644)
