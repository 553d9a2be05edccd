"""Policy images made here, as the machine reaches no registry outside: a root filesystem built from this
interpreter (its standard library, the few packages a policy server imports, Yardstick and the test's toy
policies, and the system libraries they link), imported by podman as an image, and pushed to a registry on
loopback (Debian's `docker-registry`, with htpasswd auth when asked)."""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from conftest import free_port
from deadlines import give_up_at, patience
from yardstick.worker.boxes.base_image import rootfs_archive

ROOT = Path(__file__).parent.parent
PODMAN_CONF = """[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""
SERVE = """import os, sys
from yardstick.catalog import resolve_to_play
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.serve import PolicyServer, ServeOptions

reference = sys.argv[1]
socket = os.environ["YARDSTICK_SOCKET"]
host = PolicyHost(resolve_to_play("policy", reference), model_id="policy", reference=reference, params={})
server = PolicyServer({"policy": host}, ServeOptions(port=None, uds=socket)).start()
print(f"serving {reference} on {socket}", flush=True)
server.wait()
"""

# The same policy as an openpi server would serve it: TCP inside the container (no socket of the platform's),
# the dialect at the root of the port the platform names.
SERVE_OPENPI = """import os, sys
from yardstick.catalog import resolve_to_play
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.serve import PolicyServer, ServeOptions

