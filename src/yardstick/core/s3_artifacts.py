"""A submission's objects in an S3-compatible bucket (`--artifacts s3://bucket/prefix`): AWS S3, MinIO,
Ceph, R2, or moto's server in the tests.

An object is `<prefix>/<submission hex id>/<key>`. A PUT is all or nothing: a reader sees the old object
or the new one, never a part, so a run's records are written once as the local store writes them. Links
handed out are the store's own presigned GETs, expiring with the install's artifact links
(`artifact_ttl_s`): the bytes go from the bucket to the caller, never through the platform.

The client is boto3 (botocore), the standard every S3-compatible server is tested against. Its endpoint,
region and credentials come from where every AWS tool reads them: `AWS_ENDPOINT_URL_S3` or
`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` or `AWS_PROFILE`, `AWS_DEFAULT_REGION`.
Two settings make it work beyond AWS: checksums only "when required" (botocore 1.36 began sending CRC32
trailers that MinIO, Ceph and moto's older servers refuse) and path-style addressing when an endpoint is
named (a bucket as a hostname does not resolve on a lab's own server or on loopback). SigV4 signs the Host
with its port, so a presigned link is only good at the endpoint it was made for: give the endpoint the
callers reach.

A bucket that fails (its server down, a refusal that is not a missing key) raises `StoreUnavailable`, an
OSError, after botocore's own retries: the platform treats it as any store's failure — the run errors as
the platform's fault (`storage_failed`), refunded, and the worker goes on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, Final, cast

from yardstick.core.artifacts import ArtifactNotFound, submission_hex, validate_key
from yardstick.distribution import install_hint

__all__ = [
    "S3_SCHEME",
    "S3ArtifactStore",
    "S3Url",
    "StoreUnavailable",
    "bucket_errors",
    "is_missing",
    "s3_client",
]

S3_SCHEME: Final = "s3://"
ENDPOINT_ENV: Final = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


class S3Url:
    """`s3://bucket/prefix` read once: its bucket and its prefix (empty, or ending in one `/`)."""

    def __init__(self, url: str) -> None:
        if not url.startswith(S3_SCHEME):
            raise ValueError(f"artifacts: {url!r} is no s3:// URL (s3://bucket or s3://bucket/prefix)")
        bucket, _, prefix = url[len(S3_SCHEME) :].partition("/")
        if not bucket or not all(c.isalnum() or c in ".-" for c in bucket) or not 3 <= len(bucket) <= 63:
            raise ValueError(
                f"artifacts: {url!r} names no bucket (3 to 63 lowercase letters, digits, '.' or '-')"
            )
        prefix = prefix.strip("/")
        if prefix:
            validate_key(prefix, what="artifacts prefix")
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""

    def __str__(self) -> str:
        return f"{S3_SCHEME}{self.bucket}/{self.prefix}"


class StoreUnavailable(OSError):
    """The bucket did not do what was asked (down, unreachable, refusing), after the client's retries."""


