"""Code the platform hosts for an org: benchmarks and policies registered with their code, in versions.

- The same code (by its bundle's sha256) is the same version; other code is the next version, the earlier kept
  for the evals that ran on it.
- Registering unpacks the bundle at once (a bad one is refused with the field and the rule, and nothing is
  stored), then builds the version in the background: its environment prepared, its class imported and tried
  in a box. `building` becomes `ready`, or `failed` with the reason and where it was raised.
- Builds are the execution plane's (`Builds`, composed in: `worker.builds` runs them in the gateway's
  process, a few at a time, shared fairly between orgs); this module only records what they come to. One the
  gateway did not finish (it stopped) is started again when it opens (`resume`).
- A benchmark's assets (volumes) are pinned when it registers: the version of each its registration names, or
  the one in use. The same code with other assets is another version; its build check and its episodes mount
  them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.core.refusals import Refusal, RefusalKind, bad_request, not_found
from yardstick.core.secrets import Secrets
from yardstick.core.volumes import AssetRef, Pin, Volumes
from yardstick.hosted import mounts
from yardstick.hosted.bundle import pack_bytes, tree_sha256, unpack
from yardstick.hosted.errors import BundleRefused, ImageRefused
from yardstick.hosted.images import build_of, environment_of
from yardstick.hosted.images import plan as image_plan
from yardstick.store.db import Database
from yardstick.store.models import Hosted, HostedVersion, utcnow
from yardstick.store.states import BuildStatus, HostedKind

State = Literal["new", "version", "same", "replace"]


@dataclass(frozen=True)
class Upload:
    """A registration: what it names, its code (`format`, base64 `data`, `sha256`), the image its code runs
    on, the secrets it is handed, and what the registration declares (kept, and checked against the code)."""

    kind: HostedKind
    name: str
    handler_ref: str
    code_format: str
    code_data: str
    code_sha256: str
    image: Mapping[str, Any] | None
    secrets: tuple[str, ...]
    declared: Mapping[str, Any]
    assets: tuple[AssetRef, ...] = ()


# What a version's volumes are to it, in the reasons that name them: a benchmark's assets, a policy's weights.
VOLUMES_FIELD = {HostedKind.BENCHMARK: "assets", HostedKind.POLICY: "weights"}


@dataclass(frozen=True)
class Located:
    """A hosted version as a worker plays it: its code's folder, the reference, the interpreter, the secrets
    its process is handed (names), the volume versions it mounts."""

    version_id: int
    org_id: int
    kind: HostedKind
    name: str
    number: int
    folder: Path
    handler_ref: str
    python: str
    secrets: tuple[str, ...]
    checked: Mapping[str, Any]
    assets: tuple[Pin, ...] = ()
    root: Path | None = None
    # The deployment's settings, as `seq policy set` left them (its scaling).
    settings: Mapping[str, Any] = field(default_factory=dict)


def request_limit(settings: Mapping[str, Any], checked: Mapping[str, Any] | None) -> float | None:
    """How long one answer of a deployment may take: its `timeouts.request` setting, else what its code
    declares (`seq.Timeouts(request=...)`); None where neither says."""
    set_ = settings.get("timeouts.request")
    if isinstance(set_, int | float) and not isinstance(set_, bool) and set_ > 0:
        return float(set_)
    declared = (checked or {}).get("declaration") or {}
    timeouts = declared.get("timeouts") if isinstance(declared, dict) else None
    request = timeouts.get("request") if isinstance(timeouts, dict) else None
    if isinstance(request, int | float) and not isinstance(request, bool) and request > 0:
        return float(request)
    return None


def _taken_over(latest: HostedVersion, upload: Upload, replace: bool) -> bool:
    """Whether `upload` takes a deployment over from another class (`module:Class`); a refusal naming the rule
    where it would without `replace`."""
    if upload.kind != HostedKind.POLICY or latest.handler_ref == upload.handler_ref:
        return False
    if not replace:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"name: {upload.name!r} runs {latest.handler_ref}; {upload.handler_ref} takes it over only with"
            " --replace (or deploy it under another name: --name)",
            field="name",
        )
    return True


class Builds(Protocol):
    """What builds a registered version (its environment prepared, its class tried in a box): the execution
    plane's (`worker.builds.BoxBuilds`), handed to `Hosting` by whoever composes the platform."""

    def start(self, version_id: int, org_id: int) -> None:
        """Build the version in the background, in its org's turn."""

    def wait(self, version_id: int, timeout_s: float) -> None:
        """Return once the version's build ended, or after `timeout_s`."""

    def stop(self, version_id: int) -> None:
        """Kill the version's build now (it was cancelled)."""

    def close(self) -> None:
        """Take no more builds, and kill those running."""


