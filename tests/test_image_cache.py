"""The install's images in podman's store kept under its size: those used longest ago go first, never one a
container holds, never an image that is not the install's (podman's store is the machine's)."""

from __future__ import annotations

import io
import os
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import image_helpers
from yardstick.worker.boxes.containers import Podman
from yardstick.worker.boxes.image_cache import ImageCache

pytestmark = pytest.mark.skipif(not image_helpers.available(), reason="needs podman: make containers")
# Names of this suite's own: podman's store is the machine's, and a second suite running beside this one
# would otherwise count (and remove) this one's images as its install's. The registry is never dialled: the
# images are imported under its name.
RUN = uuid.uuid4().hex[:8]
REGISTRY = f"cache-{RUN}.test:1"
INSTALL = f"cache-test-{RUN}"
HOLDER = f"cache-test-holder-{RUN}"
ELSES = f"localhost/someone-elses-{RUN}/cache-test"
MiB = 1 << 20


def _image(where: Path, name: str) -> str:
    """An image of one MiB of its own bytes, imported as `name`."""
    archive = where / f"{name.replace('/', '_').replace(':', '_')}.tar"
    with tarfile.open(archive, "w") as tar:
        data = os.urandom(MiB)
        info = tarfile.TarInfo("payload")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    image_helpers.podman("import", "--quiet", str(archive), name)
    return name


def _present(name: str) -> bool:
    return image_helpers.podman_call("image", "exists", name).returncode == 0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[dict[str, str]]:
    names = {
        key: _image(tmp_path, name)
        for key, name in {
            "old": f"{REGISTRY}/cache-test/old:v1",
            "used": f"{REGISTRY}/cache-test/used:v1",
            "newest": f"{REGISTRY}/cache-test/newest:v1",
            "elses": f"{ELSES}:v1",
        }.items()
    }
    try:
        yield names
    finally:
        image_helpers.podman_call("rm", "--force", HOLDER)
        image_helpers.remove_images(f"{REGISTRY}/cache-test/", ELSES)


def test_past_the_limit_the_image_used_longest_ago_goes_first(store: dict[str, str], tmp_path: Path) -> None:
    cache = ImageCache(Podman(tmp_path / "conf", INSTALL), [REGISTRY], limit_bytes=int(2.5 * MiB))
    cache.used(store["used"])
    cache.used(store["newest"])
    removed = cache.collect()
    # Three of the install's images of 1 MiB under 2.5 MiB: the one never used since it came goes.
    assert removed == [store["old"]]
    assert not _present(store["old"]) and _present(store["used"]) and _present(store["newest"])
    assert _present(store["elses"]), "an image not the install's was removed"


def test_an_image_a_container_holds_stays_whatever_the_limit(store: dict[str, str], tmp_path: Path) -> None:
    image_helpers.podman("create", "--name", HOLDER, store["newest"], "true")
    cache = ImageCache(Podman(tmp_path / "conf", INSTALL), [REGISTRY], limit_bytes=0)
    removed = cache.collect()
    assert sorted(removed) == sorted([store["old"], store["used"]])
    assert _present(store["newest"]) and _present(store["elses"])
