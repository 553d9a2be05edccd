"""`yardstick image base`: a base image for policy images, made from this install with no network.

A machine that reaches no registry outside cannot pull `python:3.11-slim`; it has a Python already. The base
is that Python's root filesystem: its interpreter and standard library, the packages a policy server imports
(numpy, msgpack, websockets, pydantic, PyYAML, Pillow, grpc), Yardstick, the system libraries they link, and
`python3` on the PATH, imported into podman's store (`podman import`) under a local tag. An image built
`FROM` it (examples/policy-image/) adds its policy and serves it as the published contract asks
(`python3 -m yardstick.wire.server.contract module:Class`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import yardstick
from yardstick.worker.boxes.containers import Podman

BASE_TAG: Final = "localhost/yardstick-base:latest"
# What a policy server imports beside the standard library (`yardstick.wire.server`).
PACKAGES: Final = (
    "numpy", "numpy.libs", "msgpack", "websockets", "pydantic", "pydantic_core", "annotated_types",
    "typing_inspection", "typing_extensions.py", "yaml", "PIL", "pillow.libs", "grpc",
)  # fmt: skip
# Parts of the standard library no policy server reads.
SKIPPED: Final = frozenset(
    {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages", "__pycache__"}
)
SITE: Final = "/site"
IMPORT_TIMEOUT_S: Final = 600.0


def build_base(podman: Podman, tag: str = BASE_TAG) -> str:
    """Make the base from this interpreter and import it into `podman`'s store as `tag`; the tag."""
    with tempfile.TemporaryDirectory(prefix="ys-base-") as scratch:
        archive = rootfs_archive(Path(scratch))
        python = _interpreter()
        done = podman.call(
            "import",
            "--change", f"ENV PYTHONPATH={SITE}",
            "--change", "ENV PYTHONDONTWRITEBYTECODE=1",
            "--change", f'CMD ["{python}"]',
            str(archive), tag,
            timeout=IMPORT_TIMEOUT_S,
        )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"podman import: {' '.join((done.stdout + done.stderr).split())[-600:]}")
    return tag


def _interpreter() -> Path:
    return Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"


def rootfs_archive(where: Path, app: Mapping[str, str] | None = None) -> Path:
    """The root filesystem as a tar ready for `podman import`, written in `where`; `app` names files to put
    in /app ({name: text})."""
    rootfs = where / "rootfs"
    prefix = Path(sys.base_prefix)
    stdlib = Path(sysconfig.get_paths()["stdlib"])

    def copy(source: Path) -> None:
        target = rootfs / source.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True, ignore=_pycache)
        else:
            shutil.copy2(source, target, follow_symlinks=True)

    copy(_interpreter())
    for library in (prefix / "lib").glob("libpython*"):
        copy(library)
    for entry in stdlib.iterdir():
        if entry.name not in SKIPPED:
            copy(entry)
    site = Path(sysconfig.get_paths()["purelib"])
    into = rootfs / SITE.lstrip("/")
    into.mkdir(parents=True)
    for name in PACKAGES:
        source = site / name
        if source.is_dir():
            shutil.copytree(source, into / name, symlinks=True, ignore=_pycache)
        elif source.exists():
            shutil.copy2(source, into / name)
    shutil.copytree(Path(yardstick.__file__).parent, into / "yardstick", ignore=_pycache)
    objects = [rootfs / _interpreter().relative_to("/")]
    objects += [p for p in rootfs.rglob("*.so*") if p.is_file()]
    for library in _libraries(objects):
        copy(library)
        copy(library.resolve())
    for loader in Path("/lib64").glob("ld-linux*"):
        copy(loader)
        copy(loader.resolve())
    # As any Python image has it: `python3` on the PATH.
    (rootfs / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    if not (rootfs / "usr" / "bin" / "python3").exists():
        (rootfs / "usr" / "bin" / "python3").symlink_to(_interpreter())
    for folder in ("tmp", "app", "yardstick"):  # /yardstick: where a worker mounts the policy's socket
        (rootfs / folder).mkdir(exist_ok=True)
    for name, text in (app or {}).items():
        (rootfs / "app" / name).write_text(text)
    archive = where / "rootfs.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(rootfs, arcname=".")
    return archive


def _libraries(files: list[Path]) -> set[Path]:
    """The system libraries `files` (executables and shared objects) link, as ldd finds them."""
    found: set[Path] = set()
    for chunk in _chunks(files, 200):
        listed = subprocess.run(["ldd", *map(str, chunk)], capture_output=True, text=True, check=False).stdout
        for line in listed.splitlines():
            for part in line.split():
                if part.startswith("/") and Path(part).exists():
                    found.add(Path(part))
    return found


def _chunks(items: list[Path], size: int) -> Iterable[list[Path]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _pycache(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "__pycache__"]
