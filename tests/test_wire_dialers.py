"""The dialers of every wire, against real servers on real sockets started here (uvicorn for the routed
websocket wires, websockets for the root dialects, grpcio for gRPC, trustme certificates for TLS), and against
positronic-model-server's own server, which our dialers must meet unchanged."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import grpc
import pytest
import trustme
import uvicorn
from websockets.sync.server import Server, ServerConnection, serve

from deadlines import give_up_at
from yardstick.wire.address import KEEPALIVE_PATH, SESSION_PATH, HostPort, Root, UnixSocket
from yardstick.wire.dial_grpc import (
    KEEPALIVE_METHOD,
    PROBE_METHOD,
    SERVICE,
    SESSION_METHOD,
    SESSION_PATH_KEY,
    SESSION_QUERY_KEY,
    GrpcDialer,
    GrpcTlsDialer,
    grpc_refusal,
)
from yardstick.wire.dial_websocket import (
    ALIVE_SECONDS,
    MAX_MESSAGE_BYTES,
    OpenpiDialer,
    RoboarenaDialer,
    WebsocketDialer,
    WebsocketTlsDialer,
    WebsocketUnixDialer,
)
from yardstick.wire.dialers import DIALERS, TLS_WIRES, dialer
from yardstick.wire.errors import AddressError, ConnectRefusal, ConnectRefused, PeerDisconnected, RemoteError
from yardstick.wire.transport import Connection, KeepaliveUnsupported

BIG = bytes(range(256)) * (5 * 4096)  # 5 MiB: past both libraries' defaults, inside our 16 MiB
BAD = {"Authorization": "Bearer bad"}
GOOD = {"Authorization": "Bearer good"}


def _closed_port() -> int:
    """A port nothing listens on (freed just now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _refusal_of_dial(dial: Any, *args: Any) -> ConnectRefusal:
    with pytest.raises(ConnectRefused) as refused:
        dial(*args).close()
    return refused.value.refusal


# ------------------------------------------------------------------------------------------------ servers


@dataclass
class SessionApp:
    """An ASGI server of the routed websocket wires, as positronic-model-server's answers: sessions on
    SESSION_PATH echo binary frames, every other upgrade is refused with 403 (or the status under
    `/status/<code>`), and the keepalive route answers beside them. Header `x-test-keepalive` picks how."""

    upgrades: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        seen = {"path": scope["path"], "query": scope["query_string"].decode(), "headers": headers}
        if scope["type"] == "websocket":
            self.upgrades.append(seen)
            await self._session(scope, receive, send, headers)
        else:
            self.requests.append({**seen, "method": scope["method"]})
            await self._http(scope, receive, send, headers)

    async def _session(self, scope: Any, receive: Any, send: Any, headers: dict[str, str]) -> None:
        await receive()  # websocket.connect
        path = scope["path"]
        if path.startswith("/status/"):
            status = int(path.rsplit("/", 1)[1])
            await send({"type": "websocket.http.response.start", "status": status, "headers": []})
            await send({"type": "websocket.http.response.body", "body": b"not now"})
            return
        if path == "/" and headers.get("x-test-root") == "silent":
            await send({"type": "websocket.accept"})
            while (await receive())["type"] != "websocket.disconnect":
                pass
            return
        if path != SESSION_PATH or headers.get("authorization") == BAD["Authorization"]:
            await send({"type": "websocket.close", "code": 1008})  # before accept: HTTP 403
            return
        await send({"type": "websocket.accept"})
        while True:
            event = await receive()
            if event["type"] == "websocket.disconnect":
                return
            data = event.get("bytes")
            if data == b"close":
                await send({"type": "websocket.close", "code": 1000})
                return
            if data == b"text":
                await send({"type": "websocket.send", "text": "Traceback: the policy raised"})
            else:
                await send({"type": "websocket.send", "bytes": data})

    async def _http(self, scope: Any, receive: Any, send: Any, headers: dict[str, str]) -> None:
        while (await receive()).get("more_body"):
            pass
        mode = headers.get("x-test-keepalive", "")
        status, body = 200, json.dumps({ALIVE_SECONDS: 42}).encode()
        if scope["path"] != KEEPALIVE_PATH or scope["method"] != "POST" or mode == "missing":
            status, body = 404, b"Not Found"
        elif headers.get("authorization") == BAD["Authorization"]:
            status, body = 401, b'{"detail": "Invalid or missing bearer token"}'
        elif mode == "cold":
            status, body = 503, b"starting"
        elif mode == "null":
            body = json.dumps({ALIVE_SECONDS: None}).encode()
        elif mode == "garbage":
            body = b"<html>hello</html>"
        elif mode == "slow":
            await asyncio.sleep(3)
        start = {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", b"%d" % len(body))],
        }
        await send(start)
        await send({"type": "http.response.body", "body": body})


class Uvicorn:
    """`app` served by uvicorn in a thread on the bound, listening `sock`."""

    def __init__(self, app: Any, sock: socket.socket, **tls: str) -> None:
        config = uvicorn.Config(
            app,
            lifespan="off",
            ws="websockets-sansio",
            ws_max_size=MAX_MESSAGE_BYTES,
            ws_per_message_deflate=False,
            log_level="warning",
            timeout_graceful_shutdown=1,
            **tls,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = give_up_at(10)
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)


def _tcp_listener() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@dataclass
class Certificates:
    ca_file: str
    other_ca_file: str  # a CA that signed nothing the servers present
    server_pem: str  # key and chain, for uvicorn
    key: bytes
    chain: bytes


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    folder = tmp_path_factory.mktemp("certs")
    ca, other = trustme.CA(), trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(folder / "ca.pem")
    other.cert_pem.write_to_path(folder / "other.pem")
    leaf.private_key_and_cert_chain_pem.write_to_path(folder / "server.pem")
    chain = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
    return Certificates(
        str(folder / "ca.pem"),
        str(folder / "other.pem"),
        str(folder / "server.pem"),
        leaf.private_key_pem.bytes(),
        chain,
    )


@dataclass
class WebsocketServers:
    app: SessionApp
    port: int
    tls_port: int
    uds: PurePosixPath


@pytest.fixture(scope="module")
def ws(certs: Certificates) -> Iterator[WebsocketServers]:
    app = SessionApp()
    plain, secure = _tcp_listener(), _tcp_listener()
    folder = Path(tempfile.mkdtemp(prefix="ys-", dir="/tmp"))  # a unix socket path must stay short
    uds = folder / "policy.sock"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(uds))
    unix.listen()
    servers = [Uvicorn(app, plain), Uvicorn(app, secure, ssl_certfile=certs.server_pem), Uvicorn(app, unix)]
    yield WebsocketServers(app, plain.getsockname()[1], secure.getsockname()[1], PurePosixPath(uds))
    for server in servers:
        server.stop()
    shutil.rmtree(folder, ignore_errors=True)