reference = sys.argv[1]
port = int(os.environ["YARDSTICK_OPENPI_PORT"])
host = PolicyHost(resolve_to_play("policy", reference), model_id="policy", reference=reference, params={})
server = PolicyServer({"policy": host}, ServeOptions(port=port, host="127.0.0.1")).start()
print(f"serving {reference} (openpi at the root) on 127.0.0.1:{port}", flush=True)
server.wait()
"""


@functools.cache
def _podman_conf() -> str:
    """The tests' podman configuration, written once a process: whole and renamed in, so another suite on the
    machine writing it at once never hands podman half of one."""
    conf = Path(os.environ.get("TMPDIR", "/tmp")) / "yardstick-tests-containers.conf"
    # Named by thread too: two threads' first calls may both write it (functools.cache does not lock).
    written = conf.with_name(f"{conf.name}.{os.getpid()}.{threading.get_ident()}")
    written.write_text(PODMAN_CONF)
    os.replace(written, conf)
    return str(conf)


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": _podman_conf()}


def podman(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["podman", *args], env=podman_env(), capture_output=True, text=True, timeout=patience(timeout)
    )
    assert done.returncode == 0, f"podman {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


def podman_call(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """podman, whatever it answers (the caller reads its status)."""
    return subprocess.run(
        ["podman", *args],
        env=podman_env(),
        capture_output=True,
        text=True,
        timeout=patience(timeout),
        check=False,
    )


def available() -> bool:
    return all(shutil.which(tool) for tool in ("podman", "runc", "docker-registry"))


def build_rootfs(where: Path, extra: dict[str, str]) -> Path:
    """The base's root filesystem (`yardstick image base`) with the serving scripts and `extra` files under
    /app ({name: text}): a tar ready for `podman import`."""
    return rootfs_archive(where, {"serve.py": SERVE, "serve_openpi.py": SERVE_OPENPI, **extra})


def import_image(
    archive: Path, tag: str, policy_ref: str, env: dict[str, str] | None = None, script: str = "serve.py"
) -> str:
    """An image of the root filesystem `archive` serving `policy_ref` (a class of its /app) with /app's
    `script` (serve.py: on $YARDSTICK_SOCKET; serve_openpi.py: openpi's dialect on TCP inside, at
    $YARDSTICK_OPENPI_PORT) with `env`, tagged `tag` in podman's store. Images of one archive share its
    layer."""
    python = f"{sys.base_prefix}/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    more = [arg for name, value in (env or {}).items() for arg in ("--change", f"ENV {name}={value}")]
    podman(
        "import",
        "--change", f'CMD ["{python}", "-u", "/app/{script}", "{policy_ref}"]',
        "--change", "ENV PYTHONPATH=/app:/site",
        "--change", "WORKDIR /app",
        *more,
        str(archive), tag,
    )  # fmt: skip
    return tag


def build_policy_image(where: Path, tag: str, policy_ref: str, files: dict[str, str]) -> str:
    """An image serving `policy_ref` (a class in `files`, put in /app), tagged `tag`."""
    return import_image(build_rootfs(where, files), tag, policy_ref)


def all_containers() -> list[dict[str, object]]:
    found: list[dict[str, object]] = json.loads(podman("ps", "-a", "--format", "json").stdout or "[]")
    return found


def remove_images(*prefixes: str) -> None:
    """Remove the images whose names start with one of `prefixes` (what a test built or pulled), then the
    dangling layers they leave: podman's store is the machine's, and each image here weighs ~300 MB."""
    listed = json.loads(podman("images", "--format", "json").stdout or "[]")
    # By name, never by id: an image of the same bytes under another name (another run's) stays.
    names = [name for image in listed for name in image.get("Names") or [] if name.startswith(prefixes)]
    if names:
        subprocess.run(["podman", "rmi", *names], env=podman_env(), capture_output=True, check=False)
    # Dangling layers an hour old at least: another suite's build on this machine may hold a fresh one.
    subprocess.run(
        ["podman", "image", "prune", "--force", "--filter", "until=1h"],
        env=podman_env(),
        capture_output=True,
        check=False,
    )


@dataclass
class Registry:
    """A registry on loopback; `credential` (user, password) when it asks for one."""

    host: str
    process: subprocess.Popen[bytes]
    credential: tuple[str, str] | None

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def push(self, local: str, repository: str) -> str:
        """Push the local image as `repository` (REPO:TAG) here; the reference a plan names."""
        reference = f"{self.host}/{repository}"
        args = ["push", "--quiet", "--tls-verify=false"]
        if self.credential is not None:
            args.append(f"--creds={self.credential[0]}:{self.credential[1]}")
        podman(*args, local, reference)
        return reference


@contextmanager
def registry(where: Path, credential: tuple[str, str] | None = None) -> Iterator[Registry]:
    port = free_port()
    where.mkdir(parents=True, exist_ok=True)
    config = [
        "version: 0.1",
        "log:\n  level: error",
        f"storage:\n  filesystem:\n    rootdirectory: {where / 'data'}\n  delete:\n    enabled: true",
        f"http:\n  addr: 127.0.0.1:{port}",
    ]
    if credential is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt

            hashed = crypt.crypt(credential[1], crypt.mksalt(crypt.METHOD_BLOWFISH))
        (where / "htpasswd").write_text(f"{credential[0]}:{hashed}\n")
        config.append(f"auth:\n  htpasswd:\n    realm: yardstick-tests\n    path: {where / 'htpasswd'}")
    (where / "config.yml").write_text("\n".join(config) + "\n")
    log = (where / "registry.log").open("wb")
    process = subprocess.Popen(
        ["docker-registry", "serve", str(where / "config.yml")], stdout=log, stderr=log
    )
    deadline = give_up_at(60)
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=2).status_code in (200, 401):
                break
        except httpx.HTTPError:
            pass
        assert process.poll() is None and time.monotonic() < deadline, (where / "registry.log").read_text()
        time.sleep(0.1)
    try:
        yield Registry(f"127.0.0.1:{port}", process, credential)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


DEBIAN_CACHE = Path.home() / ".cache" / "yardstick-tests"
# Debian 12's smallest system with python3 (what its standard modules link), from Debian's mirror.
DEBIAN_SUITE = "bookworm"


def debian_base() -> Path:
    """A tar of Debian 12's minimal root filesystem with python3, made by mmdebstrap from Debian's mirror
    (~30 s) once per machine and kept in the user's cache: the base a test's registry mirrors."""
    archive = DEBIAN_CACHE / f"{DEBIAN_SUITE}-python3.tar"
    if archive.is_file():
        return archive
    DEBIAN_CACHE.mkdir(parents=True, exist_ok=True)
    # One maker at a time across the machine's suites: two made at once differ (mmdebstrap's timestamps), and
    # the second renamed over the first while podman read the first twice failed its import's digest check.
    with open(DEBIAN_CACHE / f"{DEBIAN_SUITE}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the holder's mmdebstrap is bounded by its own timeout
        if archive.is_file():
            return archive  # made by the suite that held the lock
        partial = archive.with_suffix(f".{os.getpid()}.partial")
        made = subprocess.run(
            ["mmdebstrap", "--variant=minbase", "--include=python3", "--format=tar", "--quiet",
             DEBIAN_SUITE, str(partial), "http://deb.debian.org/debian"],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert made.returncode == 0, f"mmdebstrap: {made.stdout}{made.stderr}"
        partial.rename(archive)  # whole, or not there: a run killed halfway leaves only a .partial
    return archive
