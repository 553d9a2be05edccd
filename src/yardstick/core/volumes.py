"""An org's volumes: named sets of files, uploaded in versions, that its benchmarks mount as their assets.

- An upload declares every file of the next version (path, size, base64 md5). With `changed_only`, the files
  the version in use holds as they are (same path, size and md5) are *held*: not sent, carried into the new
  version. When every file is held and none is gone the volume is `unchanged`: nothing is opened, no version
  made.
- The other files arrive through resumable sessions (`core.uploads`), straight into the volume store.
- The commit checks every sent file's size and md5 against its declaration; any difference refuses it,
  naming each file, field and rule, and nothing is committed. Otherwise the files are laid out as a new
  version, which becomes the one in use.
- A volume has one open upload at a time: a new one supersedes it (the SDK starts over when the files changed,
  and an interrupted upload it resumes is never started again). Starting any upload sweeps the bytes of
  uploads past their life, whichever volume they were for.
- A benchmark's assets pin the version in use when it registers (or the one it names), so a benchmark version
  always mounts the same files; a volume a benchmark uses is deleted only when forced.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from yardstick.core import limits
from yardstick.core.paging import Window
from yardstick.core.refusals import Listed, Problem, Refusal, RefusalKind, bad_request, not_found
from yardstick.core.volume_store import (
    FromUpload,
    FromVersion,
    Placed,
    VolumeFilesMissing,
    VolumeStore,
    file_key,
)
from yardstick.hosted import mounts
from yardstick.store.db import Database
from yardstick.store.models import (
    Hosted,
    HostedVersion,
    Volume,
    VolumeFile,
    VolumeUpload,
    VolumeUploadFile,
    VolumeVersion,
    new_id,
    utcnow,
)
from yardstick.store.states import HostedKind, UploadState, VolumeKind

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or a digit"


@dataclass(frozen=True)
class FileDecl:
    """One file of an upload as its request declares it."""

    path: str
    size: int
    md5: str


@dataclass(frozen=True)
class Started:
    """What starting an upload came to: `unchanged` (nothing opened: `number` is the version in use), or an
    upload of version `number` whose files at `targets` ((position, path)) are to be sent, `held` the rest."""

    name: str
    number: int
    unchanged: bool
    size_bytes: int
    upload_id: int | None = None
    targets: tuple[tuple[int, str], ...] = ()
    held: tuple[str, ...] = ()
    expires_at: dt.datetime | None = None


@dataclass(frozen=True)
class VolumeView:
    """A volume as its owner sees it (never where it is stored); `benchmarks` and `deployments`: the org's
    that mount it (as assets, as weights)."""

    name: str
    kind: str
    state: str
    version: int | None
    size_bytes: int
    file_count: int
    created_at: dt.datetime
    updated_at: dt.datetime
    benchmarks: tuple[str, ...]
    deployments: tuple[str, ...] = ()


@dataclass(frozen=True)
class AssetRef:
    """A volume a registration names (a benchmark's assets, a deployment's weights): by name, at a version
    (None: the one in use), to mount at a place (None: the SDK's default) that is `root` or under it. `field`
    is where the request said it, for refusals."""

    name: str
    version: int | None
    mount: str | None
    field: str
    root: PurePosixPath = mounts.ASSETS


@dataclass(frozen=True)
class Pin:
    """A benchmark version's asset: one version of one volume, and where its box mounts it."""

    name: str
    volume_id: int
    version: int
    version_id: int
    mount: str

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "volume_id": self.volume_id,
            "version": self.version,
            "version_id": self.version_id,
            "mount": self.mount,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Pin:
        return cls(
            str(data["name"]),
            int(data["volume_id"]),
            int(data["version"]),
            int(data["version_id"]),
            str(data["mount"]),
        )


class Volumes:
    def __init__(self, db: Database, store: VolumeStore, *, upload_ttl_s: int = limits.UPLOAD_TTL_S) -> None:
        self.db = db
        self.store = store
        self.upload_ttl_s = upload_ttl_s

    # --- uploading --------------------------------------------------------------------------------------

    def start(
        self, org_id: int, name: str, kind: str, files: Sequence[FileDecl], *, changed_only: bool
    ) -> Started:
        """Open an upload of `name`'s next version (or answer that nothing changed). Every problem of the
        request is refused at once, naming the file and the rule, and nothing is opened."""
        _check_name(name)
        limits.check(_problems(kind, files))
        try:
            started, superseded = self._open(org_id, name, kind, files, changed_only)
        except IntegrityError:
            # Another upload of a volume of that name, new too, made its row first: this one is its next.
            started, superseded = self._open(org_id, name, kind, files, changed_only)
        for volume_id, upload_id in superseded + self._expire():
            self.store.discard(volume_id, upload_id)
        return started

    def _expire(self) -> list[tuple[int, int]]:
        """End the open uploads of every volume past their life: their partial bytes would otherwise stay on
        disk until the next upload of the same volume. Their refusals read the time, so they say "expired"
        as before; `ended_at` marks the bytes gone so they are swept once."""
        with self.db.writing() as session:
            late = session.execute(
                select(VolumeUpload).where(
                    VolumeUpload.state == UploadState.OPEN,
                    VolumeUpload.ended_at.is_(None),
                    VolumeUpload.expires_at <= utcnow(),
                )
            ).scalars()
            swept = []
            for upload in late:
                upload.ended_at = utcnow()
                swept.append((upload.volume_id, upload.id))
        return swept

    def _open(
        self, org_id: int, name: str, kind: str, files: Sequence[FileDecl], changed_only: bool
    ) -> tuple[Started, list[tuple[int, int]]]:
        superseded: list[tuple[int, int]] = []
        with self.db.writing() as session:
            volume = _volume(session, org_id, name, lock=True)
            if volume is None:
                volume = Volume(org_id=org_id, name=name, kind=kind)
                session.add(volume)
                session.flush()
            current = _current(session, volume)
            if changed_only and current is not None:
                kept = _files(session, current.id)
                same = {f.path for f in files if (f.size, f.md5) == kept.get(f.path)}
            else:
                kept, same = {}, set()
            if current is not None and len(same) == len(files) == len(kept):
                return Started(name, current.number, True, current.size_bytes), []
            for upload in session.execute(
                select(VolumeUpload).where(
                    VolumeUpload.volume_id == volume.id, VolumeUpload.state == UploadState.OPEN
                )
            ).scalars():
                upload.state, upload.ended_at = UploadState.SUPERSEDED, utcnow()
                superseded.append((volume.id, upload.id))
            number = (_highest(session, volume.id) or 0) + 1
            upload = VolumeUpload(
                volume_id=volume.id,
                number=number,
                kind=kind,
                state=UploadState.OPEN,
                expires_at=utcnow() + dt.timedelta(seconds=self.upload_ttl_s),
            )
            session.add(upload)
            session.flush()
            for position, file in enumerate(files):
                session.add(
                    VolumeUploadFile(
                        upload_id=upload.id,
                        position=position,
                        path=file.path,
                        size=file.size,
                        md5=file.md5,
                        held=file.path in same,
                    )
                )
            started = Started(
                name,
                number,
                False,
                sum(f.size for f in files),
                upload_id=upload.id,
                targets=tuple((p, f.path) for p, f in enumerate(files) if f.path not in same),
                held=tuple(f.path for f in files if f.path in same),
                expires_at=upload.expires_at,
            )
        return started, superseded

    def commit(self, org_id: int, name: str, upload_id: int) -> VolumeView:
        """Make an upload's files the volume's next version, in use from now: refused, naming each file, field
        and rule, when a file's bytes are not all there or are not the ones declared; nothing is committed
        then. Committing a committed upload again answers the volume as it is."""
        _check_name(name)
        with self.db.reading() as session:
            volume, upload = self._upload(session, org_id, name, upload_id)
            if upload.state == UploadState.COMMITTED:
                return self._view(session, volume)
            _still_open(upload)
            rows = _upload_files(session, upload.id)
            current = _current(session, volume)
            kept = _files(session, current.id) if current is not None else {}
        problems: list[Problem] = []
        placed: list[Placed] = []
        for row in rows:
            field = f"files[{row.position}]"
            if row.held:
                if current is None or kept.get(row.path) != (row.size, row.md5):
                    problems.append(
                        Problem(field, f"{row.path}: held from the version in use, which no longer has it")
                    )
                else:
                    placed.append(Placed(row.path, FromVersion(current.id, row.path)))
                continue
            arrived = self.store.held(volume.id, upload.id, row.position)
            if arrived != row.size:
                problems.append(
                    Problem(
                        f"{field}.size",
                        f"{row.path}: {arrived:,} of its {row.size:,} bytes arrived; send the rest (run"
                        " the same seq volume put again) before committing",
                    )
                )
                continue
            md5 = row.arrived_md5 or self.store.digest(volume.id, upload.id, row.position)[1]
            if md5 != row.md5:
                problems.append(
                    Problem(
                        f"{field}.md5",
                        f"{row.path}: the bytes that arrived hash to {md5}, not the declared {row.md5}",
                    )
                )
                continue
            placed.append(Placed(row.path, FromUpload(upload.id, row.position)))
        limits.check(problems)
        version_id = new_id()
        try:
            self.store.commit(volume.id, version_id, placed)
        except VolumeFilesMissing as missing:
            raise Refusal(RefusalKind.CONFLICT, f"upload_id: {missing}; run seq volume put again") from None
        try:
            with self.db.writing() as session:
                volume, upload = self._upload(session, org_id, name, upload_id, lock=True)
                _still_open(upload)
                if volume.version != (current.number if current is not None else None):
                    raise Refusal(
                        RefusalKind.CONFLICT,
                        f"upload_id: {name} changed while this upload was checked; run seq volume put again",
                    )
                session.add(
                    VolumeVersion(
                        id=version_id,
                        volume_id=volume.id,
                        number=upload.number,
                        size_bytes=sum(r.size for r in rows),
                        file_count=len(rows),
                    )
                )
                session.flush()
                session.add_all(
                    VolumeFile(version_id=version_id, path=r.path, size=r.size, md5=r.md5) for r in rows
                )
                volume.version, volume.kind, volume.updated_at = upload.number, upload.kind, utcnow()
                upload.state, upload.ended_at = UploadState.COMMITTED, utcnow()
                session.flush()
                view = self._view(session, volume)
        except BaseException:
            self.store.drop_version(volume.id, version_id)
            raise
        self.store.discard(volume.id, upload.id)
        return view

    def _upload(
        self, session: Session, org_id: int, name: str, upload_id: int, *, lock: bool = False
    ) -> tuple[Volume, VolumeUpload]:
        volume = _volume(session, org_id, name, lock=lock)
        if volume is None:
            raise not_found(f"name: no volume {name!r} in your organization")
        upload = session.get(VolumeUpload, upload_id)
        if upload is None or upload.volume_id != volume.id:
            raise not_found(f"upload_id: no upload {upload_id:x} of the volume {name!r}")
        return volume, upload

    # --- reading ------------------------------------------------------------------------------------------

    def page(self, org_id: int, offset: int, limit: int) -> tuple[list[VolumeView], Window]:
        """The org's volumes by name, `limit` from `offset`, and the window they are of all it has."""
        with self.db.reading() as session:
            total = session.execute(
                select(func.count()).select_from(Volume).where(Volume.org_id == org_id)
            ).scalar_one()
            window = Window(offset, limit, total)
            rows = session.execute(
                select(Volume)
                .where(Volume.org_id == org_id)
                .order_by(Volume.name)
                .offset(window.offset)
                .limit(window.size)
            ).scalars()
            return [self._view(session, volume) for volume in rows], window

    def view(self, org_id: int, name: str) -> VolumeView:
        _check_name(name)
        with self.db.reading() as session:
            return self._view(session, self._named(session, org_id, name))

    def files(self, org_id: int, name: str) -> tuple[int, list[FileDecl]]:
        """The version in use and its files, by path."""
        _check_name(name)
        with self.db.reading() as session:
            volume = self._named(session, org_id, name)
            current = _current(session, volume)
            if current is None:
                raise not_found(f"name: the volume {name!r} has no version yet (its upload is not committed)")
            rows = session.execute(
                select(VolumeFile).where(VolumeFile.version_id == current.id).order_by(VolumeFile.path)
            ).scalars()
            return current.number, [FileDecl(r.path, r.size, r.md5) for r in rows]

    def file(self, org_id: int, name: str, path: str) -> Path:
        """One file of the version in use, as a local file (to hand out as a download)."""
        _check_name(name)
        with self.db.reading() as session:
            volume = self._named(session, org_id, name)
            current = _current(session, volume)
        try:
            file_key(path)
            if current is None:
                raise VolumeFilesMissing(path)
            return self.store.tree(volume.id, current.id) / path
        except (ValueError, VolumeFilesMissing):
            raise not_found(f"path: no file {path!r} in the volume {name!r}") from None

    def _named(self, session: Session, org_id: int, name: str) -> Volume:
        volume = _volume(session, org_id, name)
        if volume is None:
            raise not_found(f"name: no volume {name!r} in your organization")
        return volume

    def _view(self, session: Session, volume: Volume) -> VolumeView:
        current = _current(session, volume)
        users = list(_users(session, volume))
        return VolumeView(
            name=volume.name,
            kind=volume.kind,
            state="active" if current is not None else "uploading",
            version=current.number if current is not None else None,
            size_bytes=current.size_bytes if current is not None else 0,
            file_count=current.file_count if current is not None else 0,
            created_at=volume.created_at,
            updated_at=volume.updated_at,
            benchmarks=tuple(name for kind, name, _ in users if kind == HostedKind.BENCHMARK),
            deployments=tuple(name for kind, name, _ in users if kind == HostedKind.POLICY),
        )

    # --- deleting ---------------------------------------------------------------------------------------

    def delete(self, org_id: int, name: str, *, force: bool) -> None:
        """Delete a volume, every version of it and its open upload. Refused while a benchmark of the org
        mounts it as assets or a deployment as weights, unless `force` (their evals then fail, saying what is
        gone)."""
        _check_name(name)
        with self.db.writing() as session:
            volume = self._named(session, org_id, name)
            users = list(_users(session, volume))
            benchmarks = sorted({name for kind, name, _ in users if kind == HostedKind.BENCHMARK})
            deployments = sorted({name for kind, name, _ in users if kind == HostedKind.POLICY})
            if users and not force:
                said = [
                    f"the {role} of the {kind}{'s' if len(names) > 1 else ''} {', '.join(names)}"
                    for role, kind, names in (
                        ("assets", "benchmark", benchmarks),
                        ("weights", "deployment", deployments),
                    )
                    if names
                ]
                how = [
                    f"seq {cmd} rm NAME"
                    for cmd, names in (("benchmark", benchmarks), ("policy", deployments))
                    if names
                ]
                raise Refusal(
                    RefusalKind.CONFLICT,
                    f"name: {name} is {' and '.join(said)}; remove {'them' if len(users) > 1 else 'it'} first"
                    f" ({', '.join(how)}), or delete it anyway with force=true",
                    listed=[
                        Listed(key, tuple(names))
                        for key, names in (("benchmarks", benchmarks), ("deployments", deployments))
                        if names
                    ],
                )
            volume_id = volume.id
            session.delete(volume)
        self.store.drop(volume_id)

    # --- a benchmark's assets ---------------------------------------------------------------------------

    def pin(self, org_id: int, refs: Sequence[AssetRef]) -> list[Pin]:
        """The versions a benchmark's assets mount, and where: refused naming the field and the rule for a
        volume the org does not have, a version it never made, or a place a volume cannot be mounted at."""
        problems: list[Problem] = []
        pins: list[Pin] = []
        places: list[tuple[str, str]] = []
        with self.db.reading() as session:
            for ref in refs:
                mount = ref.mount or mounts.default_mount(ref.name, len(refs))
                rule = mounts.mount_problem(mount, ref.root)
                if rule is not None:
                    problems.append(Problem(f"{ref.field}.mount", f"{mount!r} {rule}"))
                    continue
                for field, other in places:
                    a, b = PurePosixPath(mount), PurePosixPath(other)
                    if a == b or a in b.parents or b in a.parents:
                        problems.append(Problem(f"{ref.field}.mount", f"{mount} overlaps {field}'s {other}"))
                places.append((ref.field, mount))
                volume = _volume(session, org_id, ref.name) if NAME.fullmatch(ref.name) else None
                if volume is None:
                    problems.append(
                        Problem(
                            f"{ref.field}.uri",
                            f"no volume {ref.name!r} in your organization: upload it first"
                            f" (seq volume put {ref.name} DIR)",
                        )
                    )
                    continue
                number = ref.version if ref.version is not None else volume.version
                version = (
                    session.execute(
                        select(VolumeVersion).where(
                            VolumeVersion.volume_id == volume.id, VolumeVersion.number == number
                        )
                    ).scalar_one_or_none()
                    if number is not None
                    else None
                )
                if version is None:
                    said = f"has no version {number}" if ref.version is not None else "has no version yet"
                    problems.append(Problem(f"{ref.field}.uri", f"the volume {ref.name!r} {said}"))
                    continue
                pins.append(Pin(ref.name, volume.id, version.number, version.id, mount))
        limits.check(problems)
        return pins

    def mounted(self, pins: Sequence[Pin]) -> list[tuple[Path, str]]:
        """The folder of each pinned version, with where it is mounted; LookupError naming a volume that is
        gone (deleted since its benchmark registered)."""
        folders = []
        for pin in pins:
            try:
                folders.append((self.store.tree(pin.volume_id, pin.version_id), pin.mount))
            except VolumeFilesMissing:
                raise LookupError(
                    f"the benchmark's assets {pin.name!r} v{pin.version} were deleted (seq volume rm);"
                    " upload them again and register the benchmark again"
                ) from None
        return folders


# --- the request's rules ------------------------------------------------------------------------------------


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise bad_request(f"name: a volume name is {NAME_RULE}, not {name!r}")


def _problems(kind: str, files: Sequence[FileDecl]) -> list[Problem]:
    problems: list[Problem] = []
    if kind not in set(VolumeKind):
        problems.append(Problem("kind", f"is one of {', '.join(VolumeKind)}, not {kind!r}"))
    if not files:
        problems.append(Problem("files", "names at least one file"))
    problems += limits.at_most("files", len(files), limits.VOLUME_FILES, "files an upload")
    total = sum(f.size for f in files if isinstance(f.size, int))
    problems += limits.at_most("files", total, limits.VOLUME_UPLOAD_BYTES, "bytes an upload, in all")
    paths = {f.path for f in files}
    seen: set[str] = set()
    for position, file in enumerate(files):
        field = f"files[{position}]"
        try:
            file_key(file.path)
        except (TypeError, ValueError) as exc:
            problems.append(Problem(f"{field}.path", str(exc)))
            continue
        if file.path in seen:
            problems.append(Problem(f"{field}.path", f"{file.path!r} is named twice: each path once"))
        seen.add(file.path)
        parents = [str(p) for p in PurePosixPath(file.path).parents if str(p) != "."]
        clash = next((p for p in parents if p in paths), None)
        if clash is not None:
            problems.append(
                Problem(f"{field}.path", f"{file.path!r} lies under {clash!r}, which is a file too")
            )
        if isinstance(file.size, bool) or not isinstance(file.size, int) or file.size < 0:
            problems.append(Problem(f"{field}.size", f"is a whole number of bytes >= 0, not {file.size!r}"))
        if not _is_md5(file.md5):
            problems.append(Problem(f"{field}.md5", "is the base64 of a 16-byte md5 digest"))
    return problems


def _is_md5(value: str) -> bool:
    try:
        return isinstance(value, str) and len(base64.b64decode(value, validate=True)) == 16
    except (binascii.Error, ValueError):
        return False


def _still_open(upload: VolumeUpload) -> None:
    if upload.state == UploadState.SUPERSEDED:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"upload_id: {upload.id:x} was replaced by a later upload of the volume (or the volume deleted):"
            " run seq volume put again",
        )
    if upload.expires_at <= utcnow():
        raise Refusal(
            RefusalKind.CONFLICT,
            f"upload_id: {upload.id:x} expired at {upload.expires_at.isoformat()}: run seq volume put again",
        )


