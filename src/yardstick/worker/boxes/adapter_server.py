"""An org's adapter, served in a box between a benchmark and a deployed policy: `BoxedAdapterServer`.

It is a boxed policy server (`server.BoxedPolicyServer`) whose box runs `yardstick.hosted.adapting` instead
of a policy: the adapter's one file is its folder, the policy's unix socket the one other file it sees, and
to the benchmark it is the policy, at the policy's rate and chunking. It runs in the interpreter the
benchmark's own code runs in (the contract's "in the benchmark's container": the adapter imports what the
benchmark's environment has). Its own socket, limits and reaping are the policy server's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Final

from yardstick.hosted.limits import BoxLimits
from yardstick.wire.address import RemoteEndpoint, UnixSocket
from yardstick.worker.boxes.server import BoxedPolicyServer

_ADAPT: Final = "from yardstick.hosted.adapting import main; main()"


class BoxedAdapterServer(BoxedPolicyServer):
    """Serve the adapter `class_name` of `file` (in `folder`, its sum `sha256`) in front of the policy
    reached at `inner` (a unix socket), its constructor handed `params`; `label` names it in failures."""

    def __init__(
        self,
        folder: Path,
        file: str,
        class_name: str,
        sha256: str,
        label: str,
        inner: RemoteEndpoint,
        env: Mapping[str, str] | None,
        socket_dir: Path,
        *,
        params: Mapping[str, Any] | None = None,
        python: str | None = None,
        hidden: Sequence[Path] = (),
        limits: BoxLimits | None = None,
    ) -> None:
        if not isinstance(inner.address, UnixSocket):
            raise ValueError(f"inner: an adapter reaches its policy on a unix socket, not {inner.url}")
        self.label = label
        self._adapter_argv = [
            "--file",
            str(Path(folder).resolve() / file),
            "--class-name",
            class_name,
            "--sha256",
            sha256,
            "--label",
            label,
            "--params",
            json.dumps(dict(params or {})),
            "--inner",
            inner.url,
        ]
        socket = Path(str(PurePosixPath(inner.address.uds)))
        super().__init__(
            folder,
            f"{Path(file).stem}:{class_name}",
            env,
            socket_dir,
            python=python,
            hidden=hidden,
            limits=limits,
            readable=(socket,),
        )

    def _command(self, fd: int) -> list[str]:
        return ["-c", _ADAPT, *self._adapter_argv, "--uds-fd", str(fd)]

    def _serving(self) -> str:
        return f"adapter {self.label}"