@dataclass
class RootServer:
    port: int
    handshakes: list[dict[str, str]]


@pytest.fixture(scope="module")
def root() -> Iterator[RootServer]:
    """A server of the root dialects: it announces itself, echoes binary frames, and answers b"text" with a
    traceback in a text frame, as openpi's server reports an error."""
    handshakes: list[dict[str, str]] = []

    def handler(connection: ServerConnection) -> None:
        assert connection.request is not None
        handshakes.append(
            {
                "path": connection.request.path,
                **{k.lower(): v for k, v in connection.request.headers.raw_items()},
            }
        )
        connection.send(b"metadata")
        for message in connection:
            if message == b"text":
                connection.send("Traceback (most recent call last): boom")
            elif message == b"close":
                return
            else:
                connection.send(message)

    server: Server = serve(handler, "127.0.0.1", 0, compression=None, max_size=MAX_MESSAGE_BYTES)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield RootServer(server.socket.getsockname()[1], handshakes)
    server.shutdown()
    thread.join(5)


class EchoService:
    """A gRPC server of the session wire: the Session method echoes bytes (b"close" ends the stream, b"abort"
    ends it with INTERNAL), KeepAlive answers JSON, and every other method is UNIMPLEMENTED."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []

    def session(self, requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        metadata = dict(context.invocation_metadata())
        self.metadata.append(metadata)
        if metadata.get("authorization") == BAD["Authorization"]:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "Invalid or missing bearer token")
        if metadata.get(SESSION_PATH_KEY) != SESSION_PATH:
            context.abort(grpc.StatusCode.NOT_FOUND, "no session on that route")
        for request in requests:
            if request == b"close":
                return
            if request == b"abort":
                context.abort(grpc.StatusCode.INTERNAL, "the policy raised")
            yield request

    def keepalive(self, request: bytes, context: Any) -> bytes:
        metadata = dict(context.invocation_metadata())
        if metadata.get("x-test-keepalive") == "missing":
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        if metadata.get("authorization") == BAD["Authorization"]:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "Invalid or missing bearer token")
        return json.dumps({ALIVE_SECONDS: 42}).encode()


@dataclass
class GrpcServers:
    service: EchoService
    port: int
    tls_port: int


@pytest.fixture(scope="module")
def grpc_servers(certs: Certificates) -> Iterator[GrpcServers]:
    service = EchoService()
    methods = {
        "Session": grpc.stream_stream_rpc_method_handler(service.session),
        "KeepAlive": grpc.unary_unary_rpc_method_handler(service.keepalive),
    }
    server = grpc.server(
        ThreadPoolExecutor(max_workers=32),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            # Our client pings every 20 s; gRPC's server default answers that with GOAWAY.
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_ping_strikes", 0),
        ],
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
    port = server.add_insecure_port("127.0.0.1:0")
    tls_port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(certs.key, certs.chain)]))
    server.start()
    yield GrpcServers(service, port, tls_port)
    server.stop(grace=None)


# ------------------------------------------------------------------------------------- routed websockets


def _round_trip(connection: Connection) -> None:
    try:
        connection.send(b"hello")
        assert connection.recv(timeout=5) == b"hello"
        connection.send(BIG)
        assert connection.recv(timeout=10) == BIG
        with pytest.raises(TimeoutError):
            connection.recv(timeout=0.1)
        connection.send(b"")
        assert connection.recv(timeout=5) == b""  # the connection outlives a timeout
    finally:
        connection.close()
    connection.close()  # twice, and still no error


def test_websocket_round_trip_carries_route_query_and_headers(ws: WebsocketServers) -> None:
    address = HostPort("127.0.0.1", ws.port, query="fps=15&task=pick")
    _round_trip(WebsocketDialer().dial(address, {"Authorization": "Bearer good", "X-Extra": "1"}, 5))
    seen = ws.app.upgrades[-1]
    assert (seen["path"], seen["query"]) == (SESSION_PATH, "fps=15&task=pick")
    assert seen["headers"]["authorization"] == "Bearer good"
    assert seen["headers"]["x-extra"] == "1"
    assert seen["headers"]["host"] == f"127.0.0.1:{ws.port}"
    assert "sec-websocket-extensions" not in seen["headers"]  # no compression offered


def test_websocket_tls_round_trip_with_a_ca_file(ws: WebsocketServers, certs: Certificates) -> None:
    dialer_ = WebsocketTlsDialer(ca_file=certs.ca_file)
    _round_trip(dialer_.dial(HostPort("127.0.0.1", ws.tls_port), None, 5))
    _round_trip(dialer_.dial(HostPort("localhost", ws.tls_port), None, 5))


def test_websocket_unix_round_trip_asks_for_localhost(ws: WebsocketServers) -> None:
    _round_trip(WebsocketUnixDialer().dial(UnixSocket(ws.uds, query="a=1"), None, 5))
    seen = ws.app.upgrades[-1]
    assert (seen["path"], seen["query"], seen["headers"]["host"]) == (SESSION_PATH, "a=1", "localhost")


def test_a_server_closing_mid_session_is_a_disconnect(ws: WebsocketServers) -> None:
    connection = WebsocketDialer().dial(HostPort("127.0.0.1", ws.port), None, 5)
    connection.send(b"close")
    with pytest.raises(PeerDisconnected):
        connection.recv(timeout=5)
    with pytest.raises(PeerDisconnected):
        connection.send(b"more")
    connection.close()


def test_a_text_frame_is_the_servers_error_and_the_session_goes_on(ws: WebsocketServers) -> None:
    connection = WebsocketDialer().dial(HostPort("127.0.0.1", ws.port), None, 5)
    connection.send(b"text")
    with pytest.raises(RemoteError, match="the policy raised"):
        connection.recv(timeout=5)
    connection.send(b"after")
    assert connection.recv(timeout=5) == b"after"
    connection.close()


def test_websocket_refusals_say_whether_to_retry(ws: WebsocketServers) -> None:
    dial = WebsocketDialer().dial
    assert _refusal_of_dial(dial, HostPort("127.0.0.1", _closed_port()), None, 2) is ConnectRefusal.SILENT
    assert _refusal_of_dial(dial, HostPort("127.0.0.1", ws.port), BAD, 2) is ConnectRefusal.FORBIDDEN
    assert (
        _refusal_of_dial(dial, HostPort("127.0.0.1", ws.port, path="/status/503"), None, 2)
        is ConnectRefusal.COLD
    )
    assert (
        _refusal_of_dial(dial, HostPort("127.0.0.1", ws.port, path="/status/429"), None, 2)
        is ConnectRefusal.COLD
    )
    assert (
        _refusal_of_dial(dial, HostPort("127.0.0.1", ws.port, path="/status/404"), None, 2)
        is ConnectRefusal.FINAL
    )
    assert (
        _refusal_of_dial(dial, HostPort("127.0.0.1", ws.port, path="/status/302"), None, 2)
        is ConnectRefusal.FINAL
    )
    assert _refusal_of_dial(dial, HostPort("no-such-host.invalid", 80), None, 5) is ConnectRefusal.FINAL


@contextmanager
def _canned(answer: bytes) -> Iterator[int]:
    """A port whose server reads one request and answers it with `answer`, whatever was asked."""
    listener = _tcp_listener()

    def answer_once() -> None:
        connection, _ = listener.accept()
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                request += connection.recv(4096)
            connection.sendall(answer)

    thread = threading.Thread(target=answer_once, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        thread.join(5)
        listener.close()


@pytest.mark.parametrize(
    ("answer", "refusal"),
    [
        # A 101 without the headers of an upgrade: a proxy answering for a backend that is not up.
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", ConnectRefusal.COLD),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", ConnectRefusal.FINAL),
        (b"", ConnectRefusal.SILENT),  # closed without a word
    ],
)
def test_answers_that_are_not_an_upgrade(answer: bytes, refusal: ConnectRefusal) -> None:
    with _canned(answer) as port:
        assert _refusal_of_dial(WebsocketDialer().dial, HostPort("127.0.0.1", port), None, 2) is refusal


def test_tls_and_plaintext_crossed_are_silent(ws: WebsocketServers) -> None:
    assert (
        _refusal_of_dial(WebsocketDialer().dial, HostPort("127.0.0.1", ws.tls_port), None, 2)
        is ConnectRefusal.SILENT
    )
    assert (
        _refusal_of_dial(WebsocketTlsDialer().dial, HostPort("127.0.0.1", ws.port), None, 2)
        is ConnectRefusal.SILENT
    )


def test_a_listener_that_never_answers_is_silent_within_the_timeout() -> None:
    # The listener never answers: a dial that ignored its timeout would never come back.
    with _tcp_listener() as mute:  # accepts (the kernel does), never answers the upgrade
        refusal = _refusal_of_dial(
            WebsocketDialer().dial, HostPort("127.0.0.1", mute.getsockname()[1]), None, 0.5
        )
        assert refusal is ConnectRefusal.SILENT


def test_a_certificate_from_another_ca_is_final(ws: WebsocketServers, certs: Certificates) -> None:
    address = HostPort("127.0.0.1", ws.tls_port)
    for dialer_ in (WebsocketTlsDialer(ca_file=certs.other_ca_file), WebsocketTlsDialer()):
        assert _refusal_of_dial(dialer_.dial, address, None, 5) is ConnectRefusal.FINAL
        assert dialer_.probe(address, None, 5) is ConnectRefusal.FINAL
        with pytest.raises(ConnectRefused) as refused:
            dialer_.keepalive(address, None, 5)
        assert refused.value.refusal is ConnectRefusal.FINAL


def test_a_ca_file_that_cannot_be_read_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ca_file"):
        WebsocketTlsDialer(ca_file=str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match="ca_file"):
        GrpcTlsDialer(ca_file=str(tmp_path / "missing.pem"))


def test_unix_socket_refusals_read_the_path(ws: WebsocketServers, tmp_path: Path) -> None:
    dial = WebsocketUnixDialer().dial
    regular = tmp_path / "not-a-socket"
    regular.write_text("")
    assert _refusal_of_dial(dial, UnixSocket(PurePosixPath(regular)), None, 2) is ConnectRefusal.FINAL
    assert (
        _refusal_of_dial(dial, UnixSocket(PurePosixPath(tmp_path / "missing.sock")), None, 2)
        is ConnectRefusal.SILENT
    )
    stale = Path(tempfile.mkdtemp(prefix="ys-", dir="/tmp")) / "stale.sock"
    try:
        with socket.socket(socket.AF_UNIX) as nobody:
            nobody.bind(str(stale))  # a socket file nobody listens on: a server gone away, or restarting
        assert _refusal_of_dial(dial, UnixSocket(PurePosixPath(stale)), None, 2) is ConnectRefusal.SILENT
    finally:
        shutil.rmtree(stale.parent, ignore_errors=True)
    assert _refusal_of_dial(dial, UnixSocket(ws.uds), BAD, 2) is ConnectRefusal.FORBIDDEN


def test_keepalive_reads_the_alive_seconds(ws: WebsocketServers, certs: Certificates) -> None:
    assert WebsocketDialer().keepalive(HostPort("127.0.0.1", ws.port), GOOD, 5) == 42
    assert (
        WebsocketDialer().keepalive(HostPort("127.0.0.1", ws.port), {"x-test-keepalive": "null"}, 5) is None
    )
    assert (
        WebsocketTlsDialer(ca_file=certs.ca_file).keepalive(HostPort("127.0.0.1", ws.tls_port), None, 5) == 42
    )
    assert WebsocketUnixDialer().keepalive(UnixSocket(ws.uds), None, 5) == 42
    sent = ws.app.requests[-1]
    assert (sent["method"], sent["path"], sent["headers"]["host"]) == ("POST", KEEPALIVE_PATH, "localhost")
    assert ws.app.requests[0]["headers"]["authorization"] == "Bearer good"


@pytest.mark.parametrize(
    ("headers", "refusal"),
    [
        (BAD, ConnectRefusal.FORBIDDEN),
        ({"x-test-keepalive": "cold"}, ConnectRefusal.COLD),
        ({"x-test-keepalive": "garbage"}, ConnectRefusal.FINAL),
    ],
)
def test_keepalive_refusals(ws: WebsocketServers, headers: dict[str, str], refusal: ConnectRefusal) -> None:
    with pytest.raises(ConnectRefused) as refused:
        WebsocketDialer().keepalive(HostPort("127.0.0.1", ws.port), headers, 5)
    assert refused.value.refusal is refusal


def test_keepalive_without_the_route_on_a_session_server_is_unsupported(ws: WebsocketServers) -> None:
    missing = {"x-test-keepalive": "missing"}
    with pytest.raises(KeepaliveUnsupported):
        WebsocketDialer().keepalive(HostPort("127.0.0.1", ws.port), missing, 5)
    with pytest.raises(KeepaliveUnsupported):
        WebsocketUnixDialer().keepalive(UnixSocket(ws.uds), missing, 5)


def test_keepalive_with_nothing_there_is_silent(tmp_path: Path) -> None:
    with pytest.raises(ConnectRefused) as refused:
        WebsocketDialer().keepalive(HostPort("127.0.0.1", _closed_port()), None, 2)
    assert refused.value.refusal is ConnectRefusal.SILENT
    with pytest.raises(ConnectRefused) as refused:
        WebsocketUnixDialer().keepalive(UnixSocket(PurePosixPath(tmp_path / "missing.sock")), None, 2)
    assert refused.value.refusal is ConnectRefusal.SILENT


def test_keepalive_is_bounded_by_its_timeout(ws: WebsocketServers) -> None:
    # The slow server answers, well, after 3 s: a keepalive that waited past its 0.5 s would take the answer.
    with pytest.raises(ConnectRefused) as refused:
        WebsocketDialer().keepalive(HostPort("127.0.0.1", ws.port), {"x-test-keepalive": "slow"}, 0.5)
    assert refused.value.refusal is ConnectRefusal.SILENT


def test_probe_finds_the_session_server_without_opening_a_session(
    ws: WebsocketServers, certs: Certificates
) -> None:
    before = len(ws.app.upgrades)
    assert WebsocketDialer().probe(HostPort("127.0.0.1", ws.port, query="x=1"), GOOD, 5) is None
    assert ws.app.upgrades[before]["path"] == "/" and ws.app.upgrades[before]["query"] == ""
    assert (
        WebsocketTlsDialer(ca_file=certs.ca_file).probe(HostPort("127.0.0.1", ws.tls_port), None, 5) is None
    )
    assert WebsocketUnixDialer().probe(UnixSocket(ws.uds), None, 5) is None
    assert WebsocketDialer().probe(HostPort("127.0.0.1", _closed_port()), None, 2) is ConnectRefusal.SILENT
    assert WebsocketDialer().probe(HostPort("no-such-host.invalid", 80), None, 5) is ConnectRefusal.FINAL


def test_probe_of_something_that_upgrades_its_root_answers(root: RootServer) -> None:
    assert WebsocketDialer().probe(HostPort("127.0.0.1", root.port), None, 5) is None


def test_websocket_urls() -> None:
    assert WebsocketDialer().url(HostPort("gpu", 80, query="a=1")) == "ws://gpu/api/v1/session?a=1"
    assert WebsocketDialer().url(HostPort("::1", 8000)) == "ws://[::1]:8000/api/v1/session"
    assert WebsocketTlsDialer().url(HostPort("gpu", 443)) == "wss://gpu/api/v1/session"
    assert WebsocketTlsDialer().url(HostPort("gpu", 80)) == "wss://gpu:80/api/v1/session"
    assert (
        WebsocketUnixDialer().url(UnixSocket(PurePosixPath("/run/p.sock")))
        == "ws+unix:///run/p.sock/api/v1/session"
    )
    assert RoboarenaDialer().url(Root("::1", 8000)) == "ws://[::1]:8000"
    assert OpenpiDialer().url(Root("gpu", 80)) == "ws://gpu:80"
    assert GrpcDialer().url(HostPort("::1", 50051, query="a=1")) == "grpc://[::1]:50051/api/v1/session?a=1"
    assert GrpcTlsDialer().url(HostPort("gpu", 443)) == "grpcs://gpu:443/api/v1/session"


# ------------------------------------------------------------------------------------------ root dialects


@pytest.mark.parametrize("dialect", [RoboarenaDialer, OpenpiDialer])
def test_root_dialects_leave_the_announcement_and_raise_text(root: RootServer, dialect: type[Any]) -> None:
    connection = dialect().dial(Root("127.0.0.1", root.port), {"Authorization": "Api-Key k"}, 5)
    try:
        assert connection.recv(timeout=5) == b"metadata"
        # The server notes the upgrade before it announces itself.
        assert root.handshakes[-1]["path"] == "/"
        assert root.handshakes[-1]["authorization"] == "Api-Key k"
        assert "sec-websocket-extensions" not in root.handshakes[-1]
        connection.send(BIG)
        assert connection.recv(timeout=10) == BIG
        connection.send(b"text")
        with pytest.raises(RemoteError) as error:
            connection.recv(timeout=5)
        assert str(error.value) == "Traceback (most recent call last): boom"
        connection.send(b"close")
        with pytest.raises(PeerDisconnected):
            connection.recv(timeout=5)
    finally:
        connection.close()


def test_roboarena_pings_seldom_and_waits_long_for_the_pong(root: RootServer) -> None:
    connection = RoboarenaDialer().dial(Root("127.0.0.1", root.port), None, 5)
    websocket = connection._websocket
    assert (websocket.ping_interval, websocket.ping_timeout) == (60.0, 600.0)
    connection.close()


@pytest.mark.parametrize("dialect", [RoboarenaDialer, OpenpiDialer])
def test_root_dialects_probe_refuse_and_have_no_keepalive(root: RootServer, dialect: type[Any]) -> None:
    assert dialect().probe(Root("127.0.0.1", root.port), None, 5) is None
    assert dialect().probe(Root("127.0.0.1", _closed_port()), None, 2) is ConnectRefusal.SILENT
    assert (
        _refusal_of_dial(dialect().dial, Root("127.0.0.1", _closed_port()), None, 2) is ConnectRefusal.SILENT
    )
    assert _refusal_of_dial(dialect().dial, Root("no-such-host.invalid", 80), None, 5) is ConnectRefusal.FINAL
    with pytest.raises(KeepaliveUnsupported):
        dialect().keepalive(Root("127.0.0.1", root.port), None, 5)


def test_a_root_that_upgrades_and_says_nothing_is_cold(ws: WebsocketServers) -> None:
    """A root dialect's server announces itself at once: one that upgrades and stays quiet is loading."""
    silent = {"x-test-root": "silent"}
    assert RoboarenaDialer().probe(Root("127.0.0.1", ws.port), silent, 0.5) is ConnectRefusal.COLD
    # A server that refuses the upgrade reads as dial reads it.
    assert OpenpiDialer().probe(Root("127.0.0.1", ws.port), None, 2) is ConnectRefusal.FORBIDDEN


