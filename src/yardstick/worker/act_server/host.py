"""The act workers a platform worker runs: taken as the gateway files them, served until they idle.

A thread of the platform worker's own (its main thread plays batches): every `LOOK_S` it takes a wanted act
worker (`ActPlane.claim`) while it serves fewer than `MOST_SERVED`, starts the deployment's policy in its box
and an `ActServer` in front of it, says where it listens, and beats for each it serves. One stops when no act
came for the install's `act_idle_s` (and no episode is open), when the gateway ended it (a stopped
deployment), or when its policy's server died; stopping the platform worker stops them all, boxes reaped.
Every `BEAT_S` it also files the workers a deployment's scaling keeps serving robot or not
(`ActPlane.keep_floors`), and an idle worker stops only when its deployment keeps more than that.
A planner's worker (its version declares `planner`) starts its box the same way and runs its rounds
(`planning.PlannerLoop`) instead of a server robots reach; it idles when no robot is connected below it.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from yardstick.core import planners
from yardstick.core.act_plane import BEAT_S, ActPlane, Claimed, direct_secret, platform_secret
from yardstick.core.captures import CAPTURE_SETTING, Captures
from yardstick.core.hosting import Hosting, request_limit
from yardstick.core.planners import PlannerSpec
from yardstick.core.secrets import Secrets
from yardstick.core.settings import Settings
from yardstick.core.signing import load_secret
from yardstick.core.volume_store import volume_store
from yardstick.core.volumes import Volumes
from yardstick.store.db import Database
from yardstick.store.models import Hosted, HostedVersion
from yardstick.worker.act_server.certs import make_certificate
from yardstick.worker.act_server.planning import PlannerLoop
from yardstick.worker.act_server.server import ActServer
from yardstick.worker.boxes.server import BoxedPolicyServer
from yardstick.worker.players import deployment_server

__all__ = ["ActHost"]

log = logging.getLogger(__name__)

LOOK_S: Final = 0.25
MOST_SERVED: Final = 4
# What one act may take when the deployment says nothing (seq.Timeouts(request=...) or the setting).
REQUEST_TIMEOUT_S: Final = 60.0


@dataclass
class Served:
    claimed: Claimed
    box: BoxedPolicyServer
    server: ActServer | PlannerLoop  # a policy's robots act on the one; a planner plans in the other
    beaten: float


class ActHost:
    def __init__(self, settings: Settings, db: Database, claimer: str) -> None:
        self.settings = settings
        self.db = db
        self.claimer = claimer
        self.secret = load_secret(settings.secret_file)
        self.captures = Captures(settings.capture_root)
        self.plane = ActPlane(db, self.secret, settings.seat_ttl_s, self.captures)
        self.hosting = Hosting(
            db, settings.hosted_root, Secrets(db, self.secret), Volumes(db, volume_store(settings))
        )
        self._folder = Path(tempfile.mkdtemp(prefix="ys-act-", dir="/tmp"))
        self._served: dict[int, Served] = {}
        self._floors_kept = -float("inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="yardstick-act-host", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        for worker_id in list(self._served):
            self._end(worker_id, "its platform worker stopped")
        self.hosting.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except Exception:  # the database away, say: the next round tries again
                log.exception("act host %s: a round failed", self.claimer)
            self._stop.wait(LOOK_S)

    def _round(self) -> None:
        if time.monotonic() - self._floors_kept >= BEAT_S:
            self._floors_kept = time.monotonic()
            self.plane.keep_floors()
        if len(self._served) < MOST_SERVED:
            claimed = self.plane.claim(self.claimer)
            if claimed is not None:
                self._serve(claimed)
        now = time.monotonic()
        for worker_id, served in list(self._served.items()):
            server = served.server
            why = None
            if server.failed is not None or not served.box.alive():
                why = server.failed or "its policy's server stopped"
            elif now - served.beaten >= BEAT_S:
                served.beaten = now
                idle = now - server.last_act > self.settings.act_idle_s and not server.busy()
                if idle and self.plane.may_idle(worker_id):  # not one its deployment keeps serving
                    why = f"idle: no act for {self.settings.act_idle_s:g} s"
                elif not self.plane.beat(worker_id):
                    why = "ended by the platform"
                else:
                    server.sweep()
            if why is not None:
                self._end(worker_id, why)

    def _serve(self, claimed: Claimed) -> None:
        box: BoxedPolicyServer | None = None
        try:
            located = self.hosting.located(claimed.version_id)
            handed = self.hosting.box_of(located)
            with self.db.reading() as session:
                hosted = session.get(Hosted, claimed.hosted_id)
                settings = dict(hosted.settings) if hosted is not None else {}
            box = deployment_server(self.settings, located, handed, self._folder, {})
            with self.db.reading() as session:
                version = session.get(HostedVersion, claimed.version_id)
                spec = planners.spec_of(version) if version is not None else None
            if spec is not None:
                self._plan(claimed, box, spec, _request_timeout(settings, located.checked))
                return
            certificate = make_certificate(
                self._folder / f"worker-{claimed.worker_id}", self.settings.act_host
            )
            capture = None
            if settings.get(CAPTURE_SETTING) == "on":
                capture = lambda episode_id: self.captures.episode(  # noqa: E731
                    claimed.hosted_id, claimed.worker_id, episode_id
                )
            server = ActServer(
                claimed.worker_id,
                box.endpoint,
                direct_secret(self.secret, claimed.worker_id),
                certificate,
                lambda: self.plane.seated(claimed.worker_id),
                host=self.settings.act_host,
                request_timeout_s=_request_timeout(settings, located.checked),
                capture=capture,
                platform_secret=platform_secret(self.secret, claimed.worker_id),
            )
            url = server.start()
        except Exception as exc:
            if box is not None:
                box.close()
            self.plane.ended(claimed.worker_id, f"it could not start: {exc}")
            log.warning("act worker %s could not start: %s", claimed.worker_id, exc)
            return
        self._served[claimed.worker_id] = Served(claimed, box, server, time.monotonic())
        self.plane.listening(claimed.worker_id, url, server.fingerprint)

    def _plan(self, claimed: Claimed, box: BoxedPolicyServer, spec: PlannerSpec, timeout_s: float) -> None:
        """A planner's worker: its rounds, in a thread of their own; nothing listens for robots."""
        loop = PlannerLoop(
            self.db, self.secret, claimed.hosted_id, spec, box.endpoint, request_timeout_s=timeout_s
        )
        loop.start()
        self._served[claimed.worker_id] = Served(claimed, box, loop, time.monotonic())
        self.plane.beat(claimed.worker_id)

    def _end(self, worker_id: int, why: str) -> None:
        served = self._served.pop(worker_id)
        self.plane.ended(worker_id, why)
        served.server.close()
        served.box.close()


def _request_timeout(settings: dict[str, object], checked: Mapping[str, Any]) -> float:
    limit = request_limit(settings, checked)
    return REQUEST_TIMEOUT_S if limit is None else limit
