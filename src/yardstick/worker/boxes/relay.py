"""The way to a server on TCP 8000 inside a policy container, which has no network: two byte relays.

The published contract's image serves the Positronic session on TCP port 8000 (an openpi server listens on
the same port), which nothing outside a `--network=none` container can dial. So:

    inside    `RELAY`, run by the worker's own Python in the container's network namespace only (`nsenter
              --net`: the image's files are not its, so an image needs no Python), listens on the socket
              folder's `port.sock` (a path of the worker's filesystem, which the container shares) and joins
              each connection to the server's port on the container's loopback
    outside   `Forward` listens on a port of the worker's loopback and joins each connection to that
              socket, so the session wire (or openpi's, at the root) dials the server as it dials any

Both only copy bytes; neither reads them. The container's network stays closed: the relay joins its
loopback to one socket the worker alone dials, never to the host's network.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import Final

# The contract's port (`platform_client.policy_container.POLICY_PORT`); openpi's servers use it too.
POLICY_PORT: Final = 8000
PORT_ENV: Final = "YARDSTICK_OPENPI_PORT"
SOCKET_NAME: Final = "port.sock"
CHUNK: Final = 1 << 16

# Run in the container's network namespace (stdlib only): argv[1] the socket, argv[2] the server's port.
RELAY: Final = """
import os, socket, sys, threading

def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

def serve(conn, port):
    try:
        inner = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        conn.close()
        return
    inner.settimeout(None)
    threading.Thread(target=pump, args=(inner, conn), daemon=True).start()
    pump(conn, inner)

path, port = sys.argv[1], int(sys.argv[2])
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
partial = path + ".partial"
listener.bind(partial)
listener.listen(64)
os.rename(partial, path)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn, port), daemon=True).start()
"""


class Forward:
    """A port on this machine's loopback whose connections are joined to the unix socket `target`."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="yardstick-openpi-forward", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._join, args=(conn,), daemon=True).start()

    def _join(self, conn: socket.socket) -> None:
        inner = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            inner.connect(str(self.target))
        except OSError:
            conn.close()
            inner.close()
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pump, args=(inner, conn), daemon=True).start()
        _pump(conn, inner)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy `source` to `sink` until either ends, then end both."""
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