# ------------------------------------------------------------------------------------------------- gRPC


def test_grpc_round_trip_carries_route_query_and_headers(grpc_servers: GrpcServers) -> None:
    address = HostPort("127.0.0.1", grpc_servers.port, query="fps=15")
    _round_trip(GrpcDialer().dial(address, {"Authorization": "Bearer good", "X-Extra": "1"}, 5))
    seen = grpc_servers.service.metadata[-1]
    assert seen[SESSION_PATH_KEY] == SESSION_PATH
    assert seen[SESSION_QUERY_KEY] == "fps=15"
    assert (seen["authorization"], seen["x-extra"]) == ("Bearer good", "1")


def test_grpc_tls_round_trip_with_a_ca_file(grpc_servers: GrpcServers, certs: Certificates) -> None:
    _round_trip(
        GrpcTlsDialer(ca_file=certs.ca_file).dial(HostPort("127.0.0.1", grpc_servers.tls_port), None, 5)
    )


def test_grpc_certificate_from_another_ca_is_final(grpc_servers: GrpcServers, certs: Certificates) -> None:
    address = HostPort("127.0.0.1", grpc_servers.tls_port)
    dialer_ = GrpcTlsDialer(ca_file=certs.other_ca_file)
    assert _refusal_of_dial(dialer_.dial, address, None, 5) is ConnectRefusal.FINAL
    assert dialer_.probe(address, None, 5) is ConnectRefusal.FINAL


