"""`/v1/volumes`: an org's volumes, as `seq volume put | ls | show | rm` speaks to them.

`put` declares a version's files (`POST .../uploads[?changed_only=true]`), is answered a signed target for
each one to send (served by this gateway: `sequences.uploads`), sends them, and commits (`POST
.../uploads/{id}/commit`), where every file's size and md5 are checked. `ls` pages the volumes, `show` reads
one with what uses it, `rm` deletes one (refused while a benchmark mounts it, unless forced). `GET .../files`
lists the version in use's files, `GET .../files/{path}` hands one out.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import FileResponse, JSONResponse

from yardstick.core.accounts import Caller
from yardstick.core.refusals import not_found
from yardstick.core.runs import org_for
from yardstick.core.volumes import FileDecl
from yardstick.http.auth import Who
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat
from yardstick.sequences import paging, paths
from yardstick.sequences.errors import SEQUENCES
from yardstick.sequences.volume_models import (
    UploadStarted,
    UploadTarget,
    VolumeDeleted,
    VolumeFileRow,
    VolumeFiles,
    VolumeInfo,
    VolumePage,
    VolumeUploadRequest,
    info,
)

PAGE, PAGE_CAP = 50, 500
_UPLOAD_ID = re.compile(r"[1-9a-f][0-9a-f]{0,15}")


def _org(caller: Caller) -> int:
    return org_for(caller, None).id


def _upload_id(text: str) -> int:
    if not _UPLOAD_ID.fullmatch(text) or int(text, 16) >= 1 << 63:
        raise not_found(f"upload_id: {text!r} is no upload this platform opened")
    return int(text, 16)


router = door_router(SEQUENCES, tags=["sequences: volumes"])


@router.post(
    paths.VOLUME_UPLOADS,
    response_model=UploadStarted,
    status_code=201,
    responses={
        200: {"description": "Every file is the version in use's: nothing opened"},
        **refusals(404),
    },
)
def start_upload(
    name: str,
    body: VolumeUploadRequest,
    request: Request,
    plat: Plat,
    who: Who,
    changed_only: bool = False,
) -> JSONResponse:
    """Open the upload of a volume's next version: a signed, resumable target for each file to send."""
    files = [FileDecl(f.path, f.size, f.md5) for f in body.files]
    started = plat.volumes.start(_org(who), name, body.kind, files, changed_only=changed_only)
    targets = str(request.base_url).rstrip("/") + paths.UPLOAD_TARGETS
    shown = UploadStarted(
        name=name,
        version=started.number,
        unchanged=started.unchanged,
        upload_id=format(started.upload_id, "x") if started.upload_id is not None else None,
        targets=[
            UploadTarget(path=path, url=plat.uploads.target(started.upload_id, position, targets))
            for position, path in started.targets
            if started.upload_id is not None
        ],
        held=list(started.held),
        expires_at=started.expires_at.isoformat() if started.expires_at is not None else None,
        size_bytes=started.size_bytes,
    )
    return JSONResponse(shown.model_dump(mode="json"), status_code=200 if started.unchanged else 201)


@router.post(
    paths.VOLUME_UPLOAD_COMMIT,
    response_model=VolumeInfo,
    responses=refusals(404, 409),
)
def commit_upload(name: str, upload_id: str, plat: Plat, who: Who) -> JSONResponse:
    """Check every file's size and md5 and make the upload the version in use; nothing committed if any
    differs."""
    view = plat.volumes.commit(_org(who), name, _upload_id(upload_id))
    return JSONResponse(info(view).model_dump(mode="json"))


@router.get(paths.VOLUMES, response_model=VolumePage)
def list_volumes(
    plat: Plat,
    who: Who,
    limit: Annotated[int, Query(ge=1)] = PAGE,
    cursor: Annotated[str | None, Query()] = None,
) -> JSONResponse:
    """The org's volumes by name, a page at a time (a larger `limit` is clamped to 500)."""
    views, page = plat.volumes.page(_org(who), paging.start(cursor), min(limit, PAGE_CAP))
    shown = VolumePage(data=[info(v) for v in views], **paging.shown(page))
    return JSONResponse(shown.model_dump(mode="json"))


@router.get(paths.VOLUME, response_model=VolumeInfo, responses=refusals(404))
def show_volume(name: str, plat: Plat, who: Who) -> JSONResponse:
    return JSONResponse(info(plat.volumes.view(_org(who), name)).model_dump(mode="json"))


@router.delete(paths.VOLUME, response_model=VolumeDeleted, responses=refusals(404, 409))
def delete_volume(name: str, plat: Plat, who: Who, force: bool = False) -> JSONResponse:
    """Delete a volume and every version of it: refused (409, `details.benchmarks`) while a benchmark
    mounts it, unless `force`."""
    plat.volumes.delete(_org(who), name, force=force)
    return JSONResponse(VolumeDeleted(name=name).model_dump(mode="json"))


@router.get(paths.VOLUME_FILES, response_model=VolumeFiles, responses=refusals(404))
def volume_files(name: str, plat: Plat, who: Who) -> JSONResponse:
    """The files of the version in use."""
    number, files = plat.volumes.files(_org(who), name)
    shown = VolumeFiles(
        name=name,
        version=number,
        files=[VolumeFileRow(path=f.path, size=f.size, md5=f.md5) for f in files],
    )
    return JSONResponse(shown.model_dump(mode="json"))


@router.get(
    paths.VOLUME_FILE,
    response_class=FileResponse,
    responses={200: {"content": {"application/octet-stream": {}}}, **refusals(404)},
)
def volume_file(name: str, path: str, plat: Plat, who: Who) -> FileResponse:
    """One file of the version in use."""
    found = plat.volumes.file(_org(who), name, path)
    if not found.is_file():
        raise not_found(f"path: no file {path!r} in the volume {name!r}")
    return FileResponse(found, media_type="application/octet-stream")
