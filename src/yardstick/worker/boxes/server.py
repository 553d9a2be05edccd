"""A deployed policy, served in a box: `BoxedPolicyServer`.

The platform binds a unix socket in a folder of its own (one per server, in `socket_dir`), and starts
Yardstick's own policy server (`yardstick policy serve <module:Class> --no-port --uds-fd <fd>`, the bundle's
folder its import root, Yardstick's `seq` importable) in a box with no network that inherits the listening
socket and sees no folder of the machine's it could write to: not the socket's, so it can neither replace
its socket nor fill a disk. It waits until the policy answers a session and gives the address the engine
dials (`endpoint`, a `websocket_unix` RemoteEndpoint; `url` the same as text). A boxed benchmark reaches it
through that socket, the one file of the folder bound into its own box. `close()` stops it and everything it
started.

A policy that cannot be served (its file does not import, its constructor raises, the server does not come
up in time) raises `ServerFailed`, a `Failed` of kind POLICY_SETUP_CRASH, with what it said.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Final

from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.remote import RemotePolicyError, probe_spec
from yardstick.hosted.limits import BoxLimits
from yardstick.sdk.specs import PolicySpec
from yardstick.wire.address import RemoteEndpoint, UnixSocket
from yardstick.wire.errors import ConnectRefusal, ConnectRefused
from yardstick.worker.boxes import inbox, sandbox

START_TIMEOUT_S: Final = 120.0
# A unix socket's path is at most 107 bytes (sun_path less its NUL).
MAX_SOCKET_PATH: Final = 107
_SERVE: Final = "from yardstick.cli.main import main; main()"


class ServerFailed(Failed):
    """A boxed policy server that did not come up: the reason says what it said."""


class BoxedPolicyServer:
    """Serve `handler_ref` ("module:Class") of the unpacked bundle `folder` on a unix socket in
    `socket_dir`. `env` is the box's environment (secrets arrive so), `params` laid over the policy's
    constructor arguments, `python` the interpreter of its prepared environment, `mounts` the folders it
    reads at places of its own (its weights: (folder, place)), `limits` what its box may use, `root` the
    image's system it runs on (None: the machine's)."""

    def __init__(
        self,
        folder: Path,
        handler_ref: str,
        env: Mapping[str, str] | None,
        socket_dir: Path,
        *,
        params: Mapping[str, Any] | None = None,
        python: str | None = None,
        hidden: Sequence[Path] = (),
        devices: Sequence[Path] = (),
        mounts: Sequence[tuple[Path, str]] = (),
        start_timeout_s: float = START_TIMEOUT_S,
        limits: BoxLimits | None = None,
        readable: Sequence[Path] = (),
        root: Path | None = None,
    ) -> None:
        if not inbox.HANDLER_REF.fullmatch(handler_ref):
            raise ValueError(f"handler_ref: {handler_ref!r} is not {inbox.HANDLER_RULE}")
        self.folder = Path(folder).resolve()
        self.handler_ref = handler_ref
        socket_dir = Path(socket_dir).resolve()
        socket_dir.mkdir(parents=True, exist_ok=True)
        # A folder of its own, which no box sees: each server's socket is its own, and the box that serves
        # it holds only the listening descriptor.
        own = Path(tempfile.mkdtemp(prefix="policy-", dir=socket_dir))
        self.socket = own / "policy.sock"
        if len(str(self.socket).encode()) > MAX_SOCKET_PATH:
            own.rmdir()
            raise ValueError(
                f"socket_dir: {socket_dir} is too long for a unix socket path (at most ~90 bytes)"
            )
        self.endpoint = RemoteEndpoint(
            wire="websocket_unix", address=UnixSocket(uds=PurePosixPath(str(self.socket)))
        )
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(str(self.socket))
        listening.listen(128)
        interpreter = python or sys.executable
        self._params = dict(params or {})
        # Unbuffered (-u): what the policy's code prints reaches the run's logs as it prints it.
        argv = [interpreter, "-u", *self._command(listening.fileno())]
        box = sandbox.Box(
            readable=(self.folder, *readable),
            python=interpreter,
            hidden=tuple(hidden),
            devices=tuple(devices),
            mounts=tuple(mounts),
            env={**(env or {}), "PYTHONPATH": inbox.python_path(self.folder), "COLUMNS": "200"},
            cwd=self.folder,
            limits=limits or BoxLimits(),
            keep_fds=(listening.fileno(),),
            root=root,
        )
        try:
            self._process = sandbox.start(box, argv)
        finally:
            listening.close()  # the box holds it now; ours would keep accepting into nowhere
        # What the policy's code printed, on either stream, for the runs it serves.
        self.journal = sandbox.Journal()
        self._out = sandbox.Tail(self._process.stdout, self.journal)
        self._log = sandbox.Tail(self._process.stderr, self.journal)
        try:
            self.spec = self._wait(start_timeout_s)
        except BaseException:
            self.close()
            raise

    def _command(self, fd: int) -> list[str]:
        """What the box's interpreter runs, serving on the inherited descriptor `fd`."""
        argv = ["-c", _SERVE, "policy", "serve", self.handler_ref, "--no-port", "--uds-fd", str(fd)]
        for key, value in self._params.items():
            argv += ["--param", f"policy.{key}={json.dumps(value)}"]
        return argv

    def _serving(self) -> str:
        """What this server serves, as its failures name it."""
        return f"policy server for {self.handler_ref}"

    @property
    def url(self) -> str:
        return self.endpoint.url

    def log(self) -> str:
        """What the server printed, its output then its errors."""
        return self._out.text() + self._log.text()

    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        """Stop the server and everything it started; its socket goes."""
        self._process.stop()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket)
        with contextlib.suppress(OSError):
            self.socket.parent.rmdir()

    def __enter__(self) -> BoxedPolicyServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait(self, timeout_s: float) -> PolicySpec:
        return wait_serving(
            lambda: self._process.poll() is None, self.socket, self.endpoint, timeout_s, self._said
        )

    def _said(self, what: str) -> str:
        with contextlib.suppress(Exception):
            self._process.wait(timeout=1)
        text = " ".join((self._out.text() + "\n" + self._log.text()).split())
        return f"the {self._serving()} {what}" + (f": {text[-1500:]}" if text else "")


