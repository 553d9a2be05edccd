"""The gRPC side of the policy server: one bidirectional stream of raw bytes per connection on
`/positronic.offboard.v1.Inference/Session` (the session route and query travel as metadata), the unary
`KeepAlive` beside it, and UNIMPLEMENTED for anything else (which is what a client's probe looks for)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

import grpc
import grpc.aio

from yardstick.wire.address import SESSION_PATH
from yardstick.wire.codec import MAX_MESSAGE_BYTES
from yardstick.wire.dial_grpc import SERVICE, SESSION_PATH_KEY, SESSION_QUERY_KEY
from yardstick.wire.errors import PeerDisconnected
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.runner import run_session
from yardstick.wire.server.ws_server import Activity, authorized, session_host

SESSION_METHOD = "Session"
KEEPALIVE_METHOD = "KeepAlive"

SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # Clients ping idle connections every 20 s; gRPC's defaults would answer that with GOAWAY.
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 0),
]


class GrpcConnection:
    def __init__(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self._requests = requests
        self._context = context

    async def send(self, message: bytes) -> None:
        try:
            await self._context.write(message)
        except grpc.RpcError as exc:
            raise PeerDisconnected(f"the client ended the stream: {exc}") from exc

    async def send_text(self, text: str) -> None:
        await self.send(text.encode())

    async def receive(self) -> bytes:
        try:
            return await anext(self._requests)
        except StopAsyncIteration:
            raise PeerDisconnected("the client ended the stream") from None

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if code != 1000:
            self._context.set_code(grpc.StatusCode.ABORTED)
            self._context.set_details(reason)


def _headers(context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str]:
    return {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}


def grpc_server(
    hosts: dict[str, PolicyHost], *, token: str | None, activity: Activity, transport_meta: dict[str, Any]
) -> grpc.aio.Server:
    """A gRPC server with the session service registered; the caller binds its ports and starts it."""

    async def session(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]) -> None:
        headers = _headers(context)
        if not authorized(headers, token):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "invalid or missing bearer token")
        path = headers.get(SESSION_PATH_KEY, SESSION_PATH)
        host = session_host(hosts, path)
        if host is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND, f"no session on {path!r}; sessions open on {SESSION_PATH}"
            )
        assert host is not None
        query = parse_qsl(headers.get(SESSION_QUERY_KEY, ""), keep_blank_values=True)
        with activity.session():
            await run_session(GrpcConnection(requests, context), host, query, transport_meta)

    async def keepalive(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        if not authorized(_headers(context), token):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "invalid or missing bearer token")
        return json.dumps(activity.keepalive()).encode()

    methods = {
        SESSION_METHOD: grpc.stream_stream_rpc_method_handler(
            session, request_deserializer=None, response_serializer=None
        ),
        KEEPALIVE_METHOD: grpc.unary_unary_rpc_method_handler(
            keepalive, request_deserializer=None, response_serializer=None
        ),
    }
    server = grpc.aio.server(options=SERVER_OPTIONS)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
    return server
