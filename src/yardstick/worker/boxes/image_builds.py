"""An image's system built by podman and unpacked as a root filesystem a box runs on (`ImageBuilder`).

A build runs the image's Containerfile (`hosted.images.build_of`: its base pulled from the install's mirror,
then its apt_install and run_commands steps) with `podman build` under the install's containers.conf, on a
network of its own (podman's bridge: the package mirrors outside are reachable, the machine's loopback — the
gateway, the database — is not, being the build's own), limited in memory and time. What it printed is the
build's log. The image is then exported once into `<images>/<key>/root` and kept: every version whose image
builds the same Containerfile shares it, and a second build finds it made (the record that it is made is
written last, beside it). That folder is the cache: podman keeps no layer of a build's steps, so its store
holds the bases and the built images alone. A box shows that root's /usr, /bin, /lib, /opt, ... and a few
files of its /etc in place of the machine's (`sandbox.Box.root`); the box's limits and isolation are the
same as on the machine's system.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final

from yardstick.hosted.images import Build
from yardstick.hosted.limits import BoxLimits
from yardstick.worker.boxes.containers import Podman

BUILD_TIMEOUT_S: Final = 1800.0
EXPORT_TIMEOUT_S: Final = 600.0
LOG_BYTES: Final = 16 * 1024
TAG: Final = "localhost/yardstick-image"


def tag_of(install: str) -> str:
    """The name an install's built images are tagged under (each install's own: the store is the
    machine's, and one install's cache must not count another's builds)."""
    return f"{TAG}-{install}"


class BuildFailed(RuntimeError):
    """A build that did not finish: the message ends with what podman said last; `log` is all it said."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


class ImageBuilder:
    """Builds images' systems with `podman` into `folder` (one root filesystem per Containerfile)."""

    def __init__(
        self,
        podman: Podman,
        folder: Path,
        *,
        limits: BoxLimits | None = None,
        kept: Callable[[Iterable[str]], None] = lambda bases: None,
    ) -> None:
        self.podman = podman
        self.folder = Path(folder)
        self.limits = limits or BoxLimits()
        # Told the bases each build pulled: the image cache records their use and keeps its size.
        self.kept = kept

    def root(self, build: Build, stop: threading.Event | None = None) -> tuple[Path, str]:
        """The root filesystem `build` makes, and what its build printed (kept from the first build)."""
        place = self.folder / build.key
        done = place.with_name(build.key + ".json")
        self.folder.mkdir(parents=True, exist_ok=True)
        with locked(place):
            if done.is_file() and (place / "root").is_dir():
                return place / "root", str(json.loads(done.read_text()).get("log", ""))
            done.unlink(missing_ok=True)
            shutil.rmtree(place, ignore_errors=True)
            place.mkdir(parents=True)
            try:
                log = self._build(build, stop)
                self._export(build, place / "root")
            except BaseException:
                shutil.rmtree(place, ignore_errors=True)
                raise
            finally:
                # The unpacked root is what is kept; the built image would only double it.
                self.podman.call("rmi", "--force", self._tag(build))
                self.kept(build.bases)
            done.write_text(json.dumps({"containerfile": build.containerfile, "log": log[-LOG_BYTES:]}))
            return place / "root", log[-LOG_BYTES:]

    def _tag(self, build: Build) -> str:
        return f"{tag_of(self.podman.install)}:{build.key}"

    def _build(self, build: Build, stop: threading.Event | None) -> str:
        tag = self._tag(build)
        with tempfile.TemporaryDirectory(prefix="ys-build-") as context:
            (Path(context) / "Containerfile").write_text(build.containerfile)
            # The mirror named by plain HTTP (a registry on loopback) is reached so.
            plain = any(f" {host}/" in build.containerfile for host in self.podman.insecure)
            argv = [
                "podman", "build", "--network=private", "--pull=missing", "--layers=false",
                f"--tls-verify={'false' if plain else 'true'}",
                f"--memory={self.limits.memory_bytes}", f"--memory-swap={self.limits.memory_bytes}",
                "--label", f"yardstick.install={self.podman.install}",
                "-t", tag, "-f", str(Path(context) / "Containerfile"), context,
            ]  # fmt: skip
            process = subprocess.Popen(
                argv, env=self.podman.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            watcher = threading.Thread(target=_stop_on, args=(stop, process), daemon=True)
            watcher.start()
            try:
                said, _ = process.communicate(timeout=BUILD_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                said, _ = process.communicate()
                raise BuildFailed(f"the build took over {BUILD_TIMEOUT_S:g} s", said) from None
            if process.returncode != 0:
                tail = " ".join(said.strip().splitlines()[-6:])[-1200:]
                raise BuildFailed(f"podman build failed: {tail}", said)
            return said

    def _export(self, build: Build, root: Path) -> None:
        """The image's files unpacked into `root` as plain files (`_plain_files`; its /dev left empty: a box
        makes its own)."""
        name = f"ys-export-{uuid.uuid4().hex[:12]}"
        made = self.podman.call("create", "--name", name, self._tag(build), "true")
        if made.returncode != 0:
            raise BuildFailed(f"the built image could not be opened: {made.stderr.strip()[-600:]}", "")
        try:
            root.mkdir(parents=True)
            with tempfile.TemporaryDirectory(prefix="ys-export-", dir=root.parent) as folder:
                tar = Path(folder) / "root.tar"
                exported = self.podman.call("export", "-o", str(tar), name, timeout=EXPORT_TIMEOUT_S)
                if exported.returncode != 0:
                    raise BuildFailed(f"the image could not be exported: {exported.stderr[-600:]}", "")
                try:
                    with tarfile.open(tar) as archive:
                        archive.extractall(root, filter=_plain_files)
                except (OSError, tarfile.TarError) as exc:
                    raise BuildFailed(f"the image could not be unpacked: {exc}", "") from None
        finally:
            self.podman.call("rm", "--force", name)


def _plain_files(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """What of an image lands on the machine's disk: files, folders and links inside the root, owned by
    the platform, with no setuid, setgid or sticky bit and no write for group or others (`tar_filter`);
    never a device node or a FIFO (an image's /dev/mem would be the machine's), nor anything in /dev."""
    if member.ischr() or member.isblk() or member.isfifo() or member.name.lstrip("./").startswith("dev/"):
        return None
    kept = tarfile.tar_filter(member, dest)
    return kept.replace(uid=os.getuid(), gid=os.getgid(), uname="", gname="", deep=False)


def _stop_on(stop: threading.Event | None, process: subprocess.Popen[str]) -> None:
    """Kill the build once `stop` is set (its version cancelled, the gateway closing)."""
    if stop is None:
        return
    while process.poll() is None:
        if stop.wait(0.2):  # a poll: the build's end is the process's, which no event reports
            if process.poll() is None:
                process.kill()
            return


@contextlib.contextmanager
def locked(dest: Path) -> Iterator[None]:
    """One maker of the folder `dest` at a time, across processes (two versions asking for it wait): a
    lock file beside it."""
    with open(dest.with_name(dest.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