class NoBuilds:
    """Builds nothing: a Hosting that only reads versions (a worker's), or registers them for a builder that
    runs elsewhere."""

    def start(self, version_id: int, org_id: int) -> None:
        pass

    def wait(self, version_id: int, timeout_s: float) -> None:
        pass

    def stop(self, version_id: int) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Handed:
    """What a version's box is handed: its environment (its secrets, and where each of its volumes is), the
    volume folders it mounts with their places, and its secrets' values, which are masked (`***`) wherever
    what the box said is shown."""

    env: dict[str, str]
    mounted: list[tuple[Path, str]]
    secrets: tuple[str, ...]

    @property
    def digest(self) -> str:
        """What a warm box was started with: a box handed other secrets is another box."""
        return hashlib.sha256(json.dumps(sorted(self.env.items())).encode()).hexdigest()

    def masked(self, value: Masked) -> Masked:
        return mask(value, self.secrets)


Masked = TypeVar("Masked")


def mask(value: Masked, secrets: Iterable[str]) -> Masked:
    """`value` (a text, or a document of texts) with every secret value in it written `***`, the longest
    first, so one that holds another goes whole."""
    values = sorted({secret for secret in secrets if secret}, key=len, reverse=True)
    if not values:
        return value

    def masked(part: Any) -> Any:
        if isinstance(part, str):
            for secret in values:
                part = part.replace(secret, "***")
            return part
        if isinstance(part, dict):
            return {key: masked(item) for key, item in part.items()}
        if isinstance(part, list | tuple):
            return type(part)(masked(item) for item in part)
        return part

    return cast(Masked, masked(value))