def test_grpc_refusals_before_the_session(grpc_servers: GrpcServers) -> None:
    dial = GrpcDialer().dial
    assert _refusal_of_dial(dial, HostPort("127.0.0.1", _closed_port()), None, 2) is ConnectRefusal.SILENT
    assert _refusal_of_dial(dial, HostPort("no-such-host.invalid", 50051), None, 5) is ConnectRefusal.FINAL
    with _tcp_listener() as mute:
        assert (
            _refusal_of_dial(dial, HostPort("127.0.0.1", mute.getsockname()[1]), None, 0.5)
            is ConnectRefusal.SILENT
        )


@pytest.mark.parametrize(
    ("headers", "path", "refusal"),
    [(BAD, SESSION_PATH, ConnectRefusal.FORBIDDEN), (GOOD, "/api/v1/elsewhere", ConnectRefusal.FINAL)],
)
def test_a_grpc_status_before_the_first_message_refuses_the_session(
    grpc_servers: GrpcServers, headers: dict[str, str], path: str, refusal: ConnectRefusal
) -> None:
    connection = GrpcDialer().dial(HostPort("127.0.0.1", grpc_servers.port, path=path), headers, 5)
    try:
        with pytest.raises(ConnectRefused) as refused:
            connection.recv(timeout=5)
        assert refused.value.refusal is refusal
        with pytest.raises(ConnectRefused):
            connection.recv(timeout=0)  # the end stays the end
        with pytest.raises(ConnectRefused) as refused:
            connection.send(b"x")  # and a send meets the same end
        assert refused.value.refusal is refusal
    finally:
        connection.close()


