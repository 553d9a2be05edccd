"""A volume's objects in the install's S3-compatible bucket (`--artifacts s3://bucket/prefix`), beside its
runs': `<prefix>volumes/<volume hex>/`. The `VolumeStore` calls as S3's:

    uploads/<upload hex>/<position>        a file of an open upload: a multipart upload while it arrives,
                                           one object once whole (its digest completes it)
    uploads/<upload hex>/<position>.tail   what arrived past the last part, while it is under S3's 5 MiB
                                           part minimum (the SDK sends 16 MiB chunks; another client may not)
    versions/<version hex>/<path>          a committed version's files (CopyObject from what made them)
    laid/<version hex>                     written last by a commit: a version without it is not laid out

What arrives is held by the bucket alone, never in this process: a gateway restarted mid-file reads what is
held from the multipart upload's parts, and the sender resumes. The bytes still pass through the gateway: the
Sequences SDK speaks a cloud bucket's resumable sessions, which S3 does not, so the gateway speaks them and
writes each chunk as a part. A worker mounts a version from a local copy (`tree`, downloaded once into the
cache folder). Two requests of one session racing (a client's retry) may both write the part at the same
offset: the same bytes, and the commit's md5 refuses anything else.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final, cast

from yardstick.core.artifacts import submission_hex
from yardstick.core.s3_artifacts import S3Url, bucket_errors, is_missing, s3_client
from yardstick.core.volume_store import FromUpload, Placed, VolumeFilesMissing, file_key

__all__ = ["MIN_PART", "S3VolumeStore"]

# S3's least size of a multipart upload's part (all but the last).
MIN_PART: Final = 5 << 20


@dataclass(frozen=True)
class _Arrived:
    """An upload's file as the bucket holds it: its open multipart upload and parts (number, ETag, size),
    the size kept aside past them, and all it holds (a completed file: its object's size)."""

    multipart: str | None
    parts: list[tuple[int, str, int]]
    tail: int
    held: int


class S3VolumeStore:
    def __init__(self, url: str, cache: Path, client: Any | None = None) -> None:
        self.url = S3Url(url)
        self.cache = Path(cache)
        self.client = client if client is not None else s3_client()

    def __str__(self) -> str:
        return f"{self.url}volumes/ at {self.client.meta.endpoint_url}"

    # Keys.

    def _volume(self, volume_id: int) -> str:
        return f"{self.url.prefix}volumes/{submission_hex(volume_id)}/"

    def _partial(self, volume_id: int, upload_id: int, position: int) -> str:
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ValueError(f"position must be a whole number >= 0, not {position!r}")
        return f"{self._volume(volume_id)}uploads/{submission_hex(upload_id)}/{position}"

    def _version(self, volume_id: int, version_id: int) -> str:
        return f"{self._volume(volume_id)}versions/{submission_hex(version_id)}/"

    def _laid(self, volume_id: int, version_id: int) -> str:
        return f"{self._volume(volume_id)}laid/{submission_hex(version_id)}"

    # An upload's files.

    def held(self, volume_id: int, upload_id: int, position: int) -> int:
        key = self._partial(volume_id, upload_id, position)
        with bucket_errors(self, f"how much of {key!r} is held"):
            return self._arrived(key).held

    def append(self, volume_id: int, upload_id: int, position: int, offset: int, data: bytes) -> int:
        key = self._partial(volume_id, upload_id, position)
        with bucket_errors(self, f"a part of {key!r}"):
            arrived = self._arrived(key)
            # Not at the held offset, or whole already (its digest was taken): nothing is written.
            if arrived.held != offset or not data or (arrived.multipart is None and arrived.held):
                return arrived.held
            multipart = arrived.multipart or str(
                self.client.create_multipart_upload(Bucket=self.url.bucket, Key=key)["UploadId"]
            )
            tail = (self._read(key + ".tail") if arrived.tail else b"") + data
            if len(tail) < MIN_PART:  # under a part's minimum: kept aside until more arrives, or the end
                self._put(key + ".tail", tail)
            else:
                self._upload_part(key, multipart, len(arrived.parts) + 1, tail)
                if arrived.tail:
                    self._delete(key + ".tail")
        return offset + len(data)

    def restart(self, volume_id: int, upload_id: int, position: int) -> None:
        key = self._partial(volume_id, upload_id, position)
        with bucket_errors(self, f"a restart of {key!r}"):
            self._abort(key)
            self._delete(key + ".tail")
            self._delete(key)

    def digest(self, volume_id: int, upload_id: int, position: int) -> tuple[int, str]:
        """Completes the file's multipart upload into one object (its last part what is kept aside), then
        reads it back once for its md5."""
        key = self._partial(volume_id, upload_id, position)
        with bucket_errors(self, f"the digest of {key!r}"):
            arrived = self._arrived(key)
            if arrived.multipart is not None:
                parts = [{"PartNumber": n, "ETag": tag} for n, tag, _ in arrived.parts]
                if arrived.tail:
                    tail = self._read(key + ".tail")
                    number = len(parts) + 1
                    tag = self._upload_part(key, arrived.multipart, number, tail)
                    parts.append({"PartNumber": number, "ETag": tag})
                    self._delete(key + ".tail")
                if parts:
                    self.client.complete_multipart_upload(
                        Bucket=self.url.bucket,
                        Key=key,
                        UploadId=arrived.multipart,
                        MultipartUpload={"Parts": parts},
                    )
                else:
                    self._abort(key)
            found, size = hashlib.md5(), 0
            if self._exists(key):
                body = self.client.get_object(Bucket=self.url.bucket, Key=key)["Body"]
                while block := body.read(1 << 20):
                    found.update(block)
                    size += len(block)
        return size, base64.b64encode(found.digest()).decode()

    def discard(self, volume_id: int, upload_id: int) -> None:
        prefix = f"{self._volume(volume_id)}uploads/{submission_hex(upload_id)}/"
        with bucket_errors(self, f"a discard of {prefix!r}"):
            for key in self._multiparts(prefix):
                self._abort(key)
            self._delete_under(prefix)

    # Versions.

    def commit(self, volume_id: int, version_id: int, files: Sequence[Placed]) -> None:
        laid = self._laid(volume_id, version_id)
        target = self._version(volume_id, version_id)
        with bucket_errors(self, f"the commit of version {submission_hex(version_id)}"):
            if self._exists(laid):
                raise ValueError(f"version {submission_hex(version_id)} of this volume is already laid out")
            self._delete_under(target)  # what an earlier commit of it left before it failed
            for placed in files:
                destination = target + file_key(placed.path)
                source = placed.source
                if isinstance(source, FromUpload):
                    origin = self._partial(volume_id, source.upload_id, source.position)
                    if not self._exists(origin):
                        # Nothing arrived: the caller checked that nothing was to (an empty file).
                        self._put(destination, b"")
                        continue
                else:
                    origin = self._version(volume_id, source.version_id) + file_key(source.path)
                    if not self._exists(origin):
                        raise VolumeFilesMissing(f"{placed.path}: the store holds no bytes of it")
                copied = {"Bucket": self.url.bucket, "Key": origin}
                self.client.copy_object(Bucket=self.url.bucket, Key=destination, CopySource=copied)
            self._put(laid, b"")  # last: a reader sees the whole version or none of it

    def tree(self, volume_id: int, version_id: int) -> Path:
        folder = self.cache / submission_hex(volume_id) / submission_hex(version_id)
        if folder.is_dir():
            return folder
        prefix = self._version(volume_id, version_id)
        with bucket_errors(self, f"a download of version {submission_hex(version_id)}"):
            if not self._exists(self._laid(volume_id, version_id)):
                raise VolumeFilesMissing(f"the store holds no files of version {submission_hex(version_id)}")
            building = folder.parent / f".{folder.name}-{secrets.token_hex(4)}"
            building.mkdir(parents=True)
            try:
                for key, _ in self._listed(prefix):
                    local = building / file_key(key[len(prefix) :])
                    local.parent.mkdir(parents=True, exist_ok=True)
                    self.client.download_file(self.url.bucket, key, str(local))
                os.replace(building, folder)
            except FileExistsError:
                shutil.rmtree(building, ignore_errors=True)  # another worker's download landed first
            except OSError as exc:
                shutil.rmtree(building, ignore_errors=True)
                if not folder.is_dir():
                    raise exc from None
            except BaseException:
                shutil.rmtree(building, ignore_errors=True)
                raise
        return folder

    def open(self, volume_id: int, version_id: int, path: str) -> BinaryIO:
        key = self._version(volume_id, version_id) + file_key(path)
        with bucket_errors(self, f"a GET of {path!r}"):
            if not self._exists(self._laid(volume_id, version_id)) or not self._exists(key):
                raise VolumeFilesMissing(f"no file {path!r} in this version")
            return cast(BinaryIO, self.client.get_object(Bucket=self.url.bucket, Key=key)["Body"])

    def drop_version(self, volume_id: int, version_id: int) -> None:
        with bucket_errors(self, f"dropping version {submission_hex(version_id)}"):
            self._delete(self._laid(volume_id, version_id))  # first: no reader takes it for whole
            self._delete_under(self._version(volume_id, version_id))
        shutil.rmtree(self.cache / submission_hex(volume_id) / submission_hex(version_id), ignore_errors=True)

    def drop(self, volume_id: int) -> None:
        prefix = self._volume(volume_id)
        with bucket_errors(self, f"dropping {prefix!r}"):
            for key in self._multiparts(prefix):
                self._abort(key)
            self._delete_under(prefix)
        shutil.rmtree(self.cache / submission_hex(volume_id), ignore_errors=True)

    # S3's calls, as this store makes them.

    def _multipart(self, key: str) -> str | None:
        """The open multipart upload of `key` (the newest, should there be several), or None."""
        found = self.client.list_multipart_uploads(Bucket=self.url.bucket, Prefix=key).get("Uploads", [])
        mine = sorted((u for u in found if u["Key"] == key), key=lambda u: u["Initiated"])
        return str(mine[-1]["UploadId"]) if mine else None

    def _multiparts(self, prefix: str) -> list[str]:
        found = self.client.list_multipart_uploads(Bucket=self.url.bucket, Prefix=prefix).get("Uploads", [])
        return sorted({str(u["Key"]) for u in found})

    def _parts(self, key: str, multipart: str) -> list[tuple[int, str, int]]:
        """(number, ETag, size) of each part, in order."""
        parts: list[tuple[int, str, int]] = []
        pages = self.client.get_paginator("list_parts").paginate(
            Bucket=self.url.bucket, Key=key, UploadId=multipart
        )
        for page in pages:
            parts += [(int(p["PartNumber"]), str(p["ETag"]), int(p["Size"])) for p in page.get("Parts", [])]
        return sorted(parts)

    def _arrived(self, key: str) -> _Arrived:
        """What the bucket holds of an upload's file, read once a call."""
        multipart = self._multipart(key)
        if multipart is None:
            return _Arrived(None, [], 0, self._size(key) or 0)
        parts = self._parts(key, multipart)
        tail = self._size(key + ".tail") or 0
        return _Arrived(multipart, parts, tail, sum(size for _, _, size in parts) + tail)

    def _upload_part(self, key: str, multipart: str, number: int, data: bytes) -> str:
        """The part's ETag."""
        sent = self.client.upload_part(
            Bucket=self.url.bucket, Key=key, UploadId=multipart, PartNumber=number, Body=data
        )
        return str(sent["ETag"])

    def _abort(self, key: str) -> None:
        found = self.client.list_multipart_uploads(Bucket=self.url.bucket, Prefix=key).get("Uploads", [])
        for upload in found:
            if upload["Key"] == key:
                self.client.abort_multipart_upload(
                    Bucket=self.url.bucket, Key=key, UploadId=upload["UploadId"]
                )

    def _listed(self, prefix: str) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.url.bucket, Prefix=prefix)
        for page in pages:
            found += [(str(entry["Key"]), int(entry["Size"])) for entry in page.get("Contents", [])]
        return found

    def _delete_under(self, prefix: str) -> None:
        keys = [key for key, _ in self._listed(prefix)]
        for start in range(0, len(keys), 1000):  # DeleteObjects takes 1,000 keys a call
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            self.client.delete_objects(Bucket=self.url.bucket, Delete={"Objects": batch, "Quiet": True})

    def _size(self, key: str) -> int | None:
        """The object's size, or None when there is none."""
        from botocore.exceptions import ClientError

        try:
            return int(self.client.head_object(Bucket=self.url.bucket, Key=key)["ContentLength"])
        except ClientError as exc:
            if is_missing(exc):
                return None
            raise

    def _exists(self, key: str) -> bool:
        return self._size(key) is not None

    def _read(self, key: str) -> bytes:
        from botocore.exceptions import ClientError

        try:
            return bytes(self.client.get_object(Bucket=self.url.bucket, Key=key)["Body"].read())
        except ClientError as exc:
            if is_missing(exc):
                return b""
            raise

    def _put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.url.bucket, Key=key, Body=data)

    def _delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.url.bucket, Key=key)
