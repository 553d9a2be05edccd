"""The client side of the websocket wires: `websocket`, `websocket_tls`, `websocket_unix`, and the two
dialects whose protocol lives at the server's root, `roboarena` and `openpi`.

Every fact that crosses the wire matches positronic-wire 0.12.0's client, so a server written for that
client (positronic-model-server's, ours) answers ours the same way. The code is our own.

Each dial opens its socket itself and hands it to `websockets`: that way `open_timeout` bounds the name
lookup too (`getaddrinfo` takes no timeout), and dial, probe and keepalive all reach the server by the same
route. It also means no proxy from the environment is used, and no redirect is followed (a 3xx reads as
FINAL): a probe that reached the server directly must not vouch for a dial that went somewhere else.
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import queue
import socket
import ssl
import stat
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from http import HTTPStatus
from http.client import HTTPConnection, HTTPException
from pathlib import PurePosixPath
from typing import Any, Generic, TypeVar

from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidMessage,
    InvalidStatus,
    InvalidURI,
    WebSocketException,
)

from yardstick.wire import caller_websocket
from yardstick.wire.address import KEEPALIVE_PATH, HostPort, Root, UnixSocket, bracketed, netloc
from yardstick.wire.caller_websocket import CallerWebsocket
from yardstick.wire.codec import MAX_MESSAGE_BYTES
from yardstick.wire.errors import AddressError, ConnectRefusal, ConnectRefused, PeerDisconnected, RemoteError
from yardstick.wire.protocol import ALIVE_SECONDS
from yardstick.wire.transport import KeepaliveUnsupported

# A proxy or a load balancer drops a connection it has seen nothing on for a while (often 60 s), and a
# session is silent while the policy infers. Pings keep it open.
SESSION_PING_SECONDS = 20.0

# A keepalive answer is one small JSON object; reading more than this only feeds a misbehaving peer.
_KEEPALIVE_BODY_LIMIT = 16 * 1024

T = TypeVar("T")
A = TypeVar("A", HostPort, UnixSocket)


# ---------------------------------------------------------------------------------------------- shared


def expect_address(address: object, kind: type[T], wire: str) -> T:
    """`address` if it is the kind `wire` dials; an AddressError naming the kind otherwise."""
    if not isinstance(address, kind):
        raise AddressError(
            "address", f"the {wire} wire dials a {kind.__name__} address, not {type(address).__name__}"
        )
    return address


def _with_query(path: str, query: str) -> str:
    return f"{path}?{query}" if query else path


def seconds_left(deadline: float) -> float:
    """What remains before `deadline`; TimeoutError once nothing does, as a socket that timed out raises."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the time allowed ran out")
    return left


def alive_seconds_of(body: bytes, where: str) -> int | None:
    """The seconds a keepalive answer carries (None: the server never idles out).

    An answer without them means something other than a session server answered, which no retry changes.
    """
    try:
        alive = json.loads(body)[ALIVE_SECONDS]
    except (ValueError, LookupError, TypeError, RecursionError) as e:
        raise ConnectRefused(ConnectRefusal.FINAL, f"{where} answered without {ALIVE_SECONDS!r}") from e
    # bool is an int to Python, never to the server's JSON.
    if alive is None or (isinstance(alive, int) and not isinstance(alive, bool)):
        return alive
    raise ConnectRefused(
        ConnectRefusal.FINAL, f"{where} answered {ALIVE_SECONDS} = {alive!r}, not an integer or null"
    )


def status_refusal(status: int) -> ConnectRefusal:
    """What an HTTP status other than the upgrade says about the server behind it."""
    if status == HTTPStatus.FORBIDDEN:
        return ConnectRefusal.FORBIDDEN
    if status >= HTTPStatus.INTERNAL_SERVER_ERROR or status == HTTPStatus.TOO_MANY_REQUESTS:
        return ConnectRefusal.COLD
    return ConnectRefusal.FINAL


# A resolver's definite "no such name". EAI_AGAIN (no answer from the resolver) is left out on purpose: a
# name that did not resolve yet may later; a misspelt one never will.
_NO_SUCH_NAME = frozenset({socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)})


def tcp_refusal(raised: BaseException) -> ConnectRefusal:
    """What a handshake over TCP that did not open says about the server."""
    if isinstance(raised, InvalidStatus):
        return status_refusal(raised.response.status_code)
    if isinstance(raised, ssl.SSLCertVerificationError | InvalidURI):
        return ConnectRefusal.FINAL
    if isinstance(raised, socket.gaierror):
        return ConnectRefusal.FINAL if raised.errno in _NO_SUCH_NAME else ConnectRefusal.SILENT
    if isinstance(raised, InvalidHandshake) and not isinstance(raised, InvalidMessage):
        # Something answered, but not with a valid upgrade: a proxy in front of a backend still starting.
        return ConnectRefusal.COLD
    # Refused, timed out, reset (a TLS handshake included), or closed before a whole answer came back.
    return ConnectRefusal.SILENT


