"""The client side of the gRPC wires, `grpc` and `grpc_tls`.

A session is one bidirectional stream of raw bytes: no protobuf schema, no generated code. The method paths,
the metadata keys and the channel settings are those of positronic-wire 0.12.0, so positronic-model-server's
gRPC port (and ours) answers this client as it answers that one. The code is our own.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc

from yardstick.wire.address import HostPort, bracketed
from yardstick.wire.codec import MAX_MESSAGE_BYTES
from yardstick.wire.dial_websocket import SESSION_PING_SECONDS, alive_seconds_of, expect_address
from yardstick.wire.errors import ConnectRefusal, ConnectRefused, PeerDisconnected, WireError
from yardstick.wire.transport import KeepaliveUnsupported

SERVICE = "positronic.offboard.v1.Inference"
# gRPC routes on the method path alone; every session is one stream on this one.
SESSION_METHOD = f"/{SERVICE}/Session"
# The unary call beside the sessions that resets the server's idle timer: empty request, JSON answer.
KEEPALIVE_METHOD = f"/{SERVICE}/KeepAlive"
# A method no server serves: one that is up answers a call on it UNIMPLEMENTED, and opens nothing.
PROBE_METHOD = f"/{SERVICE}/ChannelProbe"

# A gRPC call has no URL, so the session's route and query travel as metadata.
SESSION_PATH_KEY = "positronic-session-path"
SESSION_QUERY_KEY = "positronic-session-query"

_PING_ANSWER_MS = 10_000
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # A front drops a connection it sees nothing on, and a session is quiet while the policy infers.
    ("grpc.keepalive_time_ms", int(SESSION_PING_SECONDS * 1000)),
    ("grpc.keepalive_timeout_ms", _PING_ANSWER_MS),
    # gRPC's defaults allow two pings without data, five minutes apart; a session needs them all along.
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.http2.min_time_between_pings_ms", int(SESSION_PING_SECONDS * 1000)),
]

# How long `close` lets the server end the stream after the half-close before cutting the call: a channel
# closed at once cuts the server's cleanup of the session short.
_CLOSE_GRACE_SECONDS = 5.0

# What a status's details say, where its code says too little. The code of a refusal no wait fixes (a TLS
# edge that cannot be used, a host with no address, a size limit) is a retryable one, and so is that of a
# connect nothing answered: only the details tell them from a backend that is starting.
_FINAL_DETAILS = (
    "CERTIFICATE_VERIFY_FAILED",
    "missing selected ALPN property",
    "Hostname Verification Check failed",
    "Domain name not found",
    "DNS server returned answer with no data",
    "exceeds hard limit",
    "message larger than max",
)
_SILENT_DETAILS = ("failed to connect to all addresses", "Timeout while contacting DNS servers")


def grpc_refusal(code: Any, details: str | None) -> ConnectRefusal:
    """What a status that ended a call before it opened says about the server. Codes read as their HTTP
    cousins: PERMISSION_DENIED as 403, UNAVAILABLE as 503, RESOURCE_EXHAUSTED as 429."""
    text = details or ""
    if any(marker in text for marker in _FINAL_DETAILS):
        return ConnectRefusal.FINAL
    if code is grpc.StatusCode.DEADLINE_EXCEEDED or any(marker in text for marker in _SILENT_DETAILS):
        return ConnectRefusal.SILENT
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return ConnectRefusal.FORBIDDEN
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
        return ConnectRefusal.COLD
    return ConnectRefusal.FINAL


def _status(error: Any) -> str:
    """A status for a message: its code's name and its details."""
    return f"{error.code().name}: {error.details()}"


