"""A policy image, run as a container: `ContainerPolicyServer`, and `Podman`, the runtime that runs it.

The worker runs Debian's `podman` (with `runc`, configured by a containers.conf of the install's own:
cgroupfs, file events, explicit ulimits), never a daemon of ours. What a policy container sees:

    network       none (`--network=none`): no socket to the gateway, the database or the internet
    root          its image, read-only; every capability dropped; no new privileges
    writable      /tmp (a tmpfs of the box's scratch size), /dev/shm (the box's shm size: PyTorch needs
                  more than Docker's 64 MB), and /yardstick, a folder of its own holding nothing but sockets
    limits        the install's box limits: memory (no swap past it), processes, CPUs, open files
    environment   AUTH_TOKEN, a bearer token fresh for this container, as the published contract
                  (`platform_client.policy_container`) hands it; YARDSTICK_SOCKET=/yardstick/policy.sock and
                  YARDSTICK_OPENPI_PORT=8000 for the project's own forms; nothing else of the platform's

It serves, one way or another (the first to answer a session is used, each dialled with the token):
the Positronic session on TCP 8000 (the contract's form) or openpi's dialect on that port, both reached
through `relay` (the port joined to a socket of the folder from within the container's network namespace
only), or the session protocol on the socket (the project's extension). It must answer within the warm-up
deadline, counted from the end of the pull (a miss is the image's fault, `policy_setup_crash`); a pull
past the fetch deadline is the platform's (`image_fetch_timeout`, refunded). What it prints (stdout and
stderr) is the run's `policy_log`. Every container is labelled with the install and the worker's pid:
`close()` stops and removes it, and a worker that starts removes those a dead worker of its install left
(`Podman.sweep`), so a SIGKILLed worker leaves none behind for long.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Final
from urllib.parse import urlsplit

from yardstick.core.registries import decimal_size
from yardstick.engine.failures import Failed, FailureKind
from yardstick.hosted.limits import BoxLimits
from yardstick.sdk.specs import PolicySpec
from yardstick.wire.address import SESSION_PATH, HostPort, RemoteEndpoint, Root, UnixSocket
from yardstick.worker.boxes import sandbox
from yardstick.worker.boxes.relay import POLICY_PORT, PORT_ENV, RELAY, SOCKET_NAME, Forward
from yardstick.worker.boxes.server import MAX_SOCKET_PATH, wait_any_serving
from yardstick.worker.processes import alive

SOCKET_FOLDER: Final = "/yardstick"
SOCKET_ENV: Final = "YARDSTICK_SOCKET"
INSTALL_LABEL: Final = "yardstick.install"
WORKER_LABEL: Final = "yardstick.worker-pid"
# The published contract's names and deadlines (`platform_client.policy_container`, which this layer does not
# import): the variable holding the run's bearer token, the fetch deadline (a miss is the platform's fault)
# and the warm-up deadline from the end of the pull to the first ready answer (a miss is the image's).
AUTH_TOKEN_ENV: Final = "AUTH_TOKEN"
IMAGE_FETCH_DEADLINE_S: Final = 1800.0
WARMUP_DEADLINE_S: Final = 1800.0
CALL_TIMEOUT_S: Final = 60.0
OOM_WAIT_S: Final = 10.0  # a box thrashing at its limit on a loaded machine takes seconds to be killed
PODMAN_NOT_RUNNING: Final = 125
RELAY_RETRY_S: Final = 0.2
NO_PID: Final = "0"  # podman's pid of a container not running (yet)
# RLIMIT_NPROC counts the processes of the container's user across the machine: --pids-limit is what bounds
# the container's own, this only has to be set no higher than the worker's.
NPROC: Final = 4096


class Podman:
    """The podman CLI under the install's own containers.conf (written in `config_dir`), its containers
    labelled with `install`. `insecure` registries are reached over plain HTTP (a registry on loopback)."""

    def __init__(self, config_dir: Path, install: str, *, insecure: tuple[str, ...] = ()) -> None:
        config_dir.mkdir(parents=True, exist_ok=True)
        self.config = config_dir / "containers.conf"
        self.config.write_text(_containers_conf())
        self.install = install
        self.insecure = insecure
        self.env = {**os.environ, "CONTAINERS_CONF": str(self.config)}
        # Where podman and its conmon run: conmon writes a file `oom` into its working folder when the kernel
        # kills a container for its memory, which would otherwise land wherever the worker was started.
        self.workdir = config_dir

    @staticmethod
    def available() -> bool:
        return shutil.which("podman") is not None and shutil.which("runc") is not None

    def call(self, *args: str, timeout: float = CALL_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", *args],
            env=self.env,
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def pull(
        self,
        reference: str,
        credential: Mapping[str, str] | None,
        *,
        deadline_s: float = IMAGE_FETCH_DEADLINE_S,
    ) -> bool:
        """Pull `reference` (pinned to its digest) unless it is here already (then False); Failed
        IMAGE_UNPULLABLE with the registry's word otherwise, IMAGE_FETCH_TIMEOUT (the platform's fault) past
        `deadline_s`. A credential goes through an auth file only this process reads, never a command
        line."""
        if self.call("image", "exists", reference).returncode == 0:
            return False
        registry = reference.split("/", 1)[0]
        with tempfile.TemporaryDirectory(prefix="ys-auth-") as folder:
            args = ["pull", "--quiet", f"--tls-verify={'false' if registry in self.insecure else 'true'}"]
            if credential is not None:
                auth = Path(folder) / "auth.json"
                auth.touch(mode=0o600)
                pair = f"{credential['username']}:{credential['password']}".encode()
                auth.write_text(json.dumps({"auths": {registry: {"auth": base64.b64encode(pair).decode()}}}))
                args += ["--authfile", str(auth)]
            try:
                done = self.call(*args, reference, timeout=deadline_s)
            except subprocess.TimeoutExpired:
                raise Failed(
                    f"pulling {reference} ran past the image-fetch deadline of {deadline_s:g} s "
                    "(the platform's fault)",
                    FailureKind.IMAGE_FETCH_TIMEOUT,
                ) from None
        if done.returncode != 0:
            said = " ".join(done.stderr.split())[-600:]
            raise Failed(f"{reference} could not be pulled: {said}", FailureKind.IMAGE_UNPULLABLE)
        return True

    def check_unpacked(self, reference: str, limit: int) -> None:
        """Failed IMAGE_TOO_LARGE when the pulled `reference` unpacks to more than `limit` bytes (the
        contract's second budget: a layer compresses well, a store holds what it unpacks to)."""
        shown = self.call("image", "inspect", "--format", "{{.Size}}", reference)
        size = shown.stdout.strip()
        if shown.returncode == 0 and size.isdigit() and int(size) > limit:
            raise Failed(
                f"{reference} unpacks to {int(size):,} bytes; the limit is {decimal_size(limit)} unpacked "
                f"({limit:,} bytes)",
                FailureKind.IMAGE_TOO_LARGE,
            )

    def sweep(self) -> int:
        """Remove this install's containers whose worker is dead (one SIGKILLed left them running)."""
        listed = self.call(
            "ps", "-a", "--filter", f"label={INSTALL_LABEL}={self.install}", "--format", "json"
        )
        if listed.returncode != 0:
            return 0
        gone = 0
        for row in json.loads(listed.stdout or "[]"):
            pid = str((row.get("Labels") or {}).get(WORKER_LABEL, ""))
            if not pid.isdigit() or not alive(int(pid)):
                self.call("rm", "--force", "--time", "0", str(row.get("Id")))
                gone += 1
        return gone


def install_podman(data_dir: Path, registries: tuple[str, ...]) -> Podman:
    """The podman of the install at `data_dir`: its own containers.conf, its containers labelled with the
    install; `registries` named by plain HTTP are reached so (a registry on loopback)."""
    insecure = tuple(urlsplit(url).netloc for url in registries if url.startswith("http://"))
    return Podman(data_dir / "containers", install_label(data_dir), insecure=insecure)


def install_label(data_dir: Path) -> str:
    """The label value marking the containers of the install at `data_dir`: podman's store is the machine's,
    so one install's sweep (or a test's count) must never take another install's containers for its own."""
    return hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]


