"""The images an install keeps in podman's store, held under a size (`ImageCache`, `--image-cache`).

A policy image is pulled once by its digest and kept, so its next run starts without a pull; an image's
base is pulled from the mirror once and kept for the next build. Past the install's limit, what was used
longest ago goes first (its last use is recorded here as the worker starts a container of it or a build
pulls it; an image never recorded counts from its creation); an image a container still runs is never
removed. Only the install's own are counted or removed: those of its registries (by name or digest) and
its builds (`image_builds.tag_of`) — podman's store is the machine's, and what else it holds is someone
else's. Uses are recorded by the image's id, whatever name it was used by.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final

from yardstick.worker.boxes.containers import Podman
from yardstick.worker.boxes.image_builds import locked, tag_of

DEFAULT_LIMIT_BYTES: Final = 32 << 30


class ImageCache:
    """`podman`'s images of the install's `registries` (their hosts) and builds, under `limit_bytes`;
    last uses recorded in `record` (a JSON file beside the install's containers.conf)."""

    def __init__(self, podman: Podman, registries: Iterable[str], limit_bytes: int = DEFAULT_LIMIT_BYTES):
        self.podman = podman
        self.prefixes = (*(f"{host}/" for host in registries), f"{tag_of(podman.install)}:")
        self.limit_bytes = limit_bytes
        self.record = podman.config.with_name("images-used.json")

    def used(self, reference: str) -> None:
        """Record that the image `reference` (a name or name@digest) names was used now."""
        found = self.podman.call("image", "inspect", "--format", "{{.Id}}", reference)
        if found.returncode != 0 or not found.stdout.strip():
            return  # not in the store: nothing to keep
        with locked(self.record):
            seen = self._seen()
            seen[found.stdout.strip()] = time.time()
            self.record.write_text(json.dumps(seen))

    def collect(self) -> list[str]:
        """Remove the install's images used longest ago until the rest fit the limit; what went (each by
        its first name, else its digest)."""
        listed = self.podman.call("images", "--format", "json")
        running = self.podman.call("ps", "-a", "--format", "json")
        if listed.returncode != 0 or running.returncode != 0:
            return []
        busy = {str(row.get("ImageID", "")) for row in json.loads(running.stdout or "[]")}
        with locked(self.record):
            seen = self._seen()
        ours = [image for image in json.loads(listed.stdout or "[]") if self._ours(image)]
        total = sum(int(image.get("Size") or 0) for image in ours)
        removed: list[str] = []
        for image in sorted(ours, key=lambda image: _last_use(image, seen)):
            if total <= self.limit_bytes:
                break
            if str(image.get("Id")) in busy:
                continue
            # By its names (never by id alone): the same bytes under another name stay someone's.
            names = [name for name in _names(image) if name.startswith(self.prefixes)]
            if names and self.podman.call("rmi", *names).returncode == 0:
                total -= int(image.get("Size") or 0)
                removed.append(names[0])  # its name, else its digest
        return removed

    def _ours(self, image: Mapping[str, Any]) -> bool:
        return any(name.startswith(self.prefixes) for name in _names(image))

    def _seen(self) -> dict[str, float]:
        try:
            return dict(json.loads(self.record.read_text()))
        except (OSError, ValueError):
            return {}


def _names(image: Mapping[str, Any]) -> list[str]:
    return [str(name) for name in (*(image.get("Names") or ()), *(image.get("RepoDigests") or ()))]


def _last_use(image: Mapping[str, Any], seen: Mapping[str, float]) -> float:
    used = seen.get(str(image.get("Id")))
    return used if used is not None else float(image.get("Created") or 0)


__all__ = ["DEFAULT_LIMIT_BYTES", "ImageCache"]