def unix_refusal(raised: BaseException, uds: PurePosixPath) -> ConnectRefusal:
    """What a handshake over a unix socket that did not open says about the server.

    On a port, any socket error may clear up when the server comes up. A path is different: a path holding
    a regular file is refused in the same words as a socket nobody listens on, and a refused permission or
    an over-long path never changes, so those are FINAL. A missing path may yet be created by the server.
    """
    if not isinstance(raised, OSError) or isinstance(raised, ssl.SSLError):
        return tcp_refusal(raised)
    if isinstance(raised, ConnectionRefusedError | FileNotFoundError):
        try:
            mode = os.stat(uds).st_mode
        except FileNotFoundError:
            return ConnectRefusal.SILENT
        except OSError:
            return ConnectRefusal.FINAL
        return ConnectRefusal.SILENT if stat.S_ISSOCK(mode) else ConnectRefusal.FINAL
    # A server that accepted and then reset, or did not finish the handshake in time: it is starting.
    if isinstance(raised, ConnectionError | TimeoutError):
        return ConnectRefusal.SILENT
    return ConnectRefusal.FINAL


def _resolve(host: str, port: int, deadline: float) -> Sequence[tuple[Any, ...]]:
    """The addresses `host` has, looked up in a thread so that the wait can end at `deadline`.

    A lookup still running at the deadline finishes in its thread (the resolver's own timeouts end it), and
    nobody reads its answer.
    """
    answers: queue.SimpleQueue[Sequence[tuple[Any, ...]] | OSError] = queue.SimpleQueue()

    def look_up() -> None:
        try:
            answers.put(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as e:
            answers.put(e)
        except ValueError as e:
            # A host the IDNA codec refuses ("a..b") or holding a NUL: no resolver will ever know it.
            answers.put(socket.gaierror(socket.EAI_NONAME, f"{host!r} is not a host name ({e})"))

    threading.Thread(target=look_up, name=f"resolve {host}", daemon=True).start()
    try:
        found = answers.get(timeout=seconds_left(deadline))
    except queue.Empty:
        raise TimeoutError(f"{host} did not resolve in time") from None
    if isinstance(found, OSError):
        raise found
    return found


def open_tcp(host: str, port: int, deadline: float) -> socket.socket:
    """A TCP socket connected to `host:port`, trying each address it resolves to, all before `deadline`.

    (`socket.create_connection` gives each address the whole timeout, and the lookup none.)
    """
    failure: OSError = OSError(f"{host} resolves to no address")
    for family, kind, proto, _name, sockaddr in _resolve(host, port, deadline):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(seconds_left(deadline))
            sock.connect(sockaddr)
        except OSError as e:
            sock.close()
            failure = e
            if time.monotonic() >= deadline:
                break
        else:
            # websockets sets this only on sockets it opens itself. Without it, Nagle holds the tail of a
            # multi-segment observation for the peer's delayed ACK: ~0.1 ms a round trip with an image.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
    raise failure


def open_unix(uds: PurePosixPath, deadline: float) -> socket.socket:
    """A socket connected to the unix socket at `uds` before `deadline`."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(seconds_left(deadline))
        sock.connect(str(uds))
    except BaseException:
        sock.close()
        raise
    return sock


def _handshake(
    uri: str,
    sock: socket.socket,
    deadline: float,
    headers: Mapping[str, str] | None,
    *,
    tls: ssl.SSLContext | None = None,
    ping_interval: float | None = SESSION_PING_SECONDS,
    ping_timeout: float | None = 20.0,
    close_timeout: float | None = 10.0,
) -> CallerWebsocket:
    """The websocket upgrade of `uri` on the connected `sock`, finished before `deadline`.

    `sock` belongs to the connection from here on, and is closed when the upgrade fails. The connection
    reads on the caller's thread (caller_websocket.py): websockets' own sync client reads on a thread of
    its own, and handing each reply over from it costs a thread switch a round trip.
    """
    return caller_websocket.connect(
        uri,
        sock,
        deadline,
        headers,
        tls=tls,
        max_size=MAX_MESSAGE_BYTES,
        ping_interval=ping_interval,
        ping_timeout=ping_timeout,
        close_timeout=close_timeout,
    )


@contextlib.contextmanager
def _cut_off_at(deadline: float, sock: socket.socket) -> Iterator[None]:
    """Shut `sock` down at `deadline` if the block is still running then. The block must not close `sock`.

    A socket timeout bounds each read, not the call: a peer that answers a byte at a time could hold a read
    far past any timeout. The shutdown is done on a plain socket object over the same descriptor (an
    SSLSocket's own `shutdown` tears down its TLS state under the reader's feet); the timer is stopped before
    the block ends, so the descriptor is still this call's when it fires.
    """
    fd = sock.fileno()

    def cut() -> None:
        raw = socket.socket(fileno=fd)
        try:
            raw.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # the peer hung up first
        finally:
            raw.detach()

    timer = threading.Timer(max(0.0, deadline - time.monotonic()), cut)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()


def _post_keepalive(
    sock: socket.socket, host_header: str, headers: Mapping[str, str] | None
) -> tuple[int, bytes]:
    """POST the keepalive route on the connected `sock` (left open): the status, and the body of a 200."""
    http = HTTPConnection(host_header)
    # The connection is already open; http.client only opens one itself when it has none.
    http.sock = sock
    http.request("POST", KEEPALIVE_PATH, body=b"", headers={"Host": host_header, **(headers or {})})
    with http.getresponse() as answer:
        body = answer.read(_KEEPALIVE_BODY_LIMIT) if answer.status == HTTPStatus.OK else b""
        return answer.status, body


# ------------------------------------------------------------------------------------------ connection


class WebsocketConnection:
    """One open websocket: binary frames are messages, a text frame is the peer's error."""

    def __init__(self, websocket: CallerWebsocket, where: str) -> None:
        self._websocket = websocket
        self._where = where

    def send(self, message: bytes) -> None:
        try:
            self._websocket.send(message)
        except (ConnectionClosed, OSError) as e:
            raise PeerDisconnected(f"the connection to {self._where} is closed: {e}") from e

    def recv(self, timeout: float | None = None) -> bytes:
        try:
            message = self._websocket.recv(timeout=None if timeout is None else max(0.0, timeout))
        except ConnectionClosed as e:
            raise PeerDisconnected(f"{self._where} closed the connection: {e}") from e
        except TimeoutError:
            raise TimeoutError(f"no message from {self._where} within {timeout} s") from None
        if isinstance(message, str):
            raise RemoteError(message)
        return message

    def close(self) -> None:
        # The close handshake waits for the peer; a peer that is gone must not turn cleanup into an error.
        with contextlib.suppress(Exception):
            self._websocket.close()


# ----------------------------------------------------------------------------- wires with routed sessions


class _RoutedWebsocket(abc.ABC, Generic[A]):
    """The wires whose server routes a session by the path (`/api/v1/session`), serves the keepalive route
    beside it, and refuses an upgrade on its root with 403."""

    name: str

    # Per member: which address it takes, the URI its upgrade asks for, how it reaches the server, and how a
    # failure reads.
    @abc.abstractmethod
    def _address(self, address: object) -> A: ...

    @abc.abstractmethod
    def _handshake_uri(self, address: A) -> str: ...

    @abc.abstractmethod
    def _connect(self, address: A, deadline: float) -> socket.socket: ...

    @abc.abstractmethod
    def _refusal(self, raised: BaseException, address: A) -> ConnectRefusal: ...

    @abc.abstractmethod
    def _host_header(self, address: A) -> str: ...

    def _describe(self, address: A) -> str:
        return self._handshake_uri(address)

    def _tls(self) -> ssl.SSLContext | None:
        return None

    def _secure(self, sock: socket.socket, address: A) -> socket.socket:
        """`sock` with TLS on it, for the calls that do not go through websockets (the keepalive)."""
        return sock

    def url(self, address: object) -> str:
        return self._describe(self._address(address))

    def dial(
        self, address: object, headers: Mapping[str, str] | None, open_timeout: float
    ) -> WebsocketConnection:
        checked = self._address(address)
        where = self._describe(checked)
        deadline = time.monotonic() + open_timeout
        try:
            sock = self._connect(checked, deadline)
            websocket = _handshake(self._handshake_uri(checked), sock, deadline, headers, tls=self._tls())
        except (OSError, WebSocketException) as e:
            raise ConnectRefused(self._refusal(e, checked), f"{where}: {e}") from e
        except ValueError as e:
            # Something websockets refuses before any byte is sent (a header value it cannot write).
            raise ConnectRefused(ConnectRefusal.FINAL, f"{where}: {e}") from e
        return WebsocketConnection(websocket, where)

    def keepalive(self, address: object, headers: Mapping[str, str] | None, timeout: float) -> int | None:
        checked = self._address(address)
        where = f"{KEEPALIVE_PATH} on {self._describe(checked.at_root())}"
        deadline = time.monotonic() + timeout
        try:
            sock = self._connect(checked, deadline)
            try:
                # The socket's timeout bounds the TLS handshake step by step; the cut-off bounds the request.
                sock.settimeout(seconds_left(deadline))
                sock = self._secure(sock, checked)
                with _cut_off_at(deadline, sock):
                    status, body = _post_keepalive(sock, self._host_header(checked), headers)
            finally:
                sock.close()
        except (HTTPException, OSError) as e:
            if time.monotonic() >= deadline:
                raise ConnectRefused(ConnectRefusal.SILENT, f"{where}: no answer within {timeout} s") from e
            if isinstance(e, HTTPException) and not isinstance(e, OSError):
                # The connection opened, then closed or babbled before a readable answer.
                raise ConnectRefused(ConnectRefusal.SILENT, f"{where}: {e!r}") from e
            raise ConnectRefused(self._refusal(e, checked), f"{where}: {e}") from e
        if status == HTTPStatus.OK:
            return alive_seconds_of(body, where)
        if status == HTTPStatus.NOT_FOUND:
            # A session server without the route answers 404, and so does any other web server; only the
            # probe tells them apart.
            refusal = self.probe(checked, headers, max(0.0, deadline - time.monotonic()))
            if refusal is None:
                raise KeepaliveUnsupported(f"{where} answers 404: the server serves sessions, not keepalive")
            raise ConnectRefused(refusal, f"{where} answers 404, and no session server answers there")
        # An HTTP route refuses a credential with 401, where an upgrade refuses it with 403.
        refusal = ConnectRefusal.FORBIDDEN if status == HTTPStatus.UNAUTHORIZED else status_refusal(status)
        raise ConnectRefused(refusal, f"{where} answers {status}")

    def probe(
        self, address: object, headers: Mapping[str, str] | None, open_timeout: float
    ) -> ConnectRefusal | None:
        """An upgrade on the root, which a session server refuses with 403 and nothing in front of it does
        (an edge refuses a credential with 401). So 403 means the server; other statuses read as in dial."""
        root = self._address(address).at_root()
        deadline = time.monotonic() + open_timeout
        try:
            sock = self._connect(root, deadline)
            websocket = _handshake(
                self._handshake_uri(root), sock, deadline, headers, tls=self._tls(), close_timeout=0
            )
        except InvalidStatus as e:
            status = e.response.status_code
            return None if status == HTTPStatus.FORBIDDEN else status_refusal(status)
        except (OSError, WebSocketException) as e:
            return self._refusal(e, root)
        except ValueError:
            return ConnectRefusal.FINAL
        # Something upgraded the root: it answers, though it is no session server we know of.
        with contextlib.suppress(Exception):
            websocket.close()
        return None


class WebsocketDialer(_RoutedWebsocket[HostPort]):
    """`websocket`: sessions upgrade on `ws://host[:port]/api/v1/session?query`."""

    name = "websocket"
    scheme = "ws"
    default_port = 80

    def _address(self, address: object) -> HostPort:
        return expect_address(address, HostPort, self.name)

    def _handshake_uri(self, address: HostPort) -> str:
        where = netloc(address.host, address.port, self.default_port)
        return f"{self.scheme}://{where}{_with_query(address.path, address.query)}"

    def _connect(self, address: HostPort, deadline: float) -> socket.socket:
        return open_tcp(address.host, address.port, deadline)

    def _refusal(self, raised: BaseException, address: HostPort) -> ConnectRefusal:
        return tcp_refusal(raised)

    def _host_header(self, address: HostPort) -> str:
        return netloc(address.host, address.port, self.default_port)


class WebsocketTlsDialer(WebsocketDialer):
    """`websocket_tls`: the same sessions over `wss://`, verified against the system's roots, or against
    `ca_file` alone when one is given (a private CA, a test)."""

    name = "websocket_tls"
    scheme = "wss"
    default_port = 443

    def __init__(self, ca_file: str | None = None) -> None:
        self.ca_file = ca_file
        try:
            # Built once: loading the roots costs milliseconds, and one context serves any number of dials.
            self._context = ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"ca_file: {ca_file} holds no certificate this process can load ({e})") from e

    def _tls(self) -> ssl.SSLContext:
        return self._context

    def _secure(self, sock: socket.socket, address: HostPort) -> socket.socket:
        return self._context.wrap_socket(sock, server_hostname=address.host)


