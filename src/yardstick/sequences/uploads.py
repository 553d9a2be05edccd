"""`/v1/volume-uploads/...` (`paths.UPLOAD_TARGET`, `paths.UPLOAD_SESSION`): the signed, resumable targets
`seq volume put` sends a volume's files to, spoken as a cloud bucket's resumable uploads are (see
`core.uploads`). No key: the signed address is the credential.

- `POST <target>` → 201, `Location: <session>`;
- `PUT <session>`, `Content-Range: bytes a-b/total` and bytes a..b → 308 with `Range: bytes=0-<last held>`
  while bytes are missing, 200 once the file is whole; `Content-Range: bytes */total` asks what is held.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Header, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from yardstick.core.refusals import bad_request
from yardstick.core.uploads import Held, Span
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat
from yardstick.sequences import paths
from yardstick.sequences.errors import SEQUENCES
from yardstick.sequences.volume_models import ChunkTaken

_RANGE = re.compile(r"bytes (?:(?P<first>[0-9]{1,15})-(?P<last>[0-9]{1,15})|\*)/(?P<total>[0-9]{1,15}|\*)")
_RANGE_RULE = "bytes FIRST-LAST/TOTAL (a chunk), or bytes */TOTAL (what is held so far?)"
_SESSION_OPENED: dict[int | str, dict[str, Any]] = {
    201: {
        "description": "A session for the file: send it to `Location`",
        "headers": {"Location": {"schema": {"type": "string"}, "description": "the session's address"}},
    }
}
_CHUNK_ANSWERS: dict[int | str, dict[str, Any]] = {
    308: {
        "description": "Bytes are missing: `Range` says what is held (absent when nothing is)",
        "headers": {"Range": {"schema": {"type": "string"}, "description": "bytes=0-LAST"}},
    },
}
_BYTES = {
    "requestBody": {
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    }
}


def span(header: str | None) -> Span:
    """A `Content-Range` header as numbers; refused naming it and its form."""
    found = _RANGE.fullmatch((header or "").strip())
    if found is None:
        raise bad_request(f"Content-Range: {_RANGE_RULE}, not {header!r}")
    first, last, total = found.group("first"), found.group("last"), found.group("total")
    if first is not None and last is not None and int(first) > int(last):
        raise bad_request(f"Content-Range: the first byte comes before the last, {header!r}")
    return Span(
        int(first) if first is not None else None,
        int(last) if last is not None else None,
        int(total) if total != "*" else None,
        field="Content-Range",
    )


def _answer(held: Held) -> Response:
    if held.whole:
        return JSONResponse(ChunkTaken(path=held.path, size=held.size).model_dump(mode="json"))
    headers = {"Range": f"bytes=0-{held.held - 1}"} if held.held else {}
    return Response(status_code=308, headers=headers)


router = door_router(SEQUENCES, tags=["sequences: volume uploads"])


@router.post(
    paths.UPLOAD_TARGET,
    status_code=201,
    response_class=Response,
    responses={**_SESSION_OPENED, **refusals(403, 404, 409)},
)
def open_session(
    upload: str, position: str, request: Request, plat: Plat, expires: str = "", sig: str = ""
) -> Response:
    """Open a resumable session for one file of an upload (its signed target): the file starts over."""
    targets = str(request.base_url).rstrip("/") + paths.UPLOAD_TARGETS
    session = plat.uploads.open(upload, position, expires, sig, targets)
    return Response(status_code=201, headers={"Location": session})


@router.put(
    paths.UPLOAD_SESSION,
    response_model=ChunkTaken,
    responses={**_CHUNK_ANSWERS, **refusals(403, 404, 409)},
    openapi_extra=_BYTES,
)
async def put_chunk(
    upload: str,
    position: str,
    session: str,
    request: Request,
    plat: Plat,
    content_range: Annotated[str | None, Header(alias="Content-Range")] = None,
    expires: str = "",
    sig: str = "",
) -> Response:
    """Send a chunk of a file through its session, or ask what it holds."""
    plat.uploads.verify(upload, f"{position}/{session}", expires, sig)  # before a byte of the body is read
    wanted = span(content_range)
    data = await request.body()
    held = await run_in_threadpool(plat.uploads.put, upload, position, session, expires, sig, wanted, data)
    return _answer(held)