# --- rows ---------------------------------------------------------------------------------------------------


def _volume(session: Session, org_id: int, name: str, *, lock: bool = False) -> Volume | None:
    query = select(Volume).where(Volume.org_id == org_id, Volume.name == name)
    if lock:
        query = query.with_for_update()
    return session.execute(query).scalar_one_or_none()


def _current(session: Session, volume: Volume) -> VolumeVersion | None:
    if volume.version is None:
        return None
    return session.execute(
        select(VolumeVersion).where(
            VolumeVersion.volume_id == volume.id, VolumeVersion.number == volume.version
        )
    ).scalar_one_or_none()


def _highest(session: Session, volume_id: int) -> int | None:
    found: int | None = session.execute(
        select(func.max(VolumeVersion.number)).where(VolumeVersion.volume_id == volume_id)
    ).scalar_one()
    return found


def _files(session: Session, version_id: int) -> dict[str, tuple[int, str]]:
    rows = session.execute(
        select(VolumeFile.path, VolumeFile.size, VolumeFile.md5).where(VolumeFile.version_id == version_id)
    )
    return {path: (size, md5) for path, size, md5 in rows}


def _upload_files(session: Session, upload_id: int) -> list[VolumeUploadFile]:
    return list(
        session.execute(
            select(VolumeUploadFile)
            .where(VolumeUploadFile.upload_id == upload_id)
            .order_by(VolumeUploadFile.position)
        ).scalars()
    )


def _users(session: Session, volume: Volume) -> Iterator[tuple[HostedKind, str, int]]:
    """The org's benchmarks and deployments (not removed) whose newest version mounts `volume`, with the
    version they pin."""
    rows = session.execute(
        select(Hosted.kind, Hosted.name, HostedVersion.number, HostedVersion.declared)
        .join(HostedVersion, HostedVersion.hosted_id == Hosted.id)
        .where(Hosted.org_id == volume.org_id, Hosted.removed_at.is_(None))
        .order_by(Hosted.kind, Hosted.name, HostedVersion.number.desc())
    )
    seen: set[tuple[str, str]] = set()
    for kind, name, _number, declared in rows:
        if (kind, name) in seen:
            continue
        seen.add((kind, name))
        for pin in (declared or {}).get("volumes") or []:
            if pin.get("volume_id") == volume.id:
                yield HostedKind(kind), name, int(pin["version"])
                break
