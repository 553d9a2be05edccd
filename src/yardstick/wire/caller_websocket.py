"""A websocket client connection that reads on the caller's thread.

`websockets.sync.client` reads every frame on a background thread and hands each message to the caller
through a queue: one thread wake-up (and a GIL hand-over) on every reply, ~12 µs measured, a good part of a
round trip on loopback. Here the caller's `recv` reads the socket itself and feeds `websockets`' sans-I/O
`ClientProtocol`, which still does all of the protocol (the upgrade, frames, masking, limits, close).

The socket stays in blocking mode for good: a read waits for it with `poll` up to the caller's deadline, and
a send blocks until it is written, as the sync client's did. Nothing changes the socket's timeout after the
upgrade, so the helper thread below and the caller never race on it. (Over TLS, poll sees a record's first
bytes: a peer that stops mid-record holds that read until it sends the rest or the connection ends.)

A helper thread keeps the connection alive while the caller is away: it sends a ping every
`ping_interval`, fails the connection when a pong is `ping_timeout` late, and, while nobody reads, reads
what has come (the server's pings to answer, pongs, a close) so a client busy elsewhere is not dropped.
It wakes once a second, never on a reply.
"""

from __future__ import annotations

import collections
import contextlib
import os
import secrets
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Mapping

from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, ConnectionClosedOK
from websockets.frames import BINARY, CONT, OK_CLOSE_CODES, PONG, TEXT, CloseCode, Frame
from websockets.http11 import USER_AGENT
from websockets.protocol import CLOSED, CONNECTING, OPEN, Event
from websockets.uri import parse_uri

try:  # the C speed-up, where websockets was built with it (as the library itself picks)
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover
    from websockets.utils import apply_mask

# One read takes this much at most: an observation of two 224² images is ~300 KB, five reads.
_READ_BYTES = 256 * 1024
# How often the helper thread looks at a connection nobody reads. A server's pings wait at most this long
# for their pong (websockets' servers allow 20 s).
_IDLE_CHECK_S = 1.0
# The first two bytes of a client's frame: FIN with the binary opcode, and the mask bit on the length.
_FIN_BINARY = 0x80 | BINARY
_MASKED = 0x80