def _containers_conf() -> str:
    """runc (crun fails here: it cannot set RLIMIT_NOFILE), cgroupfs (no systemd), events to a file, and
    ulimits no higher than the worker's own (raising one is refused in a container)."""
    return (
        "[containers]\n"
        'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]\n'
        "[engine]\n"
        'runtime = "runc"\n'
        'cgroup_manager = "cgroupfs"\n'
        'events_logger = "file"\n'
    )


class ContainerPolicyServer:
    """Run the pulled image `reference` as a policy server, its socket folder one of its own under
    `socket_dir`; `spec` is what it declared once it answered a session, `journal` what it prints.
    `warmup_s`: how long it has, from now (the end of its pull), to answer."""

    def __init__(
        self,
        podman: Podman,
        reference: str,
        socket_dir: Path,
        *,
        limits: BoxLimits | None = None,
        warmup_s: float = WARMUP_DEADLINE_S,
    ) -> None:
        self.podman = podman
        self.reference = reference
        limits = limits or BoxLimits()
        self.folder = Path(tempfile.mkdtemp(prefix="image-", dir=socket_dir))
        self.folder.chmod(0o777)  # the image's user, whoever it is, binds its socket here
        self.socket = self.folder / "policy.sock"
        if len(str(self.socket).encode()) > MAX_SOCKET_PATH:
            raise ValueError(f"socket_dir: {socket_dir} is too long for a unix socket path")
        # Fresh for each container, so a token one image saw opens no other's sessions.
        self.token = secrets.token_urlsafe(32)
        self.endpoint = RemoteEndpoint(
            wire="websocket_unix", address=UnixSocket(uds=PurePosixPath(str(self.socket))), token=self.token
        )
        self.name = f"ys-{uuid.uuid4().hex[:12]}"
        # Named ulimits replace the configured ones, so both are named; neither may pass the worker's own.
        files = min(limits.open_files, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        tasks = min(NPROC, resource.getrlimit(resource.RLIMIT_NPROC)[1])
        argv = [
            "podman", "run", "--name", self.name, "--pull=never",
            "--label", f"{INSTALL_LABEL}={podman.install}", "--label", f"{WORKER_LABEL}={os.getpid()}",
            "--network=none", "--read-only", "--cap-drop=all", "--security-opt=no-new-privileges",
            f"--memory={limits.memory_bytes}", f"--memory-swap={limits.memory_bytes}",
            f"--pids-limit={limits.processes}",
            f"--ulimit=nofile={files}:{files}", f"--ulimit=nproc={tasks}:{tasks}",
            f"--shm-size={limits.shm_bytes}", f"--tmpfs=/tmp:rw,size={limits.scratch_bytes},mode=1777",
            f"--volume={self.folder}:{SOCKET_FOLDER}:rw", f"--env={SOCKET_ENV}={SOCKET_FOLDER}/policy.sock",
            f"--env={PORT_ENV}={POLICY_PORT}",
            # Named bare, podman takes its value from its own environment: the token is on no command line.
            f"--env={AUTH_TOKEN_ENV}",
            *([f"--cpus={limits.cpus}"] if limits.cpus else []),
            reference,
        ]  # fmt: skip
        self._process = subprocess.Popen(
            argv,
            env={**podman.env, AUTH_TOKEN_ENV: self.token},
            cwd=podman.workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.journal = sandbox.Journal()
        self._out = sandbox.Tail(self._process.stdout, self.journal)
        self._log = sandbox.Tail(self._process.stderr, self.journal)
        self._forward: Forward | None = None
        self._relay: subprocess.Popen[bytes] | None = None
        self.warmup_s = warmup_s
        try:
            self.spec: PolicySpec
            self.spec, self.endpoint = wait_any_serving(
                self.alive, self._places, warmup_s, self._said, fatal=_on_the_socket
            )
        except BaseException:
            self.close()
            raise
        if self.endpoint.wire == "websocket_unix":
            self._close_relay()  # the session protocol answered on the socket: no server on the port
        self.ref = self._endpoint_file(socket_dir)

    @property
    def url(self) -> str:
        return self.endpoint.url

    def _endpoint_file(self, socket_dir: Path) -> str:
        """The endpoint as a file the engine dials (`wire.address.endpoint_from_ref`): its token travels
        so, never in a URL. Beside the container's folder, not in it: only the worker reads it."""
        handle, path = tempfile.mkstemp(prefix="image-", suffix=".json", dir=socket_dir)
        address = {
            name: str(value) if isinstance(value, PurePosixPath) else value
            for name, value in dataclasses.asdict(self.endpoint.address).items()
        }
        with os.fdopen(handle, "w") as file:  # mkstemp's file: this user's alone (0600)
            json.dump({"wire": self.endpoint.wire, "address": address, "token": self.token}, file)
        return path

    def alive(self) -> bool:
        return self._process.poll() is None

    def oom_killed(self) -> bool:
        """Whether the kernel killed it for passing its memory: once it has exited (a few seconds after
        the kill at most), podman's word, or its main process killed by SIGKILL (137), which nothing but
        the kernel sends a container the platform has not stopped."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=OOM_WAIT_S)
        if self._process.poll() is None:
            return False
        shown = self.podman.call("inspect", "--format", "{{.State.OOMKilled}} {{.State.ExitCode}}", self.name)
        said = shown.stdout.split() if shown.returncode == 0 else []
        return bool(said) and (said[0] == "true" or said[-1] == "137" or self._process.returncode == 137)

    def _places(self) -> list[tuple[Path, RemoteEndpoint]]:
        """Where the container may answer: its socket (the project's session form) and, once the relay
        runs in its network namespace, its port 8000: the Positronic session there (the contract's form),
        or openpi's dialect at the port's root."""
        places = [(self.socket, self.endpoint)]
        if self.alive() and self._relay is None:
            self._start_relay()
        if self._forward is not None:
            at = HostPort(host="127.0.0.1", port=self._forward.port, path=SESSION_PATH)
            session = RemoteEndpoint(wire="websocket", address=at, token=self.token)
            openpi = RemoteEndpoint(
                wire="openpi", address=Root(host="127.0.0.1", port=self._forward.port), token=self.token
            )
            places += [(self._forward.target, session), (self._forward.target, openpi)]
        return places

    def _start_relay(self) -> None:
        """Run the relay in the container's network namespace, once it has one (its pid is 0 until it
        runs), with the worker's own Python: nothing of the image's is needed, nothing of ours enters it."""
        shown = self.podman.call("inspect", "--format", "{{.State.Pid}}", self.name)
        pid = shown.stdout.strip() if shown.returncode == 0 else NO_PID
        if not pid.isdigit() or pid == NO_PID:
            time.sleep(RELAY_RETRY_S)  # the container is starting: a moment before asking again
            return
        target = self.folder / SOCKET_NAME
        # Rootless podman owns the namespace from a user namespace of its own, which `podman unshare` enters.
        enter = [] if os.geteuid() == 0 else ["podman", "unshare"]
        self._relay = subprocess.Popen(
            [*enter, "nsenter", f"--target={pid}", "--net", sys.executable, "-c", RELAY, str(target),
             str(POLICY_PORT)],
            env=self.podman.env, cwd=self.podman.workdir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._forward = Forward(target)

    def _close_relay(self) -> None:
        if self._forward is not None:
            self._forward.close()
            self._forward = None
        if self._relay is not None and self._relay.poll() is None:
            self._relay.kill()
            self._relay.wait()

    def close(self) -> None:
        """Stop the container (two seconds' grace), remove it and its socket's folder."""
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            self.podman.call("rm", "--force", "--time", "2", self.name)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=30)
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._close_relay()
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(AttributeError, FileNotFoundError):  # no file when it never served
            os.unlink(self.ref)

    def _said(self, what: str) -> str:
        with contextlib.suppress(Exception):
            self._process.wait(timeout=1)
        kind = "ran out of memory and was killed" if what == "exited" and self.oom_killed() else what
        if what.startswith("did not answer"):
            kind = f"{what}: the warm-up deadline from the end of its pull (the image's fault)"
        text = " ".join((self._out.text() + "\n" + self._log.text()).split())
        return f"the policy image {self.reference} {kind}" + (f": {text[-1500:]}" if text else "")


def _on_the_socket(endpoint: RemoteEndpoint) -> bool:
    """Whether a final refusal from `endpoint` fails the start at once: on the socket, only the image's
    server answers; on the port, the session route may be refused by an openpi server that answers at the
    root, so only the warm-up deadline decides."""
    return endpoint.wire == "websocket_unix"
