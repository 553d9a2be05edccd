"""Bring up a policy server: build the policies, bind the ports, serve until stopped (or idle).

One asyncio loop runs the websocket side (`ws_server.py`) and the gRPC side together; each policy has its
own inference thread (`host.py`). `PolicyServer.start()` runs it all on a background thread and returns
once every port is bound (tests, benchmarks, a CLI that evaluates against its own server);
`serve_forever()` runs it on the calling thread until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from websockets.asyncio.server import serve, unix_serve

from yardstick.wire.address import bracketed
from yardstick.wire.codec import MAX_MESSAGE_BYTES
from yardstick.wire.server.grpc_service import grpc_server
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.malloc import keep_freed_memory
from yardstick.wire.server.ws_server import Activity, WebsocketRoutes

log = logging.getLogger("yardstick.server")


@dataclass
class ServeOptions:
    """Where and how to serve. `port` None serves no TCP websocket; `port` 0 takes a free one (see
    `PolicyServer.port`). `uds` adds a unix socket, `uds_fd` a listening unix socket handed in already
    bound (a boxed server, which sees no folder it could bind one in), `grpc_port` a gRPC port.
    `tls_cert`/`tls_key` turn the TCP ports into TLS ones. `token` demands `Authorization: Bearer <token>`."""

    host: str = "127.0.0.1"
    port: int | None = 8000
    uds: str | None = None
    uds_fd: int | None = None
    grpc_port: int | None = None
    token: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    idle_timeout_min: float | None = None


@dataclass
class _Bound:
    port: int | None = None
    grpc_port: int | None = None
    stop: asyncio.Event | None = None
    loop: asyncio.AbstractEventLoop | None = None
    errors: list[BaseException] = field(default_factory=list)


class PolicyServer:
    def __init__(self, hosts: dict[str, PolicyHost], options: ServeOptions) -> None:
        if not hosts:
            raise ValueError("a server serves at least one policy")
        if (
            options.port is None
            and options.uds is None
            and options.uds_fd is None
            and options.grpc_port is None
        ):
            raise ValueError("a server needs a port, a unix socket or a gRPC port to serve on")
        if (options.tls_cert is None) != (options.tls_key is None):
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        if options.uds is not None and not os.path.isabs(options.uds):
            raise ValueError(f"uds: {options.uds!r} is relative; a socket path is absolute")
        self.hosts = hosts
        self.options = options
        self.activity = Activity(None if options.idle_timeout_min is None else options.idle_timeout_min * 60)
        self._bound = _Bound()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int | None:
        return self._bound.port

    @property
    def grpc_port(self) -> int | None:
        return self._bound.grpc_port

    def start(self, timeout: float = 30.0) -> PolicyServer:
        """Serve on a background thread; returns once bound."""
        keep_freed_memory()  # see malloc.py: the loop's thread would map each request's buffers anew
        self._thread = threading.Thread(target=self._run, name="policy-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the policy server did not bind in time")
        if self._bound.errors:
            raise self._bound.errors[0]
        return self

    def wait(self) -> None:
        """Until the server stops (idle, or stopped from elsewhere); Ctrl-C reaches the caller."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def stop(self) -> None:
        bound = self._bound
        if bound.loop is not None and bound.stop is not None:
            bound.loop.call_soon_threadsafe(bound.stop.set)
        if self._thread is not None:
            self._thread.join(timeout=15)
        for host in self.hosts.values():
            host.stop()

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._bound.errors.append(exc)
            self._ready.set()
            if not isinstance(exc, KeyboardInterrupt) and self._thread is None:
                raise

    async def _main(self) -> None:
        options, bound = self.options, self._bound
        bound.loop = asyncio.get_running_loop()
        bound.stop = asyncio.Event()
        for host in self.hosts.values():
            host.start()
        meta: dict[str, Any] = {"host": options.host}
        routes = WebsocketRoutes(self.hosts, token=options.token, activity=self.activity, transport_meta=meta)
        tls = None
        if options.tls_cert is not None and options.tls_key is not None:
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls.load_cert_chain(options.tls_cert, options.tls_key)
        settings: dict[str, Any] = {
            "process_request": routes.process_request,
            "compression": None,
            "max_size": MAX_MESSAGE_BYTES,
            # Clients ping every 20 s; an inference may take long, so an unanswered ping is waited for long.
            "ping_interval": 20.0,
            "ping_timeout": 600.0,
            "close_timeout": 2.0,
        }
        servers: list[Any] = []
        if options.port is not None:
            tcp = socket.create_server((options.host, options.port), family=_family(options.host))
            bound.port = tcp.getsockname()[1]
            meta["port"] = bound.port
            servers.append(await serve(routes.handle, sock=tcp, ssl=tls, **settings))
        if options.uds is not None:
            meta["uds"] = options.uds
            servers.append(await unix_serve(routes.handle, sock=_unix_socket(Path(options.uds)), **settings))
        if options.uds_fd is not None:
            handed = socket.socket(fileno=options.uds_fd)
            if handed.family != socket.AF_UNIX:
                raise ValueError(f"uds_fd: descriptor {options.uds_fd} is no unix socket")
            servers.append(await unix_serve(routes.handle, sock=handed, **settings))
        rpc = None
        if options.grpc_port is not None:
            rpc = grpc_server(self.hosts, token=options.token, activity=self.activity, transport_meta=meta)
            where = f"{bracketed(options.host)}:{options.grpc_port}"
            if options.tls_cert is not None and options.tls_key is not None:
                credentials = grpc.ssl_server_credentials(
                    [(Path(options.tls_key).read_bytes(), Path(options.tls_cert).read_bytes())]
                )
                bound.grpc_port = rpc.add_secure_port(where, credentials)
            else:
                bound.grpc_port = rpc.add_insecure_port(where)
            if not bound.grpc_port:
                raise OSError(f"gRPC could not bind {where}")
            await rpc.start()
        self._ready.set()
        watch = asyncio.create_task(self._idle_watch()) if self.activity.idle_timeout_s else None
        try:
            await bound.stop.wait()
        finally:
            if watch is not None:
                watch.cancel()
            for server in servers:
                server.close()
            if rpc is not None:
                await rpc.stop(grace=1.0)
            for server in servers:
                await server.wait_closed()

    async def _idle_watch(self) -> None:
        idle = self.activity.idle_timeout_s
        assert idle is not None and self._bound.stop is not None
        while True:
            await asyncio.sleep(min(idle, 5.0))
            if self.activity.sessions == 0 and time.monotonic() - self.activity.last >= idle:
                log.info("idle for %.0f s: stopping", idle)
                self._bound.stop.set()
                return


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _unix_socket(path: Path) -> socket.socket:
    """Bind `path`, replacing a stale socket file left by a server that died, never a live one."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
    except OSError:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink()
            sock.bind(str(path))
        else:
            sock.close()
            raise OSError(f"{path} is served by another process") from None
        finally:
            probe.close()
    sock.listen(128)
    return sock
