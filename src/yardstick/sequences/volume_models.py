"""The Sequences contract's volume bodies (`/v1/volumes`), as the SDK (`sequence-ai` 0.51.5) sends and reads
them, written here from the documented facts, and the `vol://` references a benchmark's `assets` make.

A request's shapes are checked here (types, counts, lengths); what a file may be (its path's rules, its md5's
form, one path once, the upload's size) is the platform's to say (`core.volumes`), which refuses every problem
at once, naming the file and the rule."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from yardstick.core import limits
from yardstick.core.refusals import Problem
from yardstick.core.volume_store import MAX_PATH_CHARS
from yardstick.core.volumes import AssetRef, VolumeView
from yardstick.hosted import mounts
from yardstick.sequences.models import VolumeMount, VolumeRef

_REQUEST = ConfigDict(extra="forbid")


class VolumeFileDecl(BaseModel):
    """One file of an upload: its path in the volume, its size, the base64 md5 of its bytes."""

    model_config = _REQUEST
    path: str = Field(min_length=1, max_length=MAX_PATH_CHARS)
    size: int = Field(ge=0, le=limits.VOLUME_UPLOAD_BYTES)
    md5: str = Field(max_length=64)


class VolumeUploadRequest(BaseModel):
    """`POST /v1/volumes/{name}/uploads`: every file of the version it makes."""

    model_config = _REQUEST
    kind: Literal["checkpoint", "dataset"] = "checkpoint"
    files: list[VolumeFileDecl] = Field(min_length=1, max_length=limits.VOLUME_FILES)


class UploadTarget(BaseModel):
    """Where one file goes: POST `url` (with `headers`) opens a resumable session, whose address it
    answers."""

    path: str
    url: str
    headers: dict[str, str] = Field(default_factory=dict)


class UploadStarted(BaseModel):
    """201: an upload of `version`, a target for each file to send, the `held` ones the version in use's as
    they are. 200 `unchanged`: every file is the version in use's, nothing opened, `version` that one."""

    name: str
    version: int
    unchanged: bool = False
    upload_id: str | None = None
    targets: list[UploadTarget] = Field(default_factory=list)
    held: list[str] = Field(default_factory=list)
    expires_at: str | None = None
    size_bytes: int = 0


class UsedBy(BaseModel):
    deployments: list[str] = Field(default_factory=list)
    benchmarks: list[str] = Field(default_factory=list)
    evals: list[str] = Field(default_factory=list)


class VolumeInfo(BaseModel):
    """One volume as its owner sees it, never where it is stored; `referenced_by` what uses it."""

    name: str
    kind: str
    state: Literal["uploading", "active", "deleted"]
    version: int | None = None
    size_bytes: int = 0
    files: int = 0
    created_at: str | None = None
    updated_at: str | None = None
    referenced_by: UsedBy = Field(default_factory=UsedBy)


class VolumePage(BaseModel):
    data: list[VolumeInfo]
    total: int
    offset: int
    next_cursor: str | None = None


class VolumeFileRow(BaseModel):
    path: str
    size: int
    md5: str


class VolumeFiles(BaseModel):
    name: str
    version: int
    files: list[VolumeFileRow]


class VolumeDeleted(BaseModel):
    name: str
    deleted: bool = True


class ChunkTaken(BaseModel):
    """A file whose every byte arrived (the 200 that ends its session)."""

    path: str
    size: int


def info(view: VolumeView) -> VolumeInfo:
    return VolumeInfo(
        name=view.name,
        kind=view.kind,
        state="active" if view.state == "active" else "uploading",
        version=view.version,
        size_bytes=view.size_bytes,
        files=view.file_count,
        created_at=view.created_at.isoformat(),
        updated_at=view.updated_at.isoformat(),
        referenced_by=UsedBy(benchmarks=list(view.benchmarks), deployments=list(view.deployments)),
    )


def asset_refs(assets: Sequence[VolumeRef]) -> tuple[AssetRef, ...]:
    """A benchmark's `assets` as the platform's references: each `vol://<name>[@v<n>]`, or refused by rule."""
    problems: list[Problem] = []
    refs: list[AssetRef] = []
    for position, asset in enumerate(assets):
        field = f"assets[{position}]"
        found = mounts.volume_ref(asset.uri)
        if found is None:
            problems.append(
                Problem(
                    f"{field}.uri",
                    f"{asset.uri!r} is not vol://<name>[@v<n>]: a volume uploaded with seq volume put"
                    " (other stores are not mounted here)",
                )
            )
            continue
        refs.append(AssetRef(*found, asset.mount, field))
    limits.check(problems)
    return tuple(refs)


WEIGHTS_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def weight_refs(
    weights: VolumeMount | None, weights_name: str | None, extra_weights: Mapping[str, VolumeMount] | None
) -> tuple[AssetRef, ...]:
    """A deployment's `weights` as the volumes its box mounts: whole at the SDK's mount (`/data`), or in
    named parts each at `<mount>/<part>` (`weights_name` the first part's name). Only uploaded volumes
    (`vol://<name>[@v<n>]`) are mounted here; another store's URI is refused naming the field."""
    if weights is None:
        return ()
    named = [
        ("weights", weights_name, weights),
        *((f"extra_weights.{part}", part, mount) for part, mount in (extra_weights or {}).items()),
    ]
    problems: list[Problem] = []
    refs: list[AssetRef] = []
    seen: dict[str, str] = {}
    for field, part, mount in named:
        found = mounts.volume_ref(mount.uri)
        if found is None:
            problems.append(
                Problem(
                    f"{field}.uri",
                    f"{mount.uri!r} is fetched by the Sequences platform; Yardstick mounts uploaded volumes"
                    ' only: seq volume put NAME ./checkpoint, then weights="vol://NAME"',
                )
            )
            continue
        if part is not None and not WEIGHTS_PART.fullmatch(part):
            problems.append(Problem(field, f"{part!r} is not a part's name: {WEIGHTS_PART.pattern}"))
            continue
        name, version = found
        if name in seen:
            problems.append(
                Problem(f"{field}.uri", f"vol://{name} is {seen[name]} already: a volume one place")
            )
            continue
        seen[name] = field
        place = mount.mount if part is None else f"{mount.mount.rstrip('/')}/{part}"
        refs.append(AssetRef(name, version, place, field, root=mounts.WEIGHTS))
    limits.check(problems)
    return tuple(refs)
