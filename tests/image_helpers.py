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
import tarfile
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

ROOT = Path(__file__).parent.parent
PODMAN_CONF = """[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""
# What a policy server imports beside the standard library (`yardstick.wire.server`).
PACKAGES = (
    "numpy", "numpy.libs", "msgpack", "websockets", "pydantic", "pydantic_core", "annotated_types",
    "typing_inspection", "typing_extensions.py", "yaml", "PIL", "pillow.libs", "grpc",
)  # fmt: skip
# Parts of the standard library no policy server reads.
SKIPPED = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages", "__pycache__"}
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


def _libraries(files: list[Path]) -> set[Path]:
    """The system libraries `files` (executables and shared objects) link, as ldd finds them."""
    found: set[Path] = set()
    for chunk in range(0, len(files), 200):
        listed = subprocess.run(
            ["ldd", *map(str, files[chunk : chunk + 200])], capture_output=True, text=True, check=False
        ).stdout
        for line in listed.splitlines():
            parts = line.split()
            for part in parts:
                if part.startswith("/") and Path(part).exists():
                    found.add(Path(part))
    return found


def build_rootfs(where: Path, extra: dict[str, str], packages: tuple[str, ...] = PACKAGES) -> Path:
    """A root filesystem holding this interpreter, `packages` (names in site-packages), Yardstick, `extra`
    files under /app ({name: text}) and every system library they link: a tar ready for `podman import`."""
    rootfs = where / "rootfs"
    prefix = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = prefix / "lib" / version

    def copy(source: Path) -> None:
        target = rootfs / source.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True, ignore=_pycache)
        else:
            shutil.copy2(source, target, follow_symlinks=True)

    copy(prefix / "bin" / version)
    for library in (prefix / "lib").glob("libpython*"):
        copy(library)
    for entry in stdlib.iterdir():
        if entry.name not in SKIPPED:
            copy(entry)
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    into = rootfs / "site"
    for name in packages:
        if (site / name).exists():
            target = into / name
            if (site / name).is_dir():
                shutil.copytree(site / name, target, symlinks=True, ignore=_pycache)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(site / name, target)
    shutil.copytree(ROOT / "src" / "yardstick", into / "yardstick", ignore=_pycache)
    app = rootfs / "app"
    app.mkdir()
    (app / "serve.py").write_text(SERVE)
    (app / "serve_openpi.py").write_text(SERVE_OPENPI)
    for name, text in extra.items():
        (app / name).write_text(text)
    objects = [rootfs / (prefix / "bin" / version).relative_to("/")]
    objects += [p for p in rootfs.rglob("*.so*") if p.is_file()]
    for library in _libraries(objects):
        copy(library)
        copy(library.resolve())
    for loader in Path("/lib64").glob("ld-linux*"):
        copy(loader)
        copy(loader.resolve())
    # As any Python image has it: `python3` on the PATH.
    (rootfs / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    (rootfs / "usr" / "bin" / "python3").symlink_to(prefix / "bin" / version)
    (rootfs / "tmp").mkdir(exist_ok=True)
    (rootfs / "yardstick").mkdir(exist_ok=True)
    archive = where / "rootfs.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(rootfs, arcname=".")
    return archive


def _pycache(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "__pycache__"]


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
