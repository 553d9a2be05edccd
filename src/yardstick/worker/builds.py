"""Building an org's registered versions: each one's environment prepared (`boxes.environments`), its class
imported and tried in a box (`boxes.check`), and what came of it recorded (`core.hosting.Hosting.ended`):
`building` becomes `ready`, or `failed` with the reason and where it was raised.

Builds run in the gateway's process, `BUILDERS` at a time, shared fairly between orgs (`fair.FairPool`: one
org's slow builds cannot hold every builder); each box they make is held to the install's limits and hides
its folders. A build cancelled while it waits does not start; one cancelled as it runs has its box killed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from yardstick.core.hosting import VOLUMES_FIELD, Hosting
from yardstick.hosted.errors import ImageRefused
from yardstick.hosted.limits import BoxLimits
from yardstick.store.states import HostedKind
from yardstick.worker.boxes.check import check_benchmark, check_policy
from yardstick.worker.boxes.environments import PrepareFailed, prepare
from yardstick.worker.boxes.image_builds import ImageBuilder
from yardstick.worker.fair import FairPool

BUILDERS: Final = 2
CHECK_TIMEOUT_S: Final = 300.0


class BoxBuilds:
    """`core.hosting.Builds`, in boxes. `hidden`: the install's folders every box hides; `limits` what each
    may use."""

    def __init__(
        self,
        hosting: Hosting,
        *,
        hidden: tuple[Path, ...] = (),
        limits: BoxLimits | None = None,
        images: ImageBuilder | None = None,
        mirror: str | None = None,
    ) -> None:
        self.hosting = hosting
        self.hidden = hidden
        self.limits = limits or BoxLimits()
        self.images = images
        self.mirror = mirror
        self._pool = FairPool(BUILDERS, "yardstick-build")
        self._built: dict[int, threading.Event] = {}
        # Set to stop a build's box now: its version was cancelled, or the gateway is closing.
        self._stops: dict[int, threading.Event] = {}
        self._lock = threading.Lock()

    def start(self, version_id: int, org_id: int) -> None:
        with self._lock:
            event = self._built.setdefault(version_id, threading.Event())
            event.clear()
        self._pool.submit(org_id, lambda: self._build(version_id))

    def wait(self, version_id: int, timeout_s: float) -> None:
        with self._lock:
            event = self._built.get(version_id)
        if event is not None:
            event.wait(timeout_s)

    def stop(self, version_id: int) -> None:
        with self._lock:
            stop = self._stops.get(version_id)
        if stop is not None:
            stop.set()

    def close(self) -> None:
        self._pool.shutdown()
        with self._lock:
            for stop in self._stops.values():
                stop.set()

    def _build(self, version_id: int) -> None:
        with self._lock:
            stop = self._stops.setdefault(version_id, threading.Event())
            stop.clear()
        hosting = self.hosting
        try:
            # A build cancelled while it waited for a builder does not start (read after `stop` is there, so
            # a cancel from now on reaches its box).
            if not hosting.building(version_id):
                return
            located = hosting.located(version_id, building=True)
            try:
                environment = prepare(
                    located.checked.get("image") or None,
                    hosting.env_folder(version_id),
                    hidden=self.hidden,
                    limits=self.limits,
                    stop=stop,
                    builder=self.images,
                    mirror=self.mirror,
                )
            except (ImageRefused, PrepareFailed) as exc:
                hosting.ended(version_id, None, f"image: {exc}")
                return
            try:
                handed = hosting.box_of(located)
            except LookupError as gone:
                hosting.ended(version_id, None, f"{VOLUMES_FIELD[located.kind]}: {gone}")
                return
            check = check_benchmark if located.kind == HostedKind.BENCHMARK else check_policy
            checked = check(
                located.folder,
                located.handler_ref,
                env=handed.env,
                timeout_s=CHECK_TIMEOUT_S,
                python=environment.python,
                root=environment.root,
                mounts=handed.mounted,
                hidden=self.hidden,
                limits=self.limits,
                stop=stop,
            )
            if not checked.ready:
                where = f" (at {checked.stage})" if checked.stage else ""
                # What the code printed or raised is the user's to read, its secrets masked.
                hosting.ended(
                    version_id, handed.masked(checked.to_dict()), handed.masked(f"{checked.error}{where}")
                )
                return
            mismatch = _mismatch(located.kind, located.checked, checked.declaration or {})
            if mismatch:
                hosting.ended(version_id, handed.masked(checked.to_dict()), mismatch)
                return
            # What the check printed is kept for `seq benchmark logs --build`: its secrets masked too.
            made = {"python": environment.python}
            if environment.root is not None:
                made |= {"root": str(environment.root), "image_log": environment.build_log[-4096:]}
            hosting.ended(version_id, {**handed.masked(checked.to_dict()), **made}, None)
        except Exception as exc:  # a build's own fault must end it, not leave it building for ever
            hosting.ended(version_id, None, f"the build itself failed: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                event = self._built.get(version_id)
                self._stops.pop(version_id, None)
            if event is not None:
                event.set()


def _mismatch(kind: HostedKind, declared: Mapping[str, Any], found: Mapping[str, Any]) -> str | None:
    """Where what the registration says and what the code declares differ (the same SDK wrote both, so a
    difference is an edit after the registration was made, or a request written by hand)."""
    fields: Sequence[str] = ("tasks", "seeds") if kind == HostedKind.BENCHMARK else ("hz",)
    problems = []
    for name in fields:
        said, has = declared.get(name), found.get(name)
        if said is not None and has is not None and said != has:
            problems.append(f"{name}: the registration says {said!r}, the code declares {has!r}")
    return "; ".join(problems) or None
