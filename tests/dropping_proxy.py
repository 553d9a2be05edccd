"""A TCP proxy in front of a server that can drop one connection on purpose: real sockets, as a keep-alive
closed by the server (or a router) looks to a client — the request goes out and no answer ever comes."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class DroppingProxy:
    """Forwards 127.0.0.1:`port` to `target`. `drop_next(marker)` closes, without forwarding it or answering,
    the next request whose first bytes hold `marker`; `dropped` counts the requests dropped so far."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.dropped = 0
        self._marker: bytes | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def drop_next(self, marker: bytes) -> None:
        with self._lock:
            self._marker = marker

    def close(self) -> None:
        self._closed.set()
        self.listener.close()

    def __enter__(self) -> DroppingProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._forward_requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()

    def _forward_requests(self, client: socket.socket, upstream: socket.socket) -> None:
        while data := _recv(client):
            with self._lock:
                drop = self._marker is not None and self._marker in data
                if drop:
                    self._marker = None
                    self.dropped += 1
            if drop:
                for side in (client, upstream):
                    side.close()
                return
            try:
                upstream.sendall(data)
            except OSError:
                break
        _shut(client, upstream)


def _recv(side: socket.socket) -> bytes:
    try:
        return side.recv(65536)
    except OSError:
        return b""


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    while data := _recv(source):
        try:
            sink.sendall(data)
        except OSError:
            break
    _shut(source, sink)


def _shut(*sides: socket.socket) -> None:
    for side in sides:
        with contextlib.suppress(OSError):
            side.shutdown(socket.SHUT_RDWR)
        side.close()
