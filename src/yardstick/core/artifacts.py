"""A submission's outputs: where they are kept, the signed links that hand them out, and their paging.

Every object a run writes (`result.json`, `attempts/<n>/episodes/<index>/record.json`, logs, videos) is
kept under a *key*: a relative POSIX path read under the submission's own folder, so
`episodes/0000/meta.json` names the same object whichever store holds the run. The submitter holds no
credential for the store; the gateway lists keys with `submissions.artifacts` and hands each one out as
a signed, expiring URL (`UrlSigner`) that the gateway itself serves.

- `ArtifactStore` is the small protocol the platform writes and reads through; `LocalArtifactStore`
  keeps objects in a directory (`<root>/<submission hex id>/<key>`), written atomically.
- `UrlSigner` mints `/v1/artifacts/<submission hex>/<key>?expires=<unix>&sig=<hex>` and checks one.
- `page` is the contract's paging, pure: key order, `prefix`, `after` exclusive, `limit` clamped, and
  `next` the LAST key returned (absent on the last page).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import tempfile
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import BinaryIO, Literal, Protocol, runtime_checkable
from urllib.parse import quote, urlencode

# The path the gateway serves signed links under; its route is `ARTIFACTS_PATH + "/{submission}/{key:path}"`.
ARTIFACTS_PATH = "/v1/artifacts"

# The `artifacts.key` column is String(500): a longer key could be written here but never recorded.
MAX_KEY_CHARS = 500
# Most filesystems cap one name at 255 bytes.
MAX_SEGMENT_BYTES = 255

# Submission ids are the contract's Id64: 0 < id < 2**63, bare lowercase hex on the wire.
_ID_LIMIT = 1 << 63
_SUBMISSION_HEX = re.compile(r"[1-9a-f][0-9a-f]{0,15}")
_EXPIRES = re.compile(r"[0-9]{1,12}")
_SIG = re.compile(r"[0-9a-f]{64}")
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
    if not 0 < submission_id < _ID_LIMIT:
        raise ValueError(f"submission_id must be in (0, 2**63), not {submission_id}")
    return format(submission_id, "x")


class ArtifactNotFound(LookupError):
    """No object under that key for that submission (the gateway answers 404)."""


# --- stores -----------------------------------------------------------------------------------------


@runtime_checkable
class ArtifactStore(Protocol):
    """Where a submission's objects are kept.

    Deliberately small, so an S3-compatible store can plug in later with the same four calls (`put` as
    PutObject, `open` as GetObject's body, `exists` as HeadObject, `keys` as ListObjectsV2 under the
    submission's prefix). The content type is recorded by the caller in the `artifacts` table; a store
    may keep it too (S3 as object metadata), the local store does not need it.
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

    def keys(self, submission_id: int) -> list[tuple[str, int]]:
        """Every `(key, size)` of one submission, in key order (empty when it wrote nothing)."""
        ...


class LocalArtifactStore:
    """Objects in a local directory: `<root>/<submission hex id>/<key>`.

    A `put` writes a temporary file under `<root>/.tmp`, syncs it and renames it into place, so a
    reader sees the old object or the new one, never a part; a replaced key is replaced whole. Folders
    are made as needed. `path` gives the file itself, for a gateway that serves it directly.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def folder(self, submission_id: int) -> Path:
        return self.root / submission_hex(submission_id)

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

    def keys(self, submission_id: int) -> list[tuple[str, int]]:
        folder = self.folder(submission_id)
        found: list[tuple[str, int]] = []
        for dirpath, _dirs, files in os.walk(folder):  # symlinked folders are not followed
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


# --- signed links -----------------------------------------------------------------------------------

RefusalReason = Literal["malformed", "bad signature", "expired", "too far ahead"]


class ArtifactUrlRefused(Exception):
    """A signed artifact link that is not honoured; `reason` says why (the gateway answers 403).

    - `malformed`: a part is not in the form the signer writes (id, key, expiry or signature);
    - `bad signature`: the signature does not match the id, key and expiry (anything tampered with);
    - `expired`: the expiry has passed;
    - `too far ahead`: correctly signed, but valid for longer than the signer's ttl (plus skew) allows,
      which no signer of this configuration mints (a leaked secret, or a link from a laxer config).
    """

    def __init__(self, reason: RefusalReason, detail: str = "") -> None:
        super().__init__(f"artifact link refused: {reason}" + (f" ({detail})" if detail else ""))
        self.reason: RefusalReason = reason


class UrlSigner:
    """Mints and checks signed, expiring artifact links.

    `sig` is HMAC-SHA256(secret, f"{submission hex}\\n{key}\\n{expires}") in lowercase hex. Neither an id
    nor a key can hold a newline, so the signed message names exactly one (id, key, expiry). The secret
    comes from the caller (see `load_secret`); it never appears in a link or a message.
    """

    def __init__(
        self,
        secret: bytes,
        *,
        ttl_s: int = 3600,
        skew_s: int = 60,
        clock: Callable[[], float] = time.time,
        path: str = ARTIFACTS_PATH,
    ) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ValueError("secret must be at least 16 bytes")
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, int) or ttl_s <= 0:
            raise ValueError(f"ttl_s must be a positive whole number of seconds, not {ttl_s!r}")
        if isinstance(skew_s, bool) or not isinstance(skew_s, int) or skew_s < 0:
            raise ValueError(f"skew_s must be a whole number of seconds >= 0, not {skew_s!r}")
        self._secret = secret
        self.ttl_s = ttl_s
        self.skew_s = skew_s
        self.clock = clock
        self.path = path.rstrip("/")

    def __repr__(self) -> str:  # never the secret
        return f"UrlSigner(ttl_s={self.ttl_s}, skew_s={self.skew_s}, path={self.path!r})"

    def _sig(self, sub_hex: str, key: str, expires: str) -> str:
        message = f"{sub_hex}\n{key}\n{expires}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def sign(
        self, submission_id: int, key: str, *, now: float | None = None, base_url: str | None = None
    ) -> str:
        """`<path>/<submission hex>/<key, percent-encoded per segment>?expires=<unix>&sig=<hex>`.

        With `base_url` (say, the request's own base), the link is absolute, as the contract's examples are.
        """
        sub_hex = submission_hex(submission_id)
        validate_key(key)
        moment = self.clock() if now is None else now
        expires = str(int(moment) + self.ttl_s)
        quoted = "/".join(quote(segment, safe="") for segment in key.split("/"))
        query = urlencode({"expires": expires, "sig": self._sig(sub_hex, key, expires)})
        link = f"{self.path}/{sub_hex}/{quoted}?{query}"
        return base_url.rstrip("/") + link if base_url else link

    def verify(
        self, submission_hex: str, key: str, expires: str, sig: str, *, now: float | None = None
    ) -> None:
        """Return if the link is honoured, else raise ArtifactUrlRefused.

        `key` is the decoded key (the route's path parameter). The signature is checked before the clock,
        in constant time, so a tampered link reads `bad signature` whatever part was changed.
        """
        if (
            not isinstance(submission_hex, str)
            or not _SUBMISSION_HEX.fullmatch(submission_hex)
            or int(submission_hex, 16) >= _ID_LIMIT
        ):
            raise ArtifactUrlRefused("malformed", "submission id is not a bare lowercase hex id below 2**63")
        try:
            validate_key(key)
        except (TypeError, ValueError) as exc:
            raise ArtifactUrlRefused("malformed", str(exc)) from None
        if not isinstance(expires, str) or not _EXPIRES.fullmatch(expires):
            raise ArtifactUrlRefused("malformed", "expires is not a unix time in seconds")
        if not isinstance(sig, str) or not _SIG.fullmatch(sig):
            raise ArtifactUrlRefused("malformed", "sig is not 64 lowercase hex digits")
        if not hmac.compare_digest(self._sig(submission_hex, key, expires), sig):
            raise ArtifactUrlRefused("bad signature")
        moment = self.clock() if now is None else now
        expiry = int(expires)
        if moment >= expiry:
            raise ArtifactUrlRefused("expired")
        if expiry > moment + self.ttl_s + self.skew_s:
            raise ArtifactUrlRefused("too far ahead", f"valid for more than {self.ttl_s}s")


def load_secret(path: Path) -> bytes:
    """The signing secret kept at `path` (hex text, mode 0600), made once with 32 random bytes if absent.

    Creation is atomic and race-free: the file appears whole (a link from a finished temporary file) and
    two processes starting at once end up with the same secret.
    """
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        try:
            with os.fdopen(fd, "w") as out:  # mkstemp makes it 0600
                out.write(secrets.token_hex(32) + "\n")
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):  # another process won: use theirs
                os.link(tmp_name, path)
        finally:
            os.unlink(tmp_name)
    text = path.read_text().strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{path}: the artifact signing secret must be hex text") from None
    if len(secret) < 16:
        raise ValueError(f"{path}: the artifact signing secret must be at least 16 bytes (32 hex digits)")
    return secret


# --- paging -----------------------------------------------------------------------------------------


def page(
    entries: Sequence[tuple[str, int]],
    *,
    prefix: str | None,
    after: str | None,
    limit: int | None,
    cap: int = 1000,
    default: int = 100,
) -> tuple[list[tuple[str, int]], str | None]:
    """One page of `(key, size)` entries, and the `next` to pass as `after` for the page after it.

    Entries are taken in key order (Python's string order is UTF-8 byte order, as S3 lists), kept to
    those starting with `prefix`, strictly after `after` (which need not be a key that exists), at most
    `limit` of them (`default` when None, clamped to `cap`). `next` is the LAST key of this page when
    more remain, else None: `after` is exclusive, so passing it back resumes at the first unseen key.
    """
    if cap < 1:
        raise ValueError(f"cap must be at least 1, not {cap}")
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit must be a whole number above 0, not {limit!r}")
    size = min(default if limit is None else limit, cap)
    if size < 1:
        raise ValueError(f"default must be at least 1, not {default}")
    rows = sorted(e for e in entries if prefix is None or e[0].startswith(prefix))
    keys = [key for key, _ in rows]
    for earlier, later in pairwise(keys):
        if earlier == later:
            raise ValueError(f"entries list the key {earlier!r} twice")
    start = 0 if after is None else bisect_right(keys, after)
    chunk = rows[start : start + size]
    more = start + size < len(rows)
    return chunk, (chunk[-1][0] if more and chunk else None)
