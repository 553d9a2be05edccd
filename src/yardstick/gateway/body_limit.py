"""Refuse a request body past `core.limits.BODY_BYTES` before anything parses it: a 413 in the envelope of
the door whose path it is. A declared `Content-Length` over the limit is refused unread; a chunked body is
read up to the limit and refused as soon as it passes it, so no route ever holds more than the limit."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import Request, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yardstick.core.refusals import Problem, Refusal, RefusalKind

Refuse = Callable[[Request, Refusal], Response]


class BodyLimit:
    """`limit` for every path but those of `larger` ({path: limit}: the routes that take a code bundle) and
    those `matching` a pattern ({regex: limit}: routes whose paths hold a name, such as a volume's chunk
    uploads)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: int,
        refuse: Refuse,
        larger: Mapping[str, int] | None = None,
        matching: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.default = limit
        self.larger = dict(larger or {})
        self.matching = [(re.compile(pattern), size) for pattern, size in (matching or {}).items()]
        self.refuse = refuse

    def limit(self, path: str) -> int:
        if path in self.larger:
            return self.larger[path]
        return next((size for pattern, size in self.matching if pattern.fullmatch(path)), self.default)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit(scope["path"])
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None:
            # uvicorn's HTTP parser (httptools, or h11) has checked it is a number and will deliver exactly
            # that many bytes.
            if int(declared) > limit:
                await self._too_large(scope, receive, send, limit, f"{int(declared):,} bytes")
                return
            await self.app(scope, receive, send)
            return
        if b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
            await self.app(scope, receive, send)  # no body
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            body += message.get("body", b"")
            if len(body) > limit:
                await self._too_large(scope, receive, send, limit, "more than that")
                return
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": bytes(body), "more_body": False}
        await self.app(scope, _replay([whole], receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int, size: str) -> None:
        refusal = Refusal(
            RefusalKind.TOO_LARGE,
            f"body: a request body is at most {limit:,} bytes, and this one is {size}",
            problems=[Problem("body", f"at most {limit:,} bytes")],
        )
        response = self.refuse(Request(scope), refusal)
        response.headers["Connection"] = "close"  # the rest of the body is not read
        await response(scope, receive, send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """`receive`, with `messages` handed out first (a body already read)."""
    pending = list(messages)

    async def replayed() -> Any:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