class WebsocketUnixDialer(_RoutedWebsocket[UnixSocket]):
    """`websocket_unix`: the same sessions on a unix socket. The upgrade asks for
    `ws://localhost/api/v1/session?query`: `localhost` only stands in for the socket, which has no name."""

    name = "websocket_unix"
    host_stand_in = "localhost"

    def _address(self, address: object) -> UnixSocket:
        return expect_address(address, UnixSocket, self.name)

    def _handshake_uri(self, address: UnixSocket) -> str:
        return f"ws://{self.host_stand_in}{_with_query(address.path, address.query)}"

    def _describe(self, address: UnixSocket) -> str:
        return f"ws+unix://{address.uds}{_with_query(address.path, address.query)}"

    def _connect(self, address: UnixSocket, deadline: float) -> socket.socket:
        return open_unix(address.uds, deadline)

    def _refusal(self, raised: BaseException, address: UnixSocket) -> ConnectRefusal:
        return unix_refusal(raised, address.uds)

    def _host_header(self, address: UnixSocket) -> str:
        return self.host_stand_in


# --------------------------------------------------------------------------- wires at the server's root


class _RootWebsocket:
    """The dialects whose server speaks on its root and routes on the frames: no path, no query, no
    keepalive. The server's first frame announces it (its metadata); `dial` leaves it for the session."""

    name: str
    ping_interval: float
    ping_timeout: float

    def _address(self, address: object) -> Root:
        return expect_address(address, Root, self.name)

    def url(self, address: object) -> str:
        checked = self._address(address)
        return f"ws://{bracketed(checked.host)}:{checked.port}"

    def _open(
        self,
        address: Root,
        headers: Mapping[str, str] | None,
        open_timeout: float,
        close_timeout: float | None,
    ) -> WebsocketConnection:
        where = self.url(address)
        deadline = time.monotonic() + open_timeout
        try:
            sock = open_tcp(address.host, address.port, deadline)
            websocket = _handshake(
                where,
                sock,
                deadline,
                headers,
                ping_interval=self.ping_interval,
                ping_timeout=self.ping_timeout,
                close_timeout=close_timeout,
            )
        except (OSError, WebSocketException) as e:
            raise ConnectRefused(tcp_refusal(e), f"{where}: {e}") from e
        except ValueError as e:
            raise ConnectRefused(ConnectRefusal.FINAL, f"{where}: {e}") from e
        return WebsocketConnection(websocket, where)

    def dial(
        self, address: object, headers: Mapping[str, str] | None, open_timeout: float
    ) -> WebsocketConnection:
        return self._open(self._address(address), headers, open_timeout, close_timeout=10.0)

    def keepalive(self, address: object, headers: Mapping[str, str] | None, timeout: float) -> int | None:
        self._address(address)
        raise KeepaliveUnsupported(f"the {self.name} protocol has no keepalive call")

    def probe(
        self, address: object, headers: Mapping[str, str] | None, open_timeout: float
    ) -> ConnectRefusal | None:
        """Open the root and wait for the server's announcement, within `open_timeout` in all.

        These servers have nothing but the root to ask, so the probe is a short session. A text frame is a
        server that answers with an error: it is up, and the session that follows will carry the error.
        """
        deadline = time.monotonic() + open_timeout
        try:
            connection = self._open(self._address(address), headers, open_timeout, close_timeout=0)
        except ConnectRefused as e:
            return e.refusal
        try:
            connection.recv(timeout=max(0.0, deadline - time.monotonic()))
        except RemoteError:
            return None
        except (TimeoutError, PeerDisconnected):
            # It upgraded and announced nothing: a server still loading its policy.
            return ConnectRefusal.COLD
        finally:
            connection.close()
        return None


class RoboarenaDialer(_RootWebsocket):
    """`roboarena`: a websocket at `ws://host:port`."""

    name = "roboarena"
    # A roboarena server keeps one connection for a whole run and sends nothing between inferences, and may
    # answer a ping late while it infers: ping seldom, and give the pong a long time.
    ping_interval = 60.0
    ping_timeout = 600.0


class OpenpiDialer(_RootWebsocket):
    """`openpi`: the openpi policy server's websocket at `ws://host:port`; it authenticates on
    `Authorization: Api-Key <key>`, which the caller puts in the headers."""

    name = "openpi"
    # Pings as often as openpi's own client sends them. Its server infers on its event loop and answers a
    # ping only between inferences, so the pong gets as long as a slow first inference can take.
    ping_interval = SESSION_PING_SECONDS
    ping_timeout = 600.0