class Hosting:
    """An org's hosted versions, on `db`, their code under `root`. `builds` (made from this Hosting, as it
    reads and records what it builds) builds what registers."""

    def __init__(
        self,
        db: Database,
        root: Path,
        secrets: Secrets,
        volumes: Volumes,
        builds: Callable[[Hosting], Builds] = lambda hosting: NoBuilds(),
        mirror: str | None = None,
    ) -> None:
        self.db = db
        # The registry an image's base is pulled from (None: images with a system of their own are refused).
        self.mirror = mirror
        self.root = Path(root)
        self.secrets = secrets
        self.volumes = volumes
        self.builds = builds(self)

    def close(self) -> None:
        """Take no more builds, and kill the boxes of those building."""
        self.builds.close()

    # --- registering ---------------------------------------------------------------------------------

    def would(self, org_id: int, upload: Upload, *, replace: bool = True) -> tuple[State, int]:
        """What registering `upload` would do, changing nothing (every refusal it would meet, met now)."""
        pins = self._checked_upload(org_id, upload)
        with self.db.reading() as session:
            hosted = _hosted(session, org_id, upload.kind, upload.name)
            if hosted is None:
                return "new", 1
            latest = _latest(session, hosted.id)
            held = hosted.removed_at is None
        if latest is not None and _same(latest, upload, pins):
            return "same", latest.number
        if held and latest is not None and _taken_over(latest, upload, replace):
            return "replace", latest.number + 1
        return "version", (latest.number + 1 if latest is not None else 1)

    def register(self, org_id: int, upload: Upload, *, replace: bool = True) -> HostedVersion:
        """Register `upload`: the same code answers its version as it is (rebuilt if it failed); other code
        is the next version, building. A deployment another class holds is taken over only with `replace`."""
        pins = self._checked_upload(org_id, upload)
        with self.db.writing() as session:
            hosted = _hosted(session, org_id, upload.kind, upload.name)
            # A removed deployment's name is free: no class holds it.
            held = hosted is not None and hosted.removed_at is None
            if hosted is None:
                hosted = Hosted(org_id=org_id, kind=upload.kind, name=upload.name)
                session.add(hosted)
                session.flush()
            elif hosted.removed_at is not None:
                hosted.removed_at = None
            latest = _latest(session, hosted.id)
            if held and latest is not None and not _same(latest, upload, pins):
                _taken_over(latest, upload, replace)
            if latest is not None and _same(latest, upload, pins):
                if latest.status not in (BuildStatus.FAILED, BuildStatus.CANCELLED):
                    return latest
                # The same code again after a failed build: built again as the same version (the failure may
                # have been the environment's: an index down, a secret since set).
                latest.status, latest.error, latest.checked = BuildStatus.BUILDING, None, None
                latest.declared = _declared(upload, pins)
                rebuild = latest
            else:
                rebuild = self._new_version(session, org_id, hosted, latest, upload, pins)
            hosted.serving = None  # a deploy means "serve this": a rollback's pin goes
        # The build reads the version in a session of its own: it starts once this one is committed.
        self.builds.start(rebuild.id, org_id)
        return rebuild

    def _new_version(
        self,
        session: Session,
        org_id: int,
        hosted: Hosted,
        latest: HostedVersion | None,
        upload: Upload,
        pins: list[Pin],
    ) -> HostedVersion:
        number = (latest.number + 1) if latest is not None else 1
        folder = f"{org_id:x}/{upload.kind}/{upload.name}/v{number}-{upload.code_sha256[:12]}"
        try:
            bundle = unpack(
                upload.code_format, upload.code_data, upload.code_sha256, self.root / folder / "code"
            )
        except BundleRefused as refused:
            _prune_empty(self.root / folder, self.root)
            raise bad_request(str(refused), field=refused.field) from None
        version = HostedVersion(
            hosted_id=hosted.id,
            number=number,
            code_sha256=upload.code_sha256,
            tree_sha256=tree_sha256(bundle.folder),
            handler_ref=upload.handler_ref,
            folder=folder,
            declared=_declared(upload, pins),
            status=BuildStatus.BUILDING,
        )
        session.add(version)
        session.flush()
        return version

    def _checked_upload(self, org_id: int, upload: Upload) -> list[Pin]:
        """The registration's refusals, met now; the volume versions its assets pin."""
        try:
            image_plan(upload.image)
            build_of(upload.image, self.mirror)
        except ImageRefused as refused:
            raise bad_request(str(refused), field=refused.field) from None
        missing = self.secrets.missing(org_id, upload.secrets)
        if missing:
            raise bad_request(
                f"secrets: {', '.join(map(repr, missing))} is no secret of your organization:"
                " set it first (seq secret set NAME --env KEY)"
            )
        return self.volumes.pin(org_id, upload.assets)

    # --- building ----------------------------------------------------------------------------------------

    def resume(self) -> None:
        """Start again every build a gateway left unfinished."""
        with self.db.reading() as session:
            unfinished = session.execute(
                select(HostedVersion.id, Hosted.org_id)
                .join(Hosted, Hosted.id == HostedVersion.hosted_id)
                .where(HostedVersion.status == BuildStatus.BUILDING)
            ).all()
        for version_id, org_id in unfinished:
            self.builds.start(version_id, org_id)

    def wait(self, version_id: int, timeout_s: float) -> HostedVersion:
        """The version, once its build ended or `timeout_s` passed."""
        self.builds.wait(version_id, timeout_s)
        with self.db.reading() as session:
            found = session.get(HostedVersion, version_id)
        assert found is not None
        return found

    def building(self, version_id: int) -> bool:
        """Whether the version still waits for its build to end (not cancelled meanwhile)."""
        with self.db.reading() as session:
            found = session.get(HostedVersion, version_id)
            return found is not None and found.status == BuildStatus.BUILDING

    def env_folder(self, version_id: int) -> Path:
        """Where a version's prepared environment is kept (beside its code)."""
        return self.root / _folder(self.db, version_id) / "env"

    def ended(self, version_id: int, checked: dict[str, Any] | None, error: str | None) -> None:
        """Record what a version's build came to (unless it was cancelled meanwhile)."""
        with self.db.writing() as session:
            version = session.get(HostedVersion, version_id)
            if version is None or version.status != BuildStatus.BUILDING:
                return  # cancelled meanwhile
            version.checked = checked
            version.status = BuildStatus.FAILED if error else BuildStatus.READY
            version.error = error[:4000] if error else None
            version.built_at = utcnow()

    # --- reading -----------------------------------------------------------------------------------------

    def box_of(self, located: Located) -> Handed:
        """What a version's box is handed, read now (a secret set or removed since the last box is the new
        value, or absent). LookupError naming a volume deleted since."""
        secrets = self.secrets.unsealed(located.org_id, located.secrets)
        # The image's env steps first: a secret of the same name is the value the org set.
        env = {**environment_of(located.checked.get("image") or None), **secrets}
        mounted = self.volumes.mounted(located.assets)
        env.update(mounts.environment({pin.name: pin.mount for pin in located.assets}))
        return Handed(env, mounted, tuple(value for value in secrets.values() if value))

    def located(self, version_id: int, *, building: bool = False) -> Located:
        """A version as a worker (or its build) finds it. Refused unless it is ready (or being built)."""
        with self.db.reading() as session:
            found = session.execute(
                select(HostedVersion, Hosted)
                .join(Hosted, Hosted.id == HostedVersion.hosted_id)
                .where(HostedVersion.id == version_id)
            ).one_or_none()
        if found is None:
            raise not_found(f"no hosted version {version_id:x}")
        version, hosted = found
        if not building and version.status != BuildStatus.READY:
            raise Refusal(
                RefusalKind.CONFLICT, f"{hosted.kind} {hosted.name} v{version.number} is {version.status}"
            )
        declared = dict(version.declared)
        checked = {**declared, **(version.checked or {})} if not building else declared
        return Located(
            version_id=version.id,
            org_id=hosted.org_id,
            kind=HostedKind(hosted.kind),
            name=hosted.name,
            number=version.number,
            folder=self.root / version.folder / "code",
            handler_ref=version.handler_ref,
            python=str((version.checked or {}).get("python") or ""),
            secrets=tuple(declared.get("secrets") or ()),
            checked=checked,
            assets=tuple(Pin.from_json(pin) for pin in declared.get("volumes") or ()),
            root=Path(root) if (root := (version.checked or {}).get("root")) else None,
            settings=dict(hosted.settings or {}),
        )

    def current(self, org_id: int, kind: HostedKind, name: str) -> tuple[Hosted, HostedVersion]:
        with self.db.reading() as session:
            hosted = _hosted(session, org_id, kind, name)
            latest = _latest(session, hosted.id) if hosted is not None and hosted.removed_at is None else None
        if hosted is None or latest is None:
            raise not_found(f"{kind}: no {kind} {name!r} in your organization")
        return hosted, latest

    def ready(self, org_id: int, kind: HostedKind, name: str) -> tuple[Hosted, HostedVersion] | None:
        """The version of a hosted benchmark or policy that serves (the newest ready one, or the one a
        rollback pinned), or None where it has none."""
        with self.db.reading() as session:
            hosted = _hosted(session, org_id, kind, name)
            if hosted is None or hosted.removed_at is not None:
                return None
            ready = session.execute(
                select(HostedVersion)
                .where(HostedVersion.hosted_id == hosted.id, HostedVersion.status == BuildStatus.READY)
                .order_by(HostedVersion.number.desc())
            ).scalars()
            version = serving_of(hosted, list(ready))
        return None if version is None else (hosted, version)

    def runnable(self, org_id: int, kind: HostedKind) -> set[str]:
        """The org's names of `kind` with a version that passed its build, in one read."""
        with self.db.reading() as session:
            found = session.execute(
                select(Hosted.name)
                .join(HostedVersion, HostedVersion.hosted_id == Hosted.id)
                .where(
                    Hosted.org_id == org_id,
                    Hosted.kind == kind,
                    Hosted.removed_at.is_(None),
                    HostedVersion.status == BuildStatus.READY,
                )
                .distinct()
            ).scalars()
            return set(found)

    def versions(self, org_id: int, kind: HostedKind, name: str) -> tuple[Hosted, list[HostedVersion]]:
        """A hosted benchmark's or policy's versions, newest first."""
        with self.db.reading() as session:
            return named_versions(session, org_id, kind, name)

    def source(self, org_id: int, kind: HostedKind, name: str, number: int) -> bytes:
        """The code of one version as a tar.gz of its files, as they were unpacked."""
        _, versions = self.versions(org_id, kind, name)
        version = next((v for v in versions if v.number == number), None)
        if version is None:
            raise not_found(f"version: {kind} {name!r} has no version {number}")
        return pack_bytes(self.root / version.folder / "code", top=f"{name}-v{number}")

    def listed(self, org_id: int, kind: HostedKind) -> list[tuple[Hosted, HostedVersion]]:
        with self.db.reading() as session:
            rows = session.execute(
                select(Hosted)
                .where(Hosted.org_id == org_id, Hosted.kind == kind, Hosted.removed_at.is_(None))
                .order_by(Hosted.created_at.desc(), Hosted.id)
            ).scalars()
            out = []
            for hosted in rows:
                latest = _latest(session, hosted.id)
                if latest is not None:
                    out.append((hosted, latest))
        return out

    # --- changing ---------------------------------------------------------------------------------------

    def cancel(self, org_id: int, kind: HostedKind, name: str) -> HostedVersion:
        """Cancel the newest version's build (it is left `canceled`)."""
        with self.db.writing() as session:
            hosted = _hosted(session, org_id, kind, name)
            latest = _latest(session, hosted.id) if hosted is not None else None
            if hosted is None or latest is None:
                raise not_found(f"{kind}: no {kind} {name!r} in your organization")
            if latest.status != BuildStatus.BUILDING:
                raise Refusal(
                    RefusalKind.CONFLICT,
                    f"{kind} {name} v{latest.number} is {latest.status}: no build to cancel",
                )
            latest.status, latest.error, latest.built_at = (
                BuildStatus.CANCELLED,
                "canceled: by request",
                utcnow(),
            )
            cancelled = latest
        self.builds.stop(cancelled.id)  # its box dies now, not when its check would have ended
        return cancelled

    def remove(self, org_id: int, kind: HostedKind, name: str) -> None:
        """Take it off the org's list; its versions stay for the evals that ran on them."""
        with self.db.writing() as session:
            hosted = _hosted(session, org_id, kind, name)
            if hosted is None or hosted.removed_at is not None:
                raise not_found(f"{kind}: no {kind} {name!r} in your organization")
            hosted.removed_at = utcnow()

    def set_stopped(self, org_id: int, name: str, stopped: bool) -> HostedVersion:
        """Stop or start a deployment; its newest version."""
        with self.db.writing() as session:
            hosted = _hosted(session, org_id, HostedKind.POLICY, name)
            latest = _latest(session, hosted.id) if hosted is not None and hosted.removed_at is None else None
            if hosted is None or latest is None:
                raise not_found(f"deployment: no deployment {name!r} in your organization")
            hosted.stopped = stopped
            return latest

    def change_settings(self, org_id: int, name: str, changes: Mapping[str, Any], rev: int | None) -> Hosted:
        """Lay `changes` over a policy's settings (a None value takes one back to its default). With `rev`, a
        change made from a view older than the settings is refused."""
        with self.db.writing() as session:
            hosted = _hosted(session, org_id, HostedKind.POLICY, name)
            if hosted is None or hosted.removed_at is not None:
                raise not_found(f"deployment: no deployment {name!r} in your organization")
            if rev is not None and rev != hosted.settings_rev:
                raise Refusal(
                    RefusalKind.CONFLICT,
                    f"rev: the settings are at rev {hosted.settings_rev}, the change was made from {rev}:"
                    " read them again and change from there",
                )
            settings = dict(hosted.settings)
            for key, value in changes.items():
                if value is None:
                    settings.pop(key, None)
                else:
                    settings[key] = value
            hosted.settings, hosted.settings_rev = settings, hosted.settings_rev + 1
            return hosted


