"""The websocket client connection that reads on the caller's thread: what its helper thread does while the
caller is away (answer the server's pings, notice a server that stopped answering ours)."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve
from websockets.utils import accept_key

from deadlines import give_up_at
from yardstick.wire import caller_websocket
from yardstick.wire.caller_websocket import CallerWebsocket
from yardstick.wire.codec import MAX_MESSAGE_BYTES


def _dial(port: int, *, ping_interval: float, ping_timeout: float) -> CallerWebsocket:
    deadline = give_up_at(5)
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    return caller_websocket.connect(
        f"ws://127.0.0.1:{port}/",
        sock,
        deadline,
        None,
        tls=None,
        max_size=MAX_MESSAGE_BYTES,
        ping_interval=ping_interval,
        ping_timeout=ping_timeout,
        close_timeout=1.0,
    )


@pytest.fixture
def eager_pinger() -> Iterator[int]:
    """An echo server that pings every 0.3 s and drops a client whose pong is 2 s late (the helper thread
    looks at an idle connection once a second; websockets' servers give a pong 20 s)."""

    def echo(connection: ServerConnection) -> None:
        for message in connection:
            connection.send(message)

    server: Server = serve(echo, "127.0.0.1", 0, ping_interval=0.3, ping_timeout=2.0, compression=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.socket.getsockname()[1]
    server.shutdown()
    thread.join(5)


def test_a_client_that_reads_nothing_for_a_while_still_answers_the_servers_pings(eager_pinger: int) -> None:
    connection = _dial(eager_pinger, ping_interval=20.0, ping_timeout=20.0)
    try:
        connection.send(b"before")
        assert connection.recv(timeout=5) == b"before"
        time.sleep(4.5)  # many of the server's pings, and its pong timeout twice over, with nobody reading
        connection.send(b"after")
        assert connection.recv(timeout=5) == b"after"
    finally:
        connection.close()


def test_a_server_that_stops_answering_pings_ends_a_waiting_read() -> None:
    """The upgrade is answered, then nothing: no pong ever comes, and the read waiting on it is ended
    (1011, as websockets' own client fails the connection), long before its own timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def upgrade_then_mute() -> None:
        peer, _ = listener.accept()
        with peer:
            request = b""
            while b"\r\n\r\n" not in request:
                request += peer.recv(4096)
            found = re.search(rb"Sec-WebSocket-Key: (\S+)", request, re.IGNORECASE)
            assert found is not None
            peer.sendall(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Accept: " + accept_key(found.group(1).decode()).encode() + b"\r\n\r\n"
            )
            done.wait(30)

    thread = threading.Thread(target=upgrade_then_mute, daemon=True)
    thread.start()
    connection = _dial(listener.getsockname()[1], ping_interval=0.2, ping_timeout=0.5)
    try:
        with pytest.raises(ConnectionClosed) as closed:
            connection.recv(timeout=30)
        assert closed.value.sent is not None and closed.value.sent.code == 1011
    finally:
        connection.close()
        done.set()
        thread.join(5)
        listener.close()
