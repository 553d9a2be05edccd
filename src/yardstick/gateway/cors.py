"""The replay data, its videos and both rankings routes may be read from any origin: their answers carry
`Access-Control-Allow-Origin: *`, and a preflight (`OPTIONS`) on them is answered here.

A pure ASGI middleware, not Starlette's `BaseHTTPMiddleware` (`@app.middleware("http")`): that one runs every
request's answer through a task group and a memory stream, which cost more than a cached read itself."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yardstick.positronic.handshake import CLIENT_VERSION_HEADER, PLATFORM_VERSION_HEADER
from yardstick.web.site import CORS

SHARED_PREFIXES = ("/v/", "/v1/rankings.")
# A page on another origin may read the contract's version off a shared answer, and send its own.
SHARED = {**CORS, "Access-Control-Expose-Headers": PLATFORM_VERSION_HEADER}
PREFLIGHT = {
    **CORS,
    "Access-Control-Allow-Headers": f"Authorization, {CLIENT_VERSION_HEADER}",
    "Access-Control-Allow-Methods": "GET, OPTIONS",
}


class SharedReads:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(SHARED_PREFIXES):
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":
            await Response(status_code=204, headers=PREFLIGHT)(scope, receive, send)
            return

        async def shared(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(SHARED)
            await send(message)

        await self.app(scope, receive, shared)