def serving_policies(session: Session, org_id: int | None = None) -> dict[int, tuple[Hosted, HostedVersion]]:
    """Every deployment (policy or planner) not removed that has a version serving, by its id, with that
    version (`serving_of`): the org's, or every org's; in one read."""
    query = (
        select(Hosted, HostedVersion)
        .join(HostedVersion, HostedVersion.hosted_id == Hosted.id)
        .where(
            Hosted.kind == HostedKind.POLICY,
            Hosted.removed_at.is_(None),
            HostedVersion.status == BuildStatus.READY,
        )
    )
    if org_id is not None:
        query = query.where(Hosted.org_id == org_id)
    ready: dict[int, tuple[Hosted, list[HostedVersion]]] = {}
    for hosted, version in session.execute(query).all():
        ready.setdefault(hosted.id, (hosted, []))[1].append(version)
    serving = {key: (hosted, serving_of(hosted, versions)) for key, (hosted, versions) in ready.items()}
    return {key: (hosted, version) for key, (hosted, version) in serving.items() if version is not None}


def serving_of(hosted: Hosted, versions: Sequence[HostedVersion]) -> HostedVersion | None:
    """The version that serves: the one a rollback pinned while it is ready, else the newest ready one."""
    ready = [v for v in versions if v.status == BuildStatus.READY]
    pinned = next((v for v in ready if v.number == hosted.serving), None)
    return pinned or max(ready, key=lambda v: v.number, default=None)