def test_a_refusal_met_by_a_send_keeps_its_class(grpc_servers: GrpcServers) -> None:
    connection = GrpcDialer().dial(HostPort("127.0.0.1", grpc_servers.port), BAD, 5)
    try:
        try:
            connection.send(b"first")  # written before the status came, or refused by it
        except ConnectRefused as refused:
            assert refused.refusal is ConnectRefusal.FORBIDDEN
        with pytest.raises(ConnectRefused) as refused_at_recv:
            connection.recv(timeout=5)
        assert refused_at_recv.value.refusal is ConnectRefusal.FORBIDDEN
    finally:
        connection.close()


@pytest.mark.parametrize("ending", [b"close", b"abort"])
def test_a_grpc_stream_ending_after_a_message_is_a_disconnect(
    grpc_servers: GrpcServers, ending: bytes
) -> None:
    connection = GrpcDialer().dial(HostPort("127.0.0.1", grpc_servers.port), None, 5)
    try:
        connection.send(b"one")
        assert connection.recv(timeout=5) == b"one"
        # The server ends the stream as soon as it reads this: the send may see the end already.
        with suppress(PeerDisconnected):
            connection.send(ending)
        with pytest.raises(PeerDisconnected):
            connection.recv(timeout=5)
        with pytest.raises(PeerDisconnected):
            connection.send(b"two")
    finally:
        connection.close()
    with pytest.raises(PeerDisconnected):
        connection.recv(timeout=0)