class CallerWebsocket:
    """An open client websocket; `recv` and `close` read on the calling thread. Binary messages come back
    as bytes, text ones as str. Raises websockets' ConnectionClosed once the connection is closed."""

    def __init__(
        self,
        sock: socket.socket,
        protocol: ClientProtocol,
        early: list[Event],
        *,
        ping_interval: float | None,
        ping_timeout: float | None,
        close_timeout: float | None,
    ) -> None:
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.close_timeout = close_timeout
        self._sock = sock
        # TLS may hold decrypted bytes that poll cannot see.
        self._tls: ssl.SSLSocket | None = sock if isinstance(sock, ssl.SSLSocket) else None
        self._protocol = protocol
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)
        # `_lock` guards the protocol and the socket's writes, held briefly; `_reading` is held by whoever
        # reads the socket (the caller, or the helper while nobody else does), for as long as it waits.
        self._lock = threading.Lock()
        self._reading = threading.Lock()
        self._messages: collections.deque[bytes | str] = collections.deque()
        self._fragments: list[Frame] = []
        self._ping: bytes | None = None  # the payload of the ping awaiting its pong
        self._ping_sent = time.monotonic()
        self._cause: BaseException | None = None  # the socket error that ended the connection, if any
        self._closing_since: float | None = None
        self._stop = threading.Event()
        for event in early:  # frames that came in with the upgrade's answer
            self._take(event)
        self._helper = threading.Thread(target=self._keep_alive, name="websocket keepalive", daemon=True)
        self._helper.start()

    # ------------------------------------------------------------------------------------------ public

    def send(self, message: bytes) -> None:
        """Write one binary message. Raises ConnectionClosed once closed, OSError when the write fails.

        The frame is built here rather than by the protocol's `send_binary`: its serializer copies the
        masked payload again through a BytesIO (0.24 ms against 6 µs for 300 KB in a tight loop here,
        though bench/wire.py showed no change above its noise), where the header and the masked payload
        (the one pass masking needs) go to the socket as they are. The protocol tracks nothing of the
        data frames it did not send but a fragmented message in progress, and this never fragments."""
        mask = secrets.token_bytes(4)
        size = len(message)
        if size < 126:
            header = struct.pack("!BB", _FIN_BINARY, _MASKED | size) + mask
        elif size < 65536:
            header = struct.pack("!BBH", _FIN_BINARY, _MASKED | 126, size) + mask
        else:
            header = struct.pack("!BBQ", _FIN_BINARY, _MASKED | 127, size) + mask
        payload = apply_mask(message, mask)
        with self._lock:
            if self._protocol.state is not OPEN:
                raise self._closed()
            self._write(header, payload)

    def recv(self, timeout: float | None = None) -> bytes | str:
        """The next message. TimeoutError when none comes within `timeout` s; ConnectionClosed once the
        connection is closing or closed and every message that came before has been read."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._reading:
            while not self._messages:
                protocol = self._protocol
                # A close from the server ends the session at once; the TCP end is left to close().
                if protocol.state is CLOSED or protocol.close_rcvd is not None:
                    raise self._closed()
                close_by = self._close_by()
                if close_by is not None and (deadline is None or close_by < deadline):
                    # We failed the connection (a message over the limit, a pong too late): the server's
                    # end is due within the close timeout, and a server that does not send it is gone.
                    if not self._read(close_by):
                        self._end()
                elif not self._read(deadline):
                    raise TimeoutError(f"no message within {timeout} s")
            return self._messages.popleft()

    def close(self) -> None:
        """The close handshake, waiting `close_timeout` at most for the server's end; never raises."""
        self._stop.set()
        try:
            with self._lock:
                if self._protocol.state is OPEN:
                    self._protocol.send_close(CloseCode.NORMAL_CLOSURE)
                    self._flush()
            with self._reading:
                while self._protocol.state is not CLOSED and self._read(self._close_by()):
                    pass
        except OSError:
            pass  # the peer is gone: nothing is left to close but the socket
        finally:
            with self._reading:
                self._end()

    # ------------------------------------------------------------------------------------------ reading

    def _read(self, deadline: float | None) -> bool:
        """Read what has come, waiting until `deadline` (None: for as long as it takes) for something;
        False when nothing came in time. The caller holds `_reading`."""
        if not (self._tls is not None and self._tls.pending()):
            wait = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
            if not self._poll.poll(wait):
                return False
        try:
            data = self._sock.recv(_READ_BYTES)
        except OSError as e:  # reset, or shut down under us: the end of the stream
            self._cause = self._cause or e
            data = b""
        with self._lock:
            if data:
                self._protocol.receive_data(data)
            else:
                self._protocol.receive_eof()
            events = self._protocol.events_received()
            try:
                self._flush()  # pongs, and the echo of a close
            except OSError as e:
                self._cause = self._cause or e
        for event in events:
            self._take(event)
        if self._protocol.state is CLOSED:
            self._end()
        return True

    def _close_by(self) -> float | None:
        """When the server's end of TCP is due, once we have sent a close; None before, or for no limit."""
        if not self._protocol.close_expected() or self.close_timeout is None:
            return None
        if self._closing_since is None:
            self._closing_since = time.monotonic()
        return self._closing_since + self.close_timeout

    def _take(self, event: Event) -> None:
        """A frame the protocol parsed: a message (maybe its last fragment) to queue, or a pong."""
        if not isinstance(event, Frame):
            return
        if event.opcode is PONG:
            if event.data == self._ping:
                self._ping = None
            return
        if event.opcode not in (BINARY, TEXT, CONT):
            return  # pings are answered by the protocol, closes end it
        self._fragments.append(event)
        if not event.fin:
            return
        frames, self._fragments = self._fragments, []
        data = bytes(event.data) if len(frames) == 1 else b"".join(frame.data for frame in frames)
        self._messages.append(data.decode(errors="replace") if frames[0].opcode is TEXT else data)

    # ------------------------------------------------------------------------------------------ helpers

    def _flush(self) -> None:
        """Write what the protocol has to send. Holds `_lock`."""
        for data in self._protocol.data_to_send():
            if data:
                self._sock.sendall(data)
            else:  # the protocol's end of our stream
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_WR)

    def _write(self, header: bytes, payload: bytes) -> None:
        """Write one frame without joining its parts. Holds `_lock`."""
        if self._tls is not None:  # TLS takes no scatter list, and copies as it encrypts anyway
            self._sock.sendall(header + payload)
            return
        parts = [memoryview(header), memoryview(payload)]
        while parts:
            sent = self._sock.sendmsg(parts)
            while parts and sent >= len(parts[0]):
                sent -= len(parts[0])
                parts.pop(0)
            if parts:
                parts[0] = parts[0][sent:]

    def _closed(self) -> ConnectionClosed:
        protocol = self._protocol
        if protocol.state is CLOSED:
            closed = protocol.close_exc
        else:  # closing: the codes are known, the TCP end is not yet
            rcvd, sent = protocol.close_rcvd, protocol.close_sent
            ok = rcvd is not None and sent is not None and {rcvd.code, sent.code} <= OK_CLOSE_CODES
            kind = ConnectionClosedOK if ok else ConnectionClosedError
            closed = kind(rcvd, sent, protocol.close_rcvd_then_sent)
        if self._cause is not None:
            closed.__cause__ = self._cause
        return closed

    def _end(self) -> None:
        """Close the socket and mark the connection closed. The caller holds `_reading`: nobody else can be
        waiting on the socket, whose number the kernel may hand out again once it is closed."""
        self._stop.set()
        with self._lock:
            self._protocol.receive_eof()  # idempotent; the state is CLOSED from here
            self._protocol.data_to_send()
        with contextlib.suppress(OSError):
            self._sock.close()

    def _shut(self) -> None:
        """End TCP both ways without closing the socket: a read waiting on it wakes to the end of the
        stream, and the reader closes it."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def _keep_alive(self) -> None:
        while not self._stop.wait(_IDLE_CHECK_S):
            try:
                if self._reading.acquire(blocking=False):
                    try:
                        while self._protocol.state is not CLOSED and self._read(time.monotonic()):
                            pass
                    finally:
                        self._reading.release()
                self._ping_if_due()
            except Exception as e:  # the connection broke: the caller's next read finds its end
                self._cause = self._cause or e
                self._shut()
                return

    def _ping_if_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            if self._protocol.state is not OPEN:
                return
            if self._ping is not None:
                if self.ping_timeout is not None and now - self._ping_sent > self.ping_timeout:
                    # As websockets does: fail with 1011, then end TCP, which wakes a caller's read.
                    self._cause = TimeoutError(f"no pong within {self.ping_timeout} s")
                    self._protocol.fail(CloseCode.INTERNAL_ERROR, "keepalive ping timeout")
                    try:
                        self._flush()
                    finally:
                        self._shut()
                return
            if self.ping_interval is not None and now - self._ping_sent >= self.ping_interval:
                self._ping = os.urandom(4)
                self._ping_sent = now
                self._protocol.send_ping(self._ping)
                self._flush()


def connect(
    uri: str,
    sock: socket.socket,
    deadline: float,
    headers: Mapping[str, str] | None,
    *,
    tls: ssl.SSLContext | None,
    max_size: int,
    ping_interval: float | None,
    ping_timeout: float | None,
    close_timeout: float | None,
) -> CallerWebsocket:
    """The websocket upgrade of `uri` over the connected `sock` (with TLS first for wss://), done before
    `deadline` (time.monotonic). Raises what websockets' own client raises: InvalidURI, InvalidHandshake
    (InvalidStatus for an answer other than 101, InvalidMessage for none), TimeoutError, OSError, or
    ssl.SSLError. `sock` is the connection's from here on, and closed when the upgrade fails."""
    try:
        ws_uri = parse_uri(uri)
        if ws_uri.secure:
            sock.settimeout(_left(deadline))
            sock = (tls or ssl.create_default_context()).wrap_socket(sock, server_hostname=ws_uri.host)
        # No extensions: deflate costs the sender more CPU on camera frames than it saves on the network.
        protocol = ClientProtocol(ws_uri, max_size=max_size)
        request = protocol.connect()
        if headers:
            request.headers.update(headers)
        request.headers.setdefault("User-Agent", USER_AGENT)
        protocol.send_request(request)
        events: list[Event] = []
        while True:
            for data in protocol.data_to_send():
                if data:
                    sock.settimeout(_left(deadline))
                    sock.sendall(data)
            if protocol.state is not CONNECTING or protocol.handshake_exc is not None:
                break
            sock.settimeout(_left(deadline))
            data = sock.recv(_READ_BYTES)
            if data:
                protocol.receive_data(data)
            else:
                protocol.receive_eof()
            events.extend(protocol.events_received())
        if protocol.handshake_exc is not None:
            raise protocol.handshake_exc
        sock.settimeout(None)  # for good: see the module's docstring
        return CallerWebsocket(
            sock,
            protocol,
            events[1:],  # the first is the upgrade's answer
            ping_interval=ping_interval,
            ping_timeout=ping_timeout,
            close_timeout=close_timeout,
        )
    except BaseException:
        sock.close()
        raise


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out during the websocket upgrade")
    return left