@contextmanager
def bucket_errors(store: object, doing: str) -> Iterator[None]:
    """A failure of the bucket as the OSError every store's caller handles; a missing key is the caller's."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        if is_missing(exc):
            raise
        code = exc.response.get("Error", {}).get("Code")
        raise StoreUnavailable(f"{store} refused {doing} ({code})") from None
    except BotoCoreError as exc:
        raise StoreUnavailable(f"{store} did not answer {doing}: {exc}") from None


def s3_client(endpoint_url: str | None = None) -> Any:
    """A boto3 S3 client set for S3-compatible servers (see the module's docstring)."""
    try:
        import boto3
        from botocore.config import Config
    except ModuleNotFoundError:
        raise RuntimeError(
            f"artifacts in an S3 bucket need boto3, not installed here: {install_hint('cluster')}"
        ) from None

    endpoint = endpoint_url or next((os.environ[e] for e in ENDPOINT_ENV if os.environ.get(e)), None)
    config = Config(
        signature_version="s3v4",
        s3={"addressing_style": "path" if endpoint else "auto"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        retries={"mode": "standard", "max_attempts": 4},
        max_pool_connections=32,
    )
    session = boto3.session.Session()
    return session.client("s3", endpoint_url=endpoint, config=config)


class S3ArtifactStore:
    """The `ArtifactStore` calls as S3's: PutObject, GetObject, HeadObject, ListObjectsV2 under a prefix."""

    def __init__(self, url: str, client: Any | None = None, link_ttl_s: int = 3600) -> None:
        self.url = S3Url(url)
        self.client = client if client is not None else s3_client()
        self.link_ttl_s = link_ttl_s

    def __str__(self) -> str:
        endpoint = self.client.meta.endpoint_url
        return f"{self.url} at {endpoint}"

    def check(self) -> None:
        """ValueError saying why, unless the bucket answers with these credentials (a server's start)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_bucket(Bucket=self.url.bucket)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code"))
            why = "no such bucket" if code in ("404", "NoSuchBucket", "NotFound") else f"refused ({code})"
            raise ValueError(f"{self}: {why}") from None
        except BotoCoreError as exc:
            raise ValueError(f"{self}: {exc}") from None

    def object_key(self, submission_id: int, key: str) -> str:
        return f"{self.url.prefix}{submission_hex(submission_id)}/{validate_key(key)}"

    def put(
        self, submission_id: int, key: str, data: bytes, content_type: str = "", *, durable: bool = True
    ) -> int:
        """`durable` is the bucket's own: an object S3 acknowledged is kept."""
        extra = {"ContentType": content_type} if content_type else {}
        with bucket_errors(self, f"a PUT of {key!r}"):
            self.client.put_object(
                Bucket=self.url.bucket, Key=self.object_key(submission_id, key), Body=data, **extra
            )
        return len(data)

    def open(self, submission_id: int, key: str) -> BinaryIO:
        from botocore.exceptions import ClientError

        try:
            with bucket_errors(self, f"a GET of {key!r}"):
                found = self.client.get_object(
                    Bucket=self.url.bucket, Key=self.object_key(submission_id, key)
                )
        except ClientError as exc:
            if is_missing(exc):
                raise ArtifactNotFound(
                    f"no artifact {key!r} in submission {submission_hex(submission_id)}"
                ) from None
            raise
        return cast(BinaryIO, found["Body"])

    def exists(self, submission_id: int, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            with bucket_errors(self, f"a HEAD of {key!r}"):
                self.client.head_object(Bucket=self.url.bucket, Key=self.object_key(submission_id, key))
        except ClientError as exc:
            if is_missing(exc):
                return False
            raise
        return True

    def location(self, submission_id: int, prefix: str) -> str:
        return f"{S3_SCHEME}{self.url.bucket}/{self.object_key(submission_id, prefix.rstrip('/'))}/"

    def keys(self, submission_id: int, prefix: str = "") -> list[tuple[str, int]]:
        if prefix:
            validate_key(prefix.rstrip("/"))
        base = f"{self.url.prefix}{submission_hex(submission_id)}/"
        found: list[tuple[str, int]] = []
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.url.bucket, Prefix=base + prefix
        )
        with bucket_errors(self, "a listing"):
            for page in pages:
                for entry in page.get("Contents", []):
                    found.append((entry["Key"][len(base) :], int(entry["Size"])))
        return sorted(found)

    def presigned(self, submission_id: int, key: str, *, media_type: str | None = None) -> str | None:
        """A GET of one object anyone holding the link may make until it expires."""
        params: dict[str, Any] = {"Bucket": self.url.bucket, "Key": self.object_key(submission_id, key)}
        if media_type:
            params["ResponseContentType"] = media_type
        return str(self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=self.link_ttl_s))


def is_missing(exc: Any) -> bool:
    error = exc.response.get("Error", {})
    return str(error.get("Code")) in ("404", "NoSuchKey", "NotFound")