def test_grpc_keepalive_and_probe(grpc_servers: GrpcServers, certs: Certificates) -> None:
    address = HostPort("127.0.0.1", grpc_servers.port)
    assert GrpcDialer().keepalive(address, GOOD, 5) == 42
    assert (
        GrpcTlsDialer(ca_file=certs.ca_file).keepalive(HostPort("127.0.0.1", grpc_servers.tls_port), None, 5)
        == 42
    )
    with pytest.raises(KeepaliveUnsupported):
        GrpcDialer().keepalive(address, {"x-test-keepalive": "missing"}, 5)
    with pytest.raises(ConnectRefused) as refused:
        GrpcDialer().keepalive(address, BAD, 5)
    assert refused.value.refusal is ConnectRefusal.FORBIDDEN
    with pytest.raises(ConnectRefused) as refused:
        GrpcDialer().keepalive(HostPort("127.0.0.1", _closed_port()), None, 2)
    assert refused.value.refusal is ConnectRefusal.SILENT
    assert GrpcDialer().probe(address, BAD, 5) is None  # the probe opens no session, so nothing checks it
    assert (
        GrpcTlsDialer(ca_file=certs.ca_file).probe(HostPort("127.0.0.1", grpc_servers.tls_port), None, 5)
        is None
    )
    assert GrpcDialer().probe(HostPort("127.0.0.1", _closed_port()), None, 2) is ConnectRefusal.SILENT
    assert GrpcDialer().probe(HostPort("no-such-host.invalid", 1), None, 5) is ConnectRefusal.FINAL