def named_versions(
    session: Session, org_id: int, kind: HostedKind, name: str
) -> tuple[Hosted, list[HostedVersion]]:
    """A hosted name that is not removed, and its versions, newest first; not found otherwise."""
    hosted = _hosted(session, org_id, kind, name)
    if hosted is None or hosted.removed_at is not None:
        raise not_found(f"{kind}: no {kind} {name!r} in your organization")
    rows = session.execute(
        select(HostedVersion)
        .where(HostedVersion.hosted_id == hosted.id)
        .order_by(HostedVersion.number.desc())
    ).scalars()
    return hosted, list(rows)


def hosted_named(session: Session, org_id: int, kind: HostedKind, name: str) -> Hosted | None:
    """The row of a hosted name, removed or not."""
    return _hosted(session, org_id, kind, name)


def _hosted(session: Session, org_id: int, kind: HostedKind, name: str) -> Hosted | None:
    return session.execute(
        select(Hosted).where(Hosted.org_id == org_id, Hosted.kind == kind, Hosted.name == name)
    ).scalar_one_or_none()


def _latest(session: Session, hosted_id: int) -> HostedVersion | None:
    return session.execute(
        select(HostedVersion)
        .where(HostedVersion.hosted_id == hosted_id)
        .order_by(HostedVersion.number.desc())
        .limit(1)
    ).scalar_one_or_none()


def _same(latest: HostedVersion, upload: Upload, pins: Sequence[Pin]) -> bool:
    """Whether `upload` is `latest` again: the same code, mounting the same volume versions."""
    return latest.code_sha256 == upload.code_sha256 and (latest.declared.get("volumes") or []) == [
        pin.as_json() for pin in pins
    ]


def _declared(upload: Upload, pins: list[Pin]) -> dict[str, Any]:
    """What a version keeps of its registration: what it declared, its image, the secrets it is handed and the
    volume versions its assets pin."""
    return {
        **upload.declared,
        "image": dict(upload.image or {}),
        "secrets": list(upload.secrets),
        "volumes": [pin.as_json() for pin in pins],
    }


def _prune_empty(folder: Path, root: Path) -> None:
    """Remove `folder` and its parents up to `root` while they are empty: a refused bundle leaves no trace."""
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (another version lives there), or already gone
        folder = folder.parent


def _folder(db: Database, version_id: int) -> str:
    with db.reading() as session:
        version = session.get(HostedVersion, version_id)
    assert version is not None
    return version.folder