def wait_serving(
    alive: Callable[[], bool],
    socket: Path,
    endpoint: RemoteEndpoint,
    timeout_s: float,
    said: Callable[[str], str],
) -> PolicySpec:
    """The policy's declaration, once a server (alive while `alive()`) answers a session on `socket`;
    ServerFailed with what it said (`said(what happened)`) when it exits, refuses or stays silent."""
    return wait_any_serving(alive, lambda: [(socket, endpoint)], timeout_s, said)[0]


def wait_any_serving(
    alive: Callable[[], bool],
    places: Callable[[], Sequence[tuple[Path, RemoteEndpoint]]],
    timeout_s: float,
    said: Callable[[str], str],
    *,
    fatal: Callable[[RemoteEndpoint], bool] = lambda endpoint: True,
) -> tuple[PolicySpec, RemoteEndpoint]:
    """The declaration of the first of `places` (asked anew each round: (a socket that appears once its
    server listens, the endpoint that dials it)) to answer a session, and that endpoint; ServerFailed as
    `wait_serving`'s. A final refusal fails at once from an endpoint `fatal` names, else is asked again."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not alive():
            raise ServerFailed(said("exited"), FailureKind.POLICY_SETUP_CRASH)
        for listening, endpoint in places():
            if not listening.exists():
                continue
            try:
                spec = probe_spec(
                    endpoint, {}, startup_timeout=min(2.0, max(0.1, deadline - time.monotonic()))
                )
                return spec, endpoint
            except RemotePolicyError as refused:
                cause = refused.__cause__
                final = isinstance(cause, ConnectRefused) and cause.refusal is ConnectRefusal.FINAL
                if final and fatal(endpoint):
                    raise ServerFailed(
                        f"the policy server refused its sessions: {refused.reason}",
                        FailureKind.POLICY_SETUP_CRASH,
                    ) from None
        if time.monotonic() > deadline:
            raise ServerFailed(said(f"did not answer within {timeout_s:g} s"), FailureKind.POLICY_SETUP_CRASH)
        time.sleep(0.05)
