"""Which version of a hosted name serves, and the name itself: rollback, rename, fork.

The newest version that passed its build serves, unless a rollback pinned an older ready one
(`Hosted.serving`); the next registration of that name drops the pin (`Hosting.register`), as a new deploy
means "serve this". Nothing is rebuilt by a rollback: every version keeps its code and its environment for
as long as it is kept. A rename moves the name (its versions, settings and the evals that ran it stay as
they were, those evals' reports naming it as it was then). A fork is a new name of its own, version 1 the
source's serving code, built and checked again as any deploy is, its settings copied.

The race: two renames (or a rename and a fork) to one free name at once. The name is unique per org and
kind in the database, so the second commit fails on that constraint and is answered as taken.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from yardstick.core.hosting import Hosting, hosted_named, named_versions, serving_of
from yardstick.core.refusals import Refusal, RefusalKind, not_found
from yardstick.store.models import Hosted, HostedVersion
from yardstick.store.states import BuildStatus, HostedKind

__all__ = ["Rolled", "Versions"]


@dataclass(frozen=True)
class Rolled:
    name: str
    version: int
    kept: tuple[int, ...]  # the other ready versions, which a rollback may serve next


class Versions:
    def __init__(self, hosting: Hosting) -> None:
        self.hosting = hosting
        self.db = hosting.db

    def rollback(self, org_id: int, kind: HostedKind, name: str, to: int | None) -> Rolled:
        """Serve version `to` (None: the newest ready one before the one serving) from now on."""
        with self.db.writing() as session:
            hosted, versions = named_versions(session, org_id, kind, name)
            serving = serving_of(hosted, versions)
            ready = [v for v in versions if v.status == BuildStatus.READY]
            if to is None:
                earlier = [v for v in ready if serving is None or v.number < serving.number]
                if not earlier:
                    raise Refusal(
                        RefusalKind.CONFLICT,
                        f"{kind} {name!r} has no ready version before v{serving.number if serving else '?'}"
                        " to roll back to",
                    )
                chosen = max(earlier, key=lambda v: v.number)
            else:
                found = next((v for v in versions if v.number == to), None)
                if found is None:
                    raise not_found(f"version: {kind} {name!r} has no version {to}")
                if found.status != BuildStatus.READY:
                    raise Refusal(
                        RefusalKind.CONFLICT,
                        f"version: v{to} of {name!r} is {found.status}, not ready: only a version that "
                        "passed its build can serve",
                    )
                chosen = found
            hosted.serving = chosen.number
            kept = tuple(sorted((v.number for v in ready if v.number != chosen.number), reverse=True))
            return Rolled(name, chosen.number, kept)

    def rename(self, org_id: int, kind: HostedKind, name: str, new: str) -> Hosted:
        try:
            with self.db.writing() as session:
                hosted, _ = named_versions(session, org_id, kind, name)
                self._free(session, org_id, kind, new)
                hosted.name = new
                session.flush()
                session.expunge(hosted)
                return hosted
        except IntegrityError:
            raise _taken(kind, new) from None

    def fork(self, org_id: int, kind: HostedKind, source: str, new: str) -> HostedVersion:
        """A new `new`, version 1 the serving code of `source`, building."""
        try:
            with self.db.writing() as session:
                hosted, versions = named_versions(session, org_id, kind, source)
                serving = serving_of(hosted, versions)
                if serving is None:
                    raise Refusal(RefusalKind.CONFLICT, f"{kind} {source!r} has no ready version to fork")
                self._free(session, org_id, kind, new)
                copy = Hosted(org_id=org_id, kind=kind, name=new, settings=dict(hosted.settings))
                session.add(copy)
                session.flush()
                folder = f"{org_id:x}/{kind}/{new}/v1-{serving.code_sha256[:12]}"
                shutil.copytree(
                    self.hosting.root / serving.folder / "code", self.hosting.root / folder / "code"
                )
                version = HostedVersion(
                    hosted_id=copy.id,
                    number=1,
                    code_sha256=serving.code_sha256,
                    tree_sha256=serving.tree_sha256,
                    handler_ref=serving.handler_ref,
                    folder=folder,
                    declared={**serving.declared, "name": new},
                    status=BuildStatus.BUILDING,
                )
                session.add(version)
                session.flush()
                session.expunge(version)
        except IntegrityError:
            raise _taken(kind, new) from None
        self.hosting.builds.start(version.id, org_id)
        return version

    def _free(self, session: Session, org_id: int, kind: HostedKind, name: str) -> None:
        held = hosted_named(session, org_id, kind, name)
        if held is not None:
            raise _taken(kind, name, removed=held.removed_at is not None)


def _taken(kind: HostedKind, name: str, *, removed: bool = False) -> Refusal:
    why = (
        "was a deleted one's: deploy under it to take it back, or choose another"
        if removed
        else "is taken: choose another"
    )
    return Refusal(RefusalKind.CONFLICT, f"name: {kind} name {name!r} {why}", field="name")