@pytest.mark.parametrize(
    ("code", "details", "refusal"),
    [
        (grpc.StatusCode.PERMISSION_DENIED, "Invalid or missing bearer token", ConnectRefusal.FORBIDDEN),
        (grpc.StatusCode.UNAVAILABLE, "upstream connect error", ConnectRefusal.COLD),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "", ConnectRefusal.COLD),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", ConnectRefusal.SILENT),
        (
            grpc.StatusCode.UNAVAILABLE,
            "failed to connect to all addresses; last error: ...refused",
            ConnectRefusal.SILENT,
        ),
        (
            grpc.StatusCode.UNAVAILABLE,
            "Ssl handshake failed: ...CERTIFICATE_VERIFY_FAILED",
            ConnectRefusal.FINAL,
        ),
        (
            grpc.StatusCode.UNAVAILABLE,
            "address lookup failed for h:443: Domain name not found",
            ConnectRefusal.FINAL,
        ),
        (
            grpc.StatusCode.UNAVAILABLE,
            "lookup failed: Timeout while contacting DNS servers",
            ConnectRefusal.SILENT,
        ),
        (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "Sent message larger than max (20000000 vs. 16777216)",
            ConnectRefusal.FINAL,
        ),
        (grpc.StatusCode.UNAUTHENTICATED, "", ConnectRefusal.FINAL),
        (grpc.StatusCode.INTERNAL, "", ConnectRefusal.FINAL),
    ],
)
def test_grpc_status_classification(code: Any, details: str, refusal: ConnectRefusal) -> None:
    assert grpc_refusal(code, details) is refusal


# ------------------------------------------------------------------------------------ addresses, registry


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("websocket", UnixSocket(PurePosixPath("/tmp/x.sock"))),
        ("websocket_tls", Root("h", 1)),
        ("websocket_unix", HostPort("h", 1)),
        ("grpc", Root("h", 1)),
        ("grpc_tls", "h:1"),
        ("roboarena", HostPort("h", 1)),
        ("openpi", UnixSocket(PurePosixPath("/tmp/x.sock"))),
    ],
)
def test_an_address_of_the_wrong_kind_is_refused(name: str, wrong: object) -> None:
    wire = dialer(name)
    for call in (
        lambda: wire.dial(wrong, None, 1),
        lambda: wire.keepalive(wrong, None, 1),
        lambda: wire.url(wrong),
    ):
        with pytest.raises(AddressError) as refused:
            call()
        assert refused.value.field == "address"
        assert name in refused.value.rule


def test_the_registry_names_every_wire() -> None:
    assert set(DIALERS) == {
        "websocket",
        "websocket_tls",
        "websocket_unix",
        "grpc",
        "grpc_tls",
        "roboarena",
        "openpi",
    }
    assert {"websocket_tls", "grpc_tls"} == TLS_WIRES
    for name, kind in DIALERS.items():
        made = dialer(name)
        assert isinstance(made, kind) and made.name == name


def test_the_registry_refuses_unknown_names_and_misplaced_ca_files(certs: Certificates) -> None:
    with pytest.raises(ValueError, match="websocket_unix") as refused:
        dialer("websockets")
    assert "'websockets'" in str(refused.value)
    with pytest.raises(ValueError, match="ca_file"):
        dialer("grpc", ca_file=certs.ca_file)
    made = dialer("grpc_tls", ca_file=certs.ca_file)
    assert isinstance(made, GrpcTlsDialer) and made.ca_file == certs.ca_file
    assert isinstance(dialer("websocket_tls", ca_file=certs.ca_file), WebsocketTlsDialer)


# --------------------------------------------------------------------------------------------- interop


def test_the_shared_facts_match_positronic_wire() -> None:
    from positronic_wire import grpc as their_grpc
    from positronic_wire import wire as their_wire

    assert (SESSION_PATH, KEEPALIVE_PATH) == (their_wire.SESSION_PATH, their_wire.KEEPALIVE_PATH)
    assert (MAX_MESSAGE_BYTES, ALIVE_SECONDS) == (their_wire.MAX_MESSAGE_BYTES, their_wire.ALIVE_SECONDS)
    assert (SESSION_METHOD, KEEPALIVE_METHOD, PROBE_METHOD) == (
        their_grpc.METHOD_PATH,
        their_grpc.KEEPALIVE_METHOD_PATH,
        their_grpc.PROBE_PATH,
    )
    assert (SESSION_PATH_KEY, SESSION_QUERY_KEY) == (
        their_grpc.SESSION_PATH_HEADER,
        their_grpc.SESSION_QUERY_HEADER,
    )


