"""The websocket side of the policy server, on the `websockets` library's asyncio server: the session
route, the openpi/roboarena root, and the plain HTTP routes beside them (model list, keepalive, health),
which the handshake hook answers before any upgrade. A thin stack on purpose: it is the hot path of every
inference, and each layer between the socket and the policy costs tens of microseconds a round trip."""

from __future__ import annotations

import contextlib
import hmac
import json
import time
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from websockets.asyncio.server import ServerConnection as WsConnection
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from yardstick.wire import protocol as p
from yardstick.wire.address import KEEPALIVE_PATH, MODELS_PATH, SESSION_PATH
from yardstick.wire.errors import PeerDisconnected, ProtocolError
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.runner import run_dialect, run_session


class Activity:
    """What clients are doing: sessions open now and when anything last happened, for the idle timeout
    that keepalive calls reset."""

    def __init__(self, idle_timeout_s: float | None) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.last = time.monotonic()
        self.sessions = 0

    def touch(self) -> None:
        self.last = time.monotonic()

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Count a session open for the block."""
        self.sessions += 1
        self.touch()
        try:
            yield
        finally:
            self.sessions -= 1
            self.touch()

    def keepalive(self) -> dict[str, int | None]:
        """Reset the idle timer: the keepalive answer, the seconds the server now stays up (None: forever)."""
        self.touch()
        return {p.ALIVE_SECONDS: None if self.idle_timeout_s is None else int(self.idle_timeout_s)}


def session_host(hosts: dict[str, PolicyHost], path: str) -> PolicyHost | None:
    """The policy a session route reaches: the first of `hosts` on the bare route, a model by id below it."""
    if path == SESSION_PATH:
        return next(iter(hosts.values()))
    if path.startswith(SESSION_PATH + "/"):
        return hosts.get(path[len(SESSION_PATH) + 1 :])
    return None


def authorized(headers: Any, token: str | None) -> bool:
    """A bearer token (`Authorization: Bearer <token>`), or openpi's `Api-Key <token>` form."""
    if token is None:
        return True
    given = str(headers.get(p.AUTHORIZATION, "") or "")
    return any(
        hmac.compare_digest(given.encode(), f"{kind} {token}".encode()) for kind in ("Bearer", "Api-Key")
    )


class WebsocketConnection:
    """The runner's view of one websocket."""

    def __init__(self, websocket: WsConnection) -> None:
        self._websocket = websocket

    async def send(self, message: bytes) -> None:
        try:
            await self._websocket.send(message)
        except ConnectionClosed as exc:
            raise PeerDisconnected(str(exc)) from exc

    async def send_text(self, text: str) -> None:
        try:
            await self._websocket.send(text)
        except ConnectionClosed as exc:
            raise PeerDisconnected(str(exc)) from exc

    async def receive(self) -> bytes:
        try:
            message = await self._websocket.recv()
        except ConnectionClosed as exc:
            raise PeerDisconnected(str(exc)) from exc
        if isinstance(message, str):
            raise ProtocolError("a message is a binary frame, not text")
        return message

    async def close(self, code: int = 1000, reason: str = "") -> None:
        # A close frame has room for 123 bytes of reason.
        await self._websocket.close(code, reason.encode()[:123].decode(errors="ignore"))


class WebsocketRoutes:
    """`hosts` by model id; the first is the default a bare session route reaches."""

    def __init__(
        self,
        hosts: dict[str, PolicyHost],
        *,
        token: str | None,
        activity: Activity,
        transport_meta: dict[str, Any],
    ) -> None:
        self.hosts = hosts
        self.default = next(iter(hosts.values()))
        self.token = token
        self.activity = activity
        self.transport_meta = transport_meta

    def process_request(self, connection: WsConnection, request: Request) -> Response | None:
        """Answer plain HTTP here; let through only upgrades to a route that serves sessions, from a
        client with the token. A refused upgrade reads 403, as the peers expect."""
        path = urlsplit(request.path).path
        allowed = authorized(request.headers, self.token)
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return self._http(request.method, path, allowed)
        if not allowed or (session_host(self.hosts, path) is None and path not in ("", "/")):
            return _json(HTTPStatus.FORBIDDEN, {"detail": "no session served here for this client"})
        return None

    async def handle(self, websocket: WsConnection) -> None:
        request = websocket.request
        assert request is not None
        split = urlsplit(request.path)
        conn = WebsocketConnection(websocket)
        with self.activity.session():
            if split.path in ("", "/"):
                await run_dialect(conn, self.default)
            else:
                host = session_host(self.hosts, split.path)
                assert host is not None  # process_request refused every other route
                await run_session(
                    conn, host, parse_qsl(split.query, keep_blank_values=True), self.transport_meta
                )

    def _http(self, method: str, path: str, allowed: bool) -> Response:
        routes = {
            "/healthz": ("GET", self._health),
            MODELS_PATH: ("GET", self._models),
            KEEPALIVE_PATH: ("POST", self._keepalive),
        }
        if path not in routes:
            return _json(HTTPStatus.NOT_FOUND, {"detail": f"no route {path}"})
        wanted, answer = routes[path]
        if method != wanted:
            return _json(HTTPStatus.METHOD_NOT_ALLOWED, {"detail": f"{path} takes {wanted}"}, allow=wanted)
        if not allowed and path != "/healthz":
            return _json(HTTPStatus.UNAUTHORIZED, {"detail": "invalid or missing bearer token"})
        status, body = answer()
        return _json(status, body)

    def _health(self) -> tuple[HTTPStatus, Any]:
        states = {model_id: host.state.value for model_id, host in self.hosts.items()}
        healthy = all(state != "failed" for state in states.values())
        return (HTTPStatus.OK if healthy else HTTPStatus.SERVICE_UNAVAILABLE), {
            "status": "ok" if healthy else "failed",
            "models": states,
        }

    def _models(self) -> tuple[HTTPStatus, Any]:
        return HTTPStatus.OK, {"models": [host.meta() for host in self.hosts.values()]}

    def _keepalive(self) -> tuple[HTTPStatus, Any]:
        return HTTPStatus.OK, self.activity.keepalive()


def _json(status: HTTPStatus, body: Any, allow: str | None = None) -> Response:
    data = json.dumps(body).encode()
    headers = Headers(
        [("Content-Type", "application/json"), ("Content-Length", str(len(data))), ("Connection", "close")]
    )
    if allow is not None:
        headers["Allow"] = allow
    return Response(status.value, status.phrase, headers, data)