def _metadata(headers: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    # gRPC refuses metadata keys with capitals, and servers read them lower case.
    return tuple((key.lower(), value) for key, value in (headers or {}).items())


# The last item of a connection's inbox: the stream is over, and `GrpcConnection._end` says how.
_END = object()


class GrpcConnection:
    """One session: a bidirectional stream on `SESSION_METHOD` over its own channel.

    The response stream has no per-message timeout, so a reader thread drains it into a queue that `recv`
    waits on. The request stream is a generator fed from another queue; gRPC asks it for the next message only
    once the previous one is written, so the generator resuming is the receipt `send` waits for.

    Once the stream is over, `send` and `recv` (after the messages that came before the end) raise the same
    error: ConnectRefused when the server answered the session with a status before any message (a refused
    credential, a route it does not serve), PeerDisconnected otherwise. Whichever call meets the end first,
    the refusal's class survives.
    """

    def __init__(self, channel: Any, where: str, metadata: tuple[tuple[str, str], ...]) -> None:
        self._channel = channel
        self._where = where
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._inbox: queue.SimpleQueue[bytes | object] = queue.SimpleQueue()
        # True for each message written; one False when the call can write no more.
        self._receipts: queue.SimpleQueue[bool] = queue.SimpleQueue()
        # Set by the reader before it queues _END, so whoever sees _END or `_stream_over` finds it.
        self._end: WireError = PeerDisconnected(f"{where} ended the session")
        self._stream_over = threading.Event()
        self._end_read = False
        self._closed = False
        session = channel.stream_stream(SESSION_METHOD, request_serializer=None, response_deserializer=None)
        self._call = session(self._requests(), metadata=metadata)
        self._reader = threading.Thread(target=self._drain, name=f"grpc reader {where}", daemon=True)
        self._reader.start()

    def _requests(self) -> Iterator[bytes]:
        while (message := self._outbox.get()) is not None:
            yield message
            self._receipts.put(True)
        # Returning half-closes the stream: the server ends the session, then the stream.

    def _drain(self) -> None:
        cause: BaseException | None = None
        received_any = False
        try:
            for message in self._call:
                received_any = True
                self._inbox.put(message)
        except Exception as e:  # grpc.RpcError, whose base class is Exception
            cause = e
        finally:
            self._end = self._ending(cause, received_any)
            self._stream_over.set()
            self._inbox.put(_END)
            # No message leaves after the call ends: release a send waiting for its receipt.
            self._receipts.put(False)

    def _ending(self, cause: BaseException | None, received_any: bool) -> WireError:
        """The error that stands for the stream's end."""
        if cause is None:
            return PeerDisconnected(f"{self._where} ended the session")
        if isinstance(cause, grpc.RpcError) and not received_any:
            # A status before any message is the server refusing the session; after one, the session breaking.
            ended: WireError = ConnectRefused(
                grpc_refusal(cause.code(), cause.details()),
                f"{self._where} refused the session: {_status(cause)}",
            )
        elif isinstance(cause, grpc.RpcError):
            ended = PeerDisconnected(f"{self._where} ended the session: {_status(cause)}")
        else:
            ended = PeerDisconnected(f"the session on {self._where} broke: {cause!r}")
        ended.__cause__ = cause
        return ended

    def send(self, message: bytes) -> None:
        if self._closed:
            raise PeerDisconnected(f"the session on {self._where} is closed")
        if self._stream_over.is_set():
            raise self._end
        self._outbox.put(message)
        if not self._receipts.get():
            # The call ended first. The message may have gone out just before; either way no answer will come.
            raise self._end

    def recv(self, timeout: float | None = None) -> bytes:
        if self._closed:
            # A reply that came in during `close` must not be paired with the next request.
            raise PeerDisconnected(f"the session on {self._where} is closed")
        if self._end_read:
            raise self._end
        try:
            item = self._inbox.get(timeout=None if timeout is None else max(0.0, timeout))
        except queue.Empty:
            raise TimeoutError(f"no message from {self._where} within {timeout} s") from None
        if isinstance(item, bytes):
            return item
        self._end_read = True
        raise self._end

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._outbox.put(None)
            self._reader.join(timeout=_CLOSE_GRACE_SECONDS)
            self._call.cancel()
            self._channel.close()


def _ask(channel: Any, method: str, metadata: tuple[tuple[str, str], ...], timeout: float) -> Any:
    """The status a call on `method` with no messages ends with (None: it ended OK or answered).

    Without wait_for_ready a call fails at once when the connect does (with details saying why), and waits
    while the channel is still connecting, up to `timeout`.
    """
    call = channel.stream_stream(method, request_serializer=None, response_deserializer=None)
    responses = call(iter(()), metadata=metadata, timeout=max(0.0, timeout))
    try:
        next(responses, None)
    except grpc.RpcError as e:
        return e
    finally:
        responses.cancel()
    return None


class GrpcDialer:
    """`grpc`: sessions on a plaintext channel to `host:port`."""

    name = "grpc"
    scheme = "grpc"

    def _address(self, address: object) -> HostPort:
        return expect_address(address, HostPort, self.name)

    @staticmethod
    def _target(address: HostPort) -> str:
        return f"{bracketed(address.host)}:{address.port}"

    def _channel(self, target: str) -> Any:
        return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)

    def url(self, address: object) -> str:
        checked = self._address(address)
        query = f"?{checked.query}" if checked.query else ""
        return f"{self.scheme}://{self._target(checked)}{checked.path}{query}"

    def dial(self, address: object, headers: Mapping[str, str] | None, open_timeout: float) -> GrpcConnection:
        """The connection opens once a probe call gets through (UNIMPLEMENTED, from the server itself).

        The probe carries the headers, so an edge that checks them lets it through as it would the session,
        and a refused connect, a bad certificate or an unknown host is told apart at once by its details.
        """
        checked = self._address(address)
        where = self.url(checked)
        channel = self._channel(self._target(checked))
        metadata = _metadata(headers)
        try:
            refused = _ask(channel, PROBE_METHOD, metadata, open_timeout)
        except BaseException:
            channel.close()
            raise
        if refused is not None and refused.code() is not grpc.StatusCode.UNIMPLEMENTED:
            channel.close()
            raise ConnectRefused(
                grpc_refusal(refused.code(), refused.details()), f"{where}: {_status(refused)}"
            )
        session = (*metadata, (SESSION_PATH_KEY, checked.path), (SESSION_QUERY_KEY, checked.query))
        return GrpcConnection(channel, where, session)

    def keepalive(self, address: object, headers: Mapping[str, str] | None, timeout: float) -> int | None:
        """One unary call on `KEEPALIVE_METHOD`, on a channel of its own; its deadline bounds the connect."""
        checked = self._address(address)
        where = f"{KEEPALIVE_METHOD} on {self._target(checked)}"
        channel = self._channel(self._target(checked))
        try:
            call = channel.unary_unary(KEEPALIVE_METHOD, request_serializer=None, response_deserializer=None)
            answer = call(b"", metadata=_metadata(headers), timeout=max(0.0, timeout))
        except grpc.RpcError as e:
            if e.code() is grpc.StatusCode.UNIMPLEMENTED:
                raise KeepaliveUnsupported(f"{where}: the server serves sessions, not keepalive") from e
            raise ConnectRefused(grpc_refusal(e.code(), e.details()), f"{where}: {_status(e)}") from e
        finally:
            channel.close()
        return alive_seconds_of(answer, where)

    def probe(
        self, address: object, headers: Mapping[str, str] | None, open_timeout: float
    ) -> ConnectRefusal | None:
        checked = self._address(address)
        channel = self._channel(self._target(checked))
        try:
            answered = _ask(channel, PROBE_METHOD, _metadata(headers), open_timeout)
        finally:
            channel.close()
        if answered is None or answered.code() is grpc.StatusCode.UNIMPLEMENTED:
            return None
        return grpc_refusal(answered.code(), answered.details())


class GrpcTlsDialer(GrpcDialer):
    """`grpc_tls`: the same sessions through TLS, verified against gRPC's default roots, or against `ca_file`
    alone when one is given."""

    name = "grpc_tls"
    scheme = "grpcs"

    def __init__(self, ca_file: str | None = None) -> None:
        self.ca_file = ca_file
        try:
            # Read once, so a missing file is refused when the dialer is made rather than at every dial.
            roots = None if ca_file is None else Path(ca_file).read_bytes()
        except OSError as e:
            raise ValueError(f"ca_file: cannot read {ca_file} ({e})") from e
        self._credentials = grpc.ssl_channel_credentials(root_certificates=roots)

    def _channel(self, target: str) -> Any:
        return grpc.secure_channel(target, self._credentials, options=CHANNEL_OPTIONS)
