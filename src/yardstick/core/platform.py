"""The platform's composition root: one open install, and the services every front door, page and worker
calls, built on it. Contract-neutral: nothing here knows a contract's documents or codes."""

from __future__ import annotations

from collections.abc import Callable

from yardstick.core.accounts import Authenticator, Caller
from yardstick.core.act_plane import ActPlane
from yardstick.core.adapters import Adapters
from yardstick.core.audit import Audit
from yardstick.core.boards import Boards
from yardstick.core.captures import Captures
from yardstick.core.catalog import Catalog, read_catalog
from yardstick.core.checkpoints import CheckpointCurves
from yardstick.core.ended import EndedRuns
from yardstick.core.hosting import Builds, Hosting, NoBuilds
from yardstick.core.install import Install
from yardstick.core.ledger import NO_CREDITS, Ledger
from yardstick.core.lifecycle import Lifecycle
from yardstick.core.links import Links
from yardstick.core.pairwise import PairwiseBoards
from yardstick.core.reach import Reach
from yardstick.core.registries import Registries
from yardstick.core.rigs import Rigs
from yardstick.core.runs import Runs
from yardstick.core.secrets import Secrets
from yardstick.core.signing import UrlSigner
from yardstick.core.uploads import Uploads
from yardstick.core.volume_store import volume_store
from yardstick.core.volumes import Volumes
from yardstick.store.models import Org
from yardstick.store.queue import EpisodeQueue

__all__ = ["Platform"]


class Platform:
    """`builds` makes what builds registered versions, given the Hosting that records them (the execution
    plane's, composed in by the gateway; by default nothing builds)."""

    def __init__(
        self,
        install: Install,
        ledger: Ledger = NO_CREDITS,
        builds: Callable[[Hosting], Builds] = lambda hosting: NoBuilds(),
    ) -> None:
        self.install = install
        self.settings = install.settings
        self.db = install.db
        self.artifacts = install.artifacts
        self.secret = install.secret
        self.ledger = ledger
        self.signer = UrlSigner(self.secret, ttl_s=self.settings.artifact_ttl_s)
        self.queue = EpisodeQueue(
            self.db, lease_s=self.settings.lease_s, max_attempts=self.settings.max_attempts
        )
        self.accounts = Authenticator(self.db)
        self.audit = Audit(self.db)
        self.reach = Reach(self.settings.allow_remote)
        # What each process has read of ended runs, which never change (`core.ended`).
        self.ended = EndedRuns()
        self.runs = Runs(self.db, self.queue, ledger, self.ended)
        self.lifecycle = Lifecycle(self.db, self.artifacts, ledger)
        self.boards = Boards(self.db, self.secret)
        self.pairwise = PairwiseBoards(self.db, self.boards)
        self.checkpoints = CheckpointCurves(self.db, self.boards)
        self.links = Links(self.db, self.signer, self.artifacts)
        self.secrets = Secrets(self.db, self.secret)
        self.volumes = Volumes(self.db, volume_store(self.settings))
        self.uploads = Uploads(self.db, self.volumes.store, self.secret)
        mirror = self.settings.registries[0] if self.settings.registries else None
        self.hosting = Hosting(
            self.db, self.settings.hosted_root, self.secrets, self.volumes, builds, mirror=mirror
        )
        self.adapters = Adapters(self.db)
        self.rigs = Rigs(self.db, self.queue)
        self.captures = Captures(self.settings.capture_root)
        self.act_plane = ActPlane(self.db, self.secret, self.settings.seat_ttl_s, self.captures)
        self.registries = Registries(self.settings.registries, max_image_bytes=self.settings.max_image_bytes)

    def catalog(self, caller: Caller, org: Org | None = None) -> Catalog:
        """What `caller` may name (for `org`, else for any org of theirs)."""
        with self.db.reading() as session:
            return read_catalog(session, caller, org)

    def close(self) -> None:
        self.hosting.close()
        self.install.close()