def test_positronic_and_our_grpc_clients_send_the_same_session(grpc_servers: GrpcServers) -> None:
    from positronic_wire import wire as their_wire
    from positronic_wire.grpc import GrpcClientWire

    sent: list[dict[str, str]] = []
    theirs = GrpcClientWire().dial(
        their_wire.HostPortAddress("127.0.0.1", grpc_servers.port, SESSION_PATH, "fps=15"), GOOD, 5
    )
    try:
        theirs.send(b"from positronic")
        assert theirs.recv(timeout=5) == b"from positronic"
        sent.append(grpc_servers.service.metadata[-1])
    finally:
        theirs.close()
    ours = GrpcDialer().dial(HostPort("127.0.0.1", grpc_servers.port, query="fps=15"), GOOD, 5)
    try:
        ours.send(b"from yardstick")
        assert ours.recv(timeout=5) == b"from yardstick"
        sent.append(grpc_servers.service.metadata[-1])
    finally:
        ours.close()
    keys = (SESSION_PATH_KEY, SESSION_QUERY_KEY, "authorization")
    assert [{key: seen[key] for key in keys} for seen in sent] == [
        dict(zip(keys, (SESSION_PATH, "fps=15", "Bearer good"), strict=True))
    ] * 2
    assert (
        GrpcClientWire().keepalive(
            their_wire.HostPortAddress("127.0.0.1", grpc_servers.port, "", ""), None, 5
        )
        == 42
    )


# positronic-wire's client connects without websockets 17's `legacy=True`.
@pytest.mark.filterwarnings(r"ignore:connect\(\) must be used as a context manager:DeprecationWarning")
def test_positronic_and_our_websocket_clients_send_the_same_upgrade_and_keepalive(
    ws: WebsocketServers,
) -> None:
    from positronic_wire import wire as their_wire
    from positronic_wire.websocket import WebsocketClientWire

    theirs_address = their_wire.HostPortAddress("127.0.0.1", ws.port, SESSION_PATH, "fps=15")
    ours_address = HostPort("127.0.0.1", ws.port, query="fps=15")
    compared = ("host", "authorization", "sec-websocket-extensions", "upgrade")
    upgrades = []
    for dial in (
        lambda: WebsocketClientWire().dial(theirs_address, GOOD, 5),
        lambda: WebsocketDialer().dial(ours_address, GOOD, 5),
    ):
        connection = dial()
        connection.close()
        seen = ws.app.upgrades[-1]
        upgrades.append((seen["path"], seen["query"], {key: seen["headers"].get(key) for key in compared}))
    assert upgrades[0] == upgrades[1]
    posts = []
    for call in (
        lambda: WebsocketClientWire().keepalive(theirs_address, GOOD, 5),
        lambda: WebsocketDialer().keepalive(ours_address, GOOD, 5),
    ):
        assert call() == 42
        seen = ws.app.requests[-1]
        posts.append(
            (seen["method"], seen["path"], seen["headers"]["host"], seen["headers"]["authorization"])
        )
    assert posts[0] == posts[1]


# One policy server of positronic-model-server, on every wire it has, with a token and an idle timeout.


@dataclass
class ModelServers:
    port: int
    uds: PurePosixPath
    grpc_port: int


@pytest.fixture(scope="module")
def model_server() -> Iterator[ModelServers]:
    from positronic_model_server import server_wire
    from positronic_model_server.grpc_wire import GrpcWire
    from positronic_model_server.server import Model, ModelServer, Session
    from positronic_model_server.websocket_wire import ServedUnixSocket, WebsocketWire

    class Echo(Session):
        def infer(self, observation: Any) -> Any:
            return observation

    class Loaded(Model):
        def prepare_session(self, params: dict[str, Any]) -> Session:
            return Echo({})

    uds = Path(tempfile.mkdtemp(prefix="ys-", dir="/tmp")) / "model.sock"
    wires = [
        WebsocketWire(server_wire.ServedHostPort("127.0.0.1", 0)),
        WebsocketWire(ServedUnixSocket(uds)),
        GrpcWire(server_wire.ServedHostPort("127.0.0.1", 0)),
    ]
    server = ModelServer(Loaded, idle_timeout_min=2, auth_token="good")
    ready = threading.Event()
    thread = threading.Thread(target=server.serve, args=(wires, ready.set), daemon=True)
    thread.start()
    assert ready.wait(10)
    ports = [wire.served_address.port for wire in (wires[0], wires[2])]
    yield ModelServers(ports[0], PurePosixPath(uds), ports[1])
    server.shutdown()
    thread.join(10)
    shutil.rmtree(uds.parent, ignore_errors=True)


def test_our_dialers_meet_positronic_model_server(model_server: ModelServers) -> None:
    wires: list[tuple[Any, Any]] = [
        (WebsocketDialer(), HostPort("127.0.0.1", model_server.port)),
        (WebsocketUnixDialer(), UnixSocket(model_server.uds)),
        (GrpcDialer(), HostPort("127.0.0.1", model_server.grpc_port)),
    ]
    for wire, address in wires:
        assert wire.probe(address, GOOD, 5) is None, wire.name
        assert wire.keepalive(address, GOOD, 5) == 120, wire.name
        with pytest.raises(ConnectRefused) as refused:
            wire.keepalive(address, BAD, 5)
        assert refused.value.refusal is ConnectRefusal.FORBIDDEN, wire.name
        connection = wire.dial(address, GOOD, 5)
        try:
            assert connection.recv(timeout=5), wire.name  # the server's first status frame
        finally:
            connection.close()
        with pytest.raises(ConnectRefused) as refused:
            connection = wire.dial(address, BAD, 5)
            try:
                connection.recv(timeout=5)  # gRPC refuses at the first message, websocket at the upgrade
            finally:
                connection.close()
        assert refused.value.refusal is ConnectRefusal.FORBIDDEN, wire.name
