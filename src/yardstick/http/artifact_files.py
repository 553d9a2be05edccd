"""One stored object as an HTTP answer: the file itself from the data folder, or from a bucket either a
redirect to the bucket's own expiring link (the bytes then go from the bucket to the caller, never through
the platform) or, for a client that follows no redirect, the bytes relayed."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import BinaryIO

from fastapi.responses import FileResponse, RedirectResponse, Response, StreamingResponse

from yardstick.core.artifacts import ArtifactNotFound, ArtifactStore, LocalArtifactStore

__all__ = ["artifact_file"]

CHUNK = 1 << 20


def artifact_file(
    store: ArtifactStore,
    submission_id: int,
    key: str,
    missing: Callable[[], Exception],
    *,
    media_type: str | None = None,
    headers: Mapping[str, str] | None = None,
    relay: bool = False,
) -> Response:
    """The object `key` of `submission_id`; `missing()` raised when there is none (or the key is not one).
    `relay`: the bytes themselves, never a redirect (the Sequences CLI fetches only from its own gateway,
    so that its key never goes to a host an answer named)."""
    answer_headers = dict(headers or {})
    try:
        if isinstance(store, LocalArtifactStore):
            path = store.path(submission_id, key)
            if not path.is_file():
                raise missing()
            return FileResponse(path, media_type=media_type, headers=answer_headers)
        if relay:
            stream = store.open(submission_id, key)
            return StreamingResponse(_chunks(stream), media_type=media_type, headers=answer_headers)
        link = store.presigned(submission_id, key, media_type=media_type)
        if link is None or not store.exists(submission_id, key):
            raise missing()
        return RedirectResponse(link, status_code=307, headers=answer_headers)
    except (ValueError, ArtifactNotFound):
        raise missing() from None


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    with stream:
        while chunk := stream.read(CHUNK):
            yield chunk
