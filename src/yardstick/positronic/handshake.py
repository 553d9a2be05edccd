"""The Positronic contract's version handshake, both ways.

Every answer names the contract this platform serves in `X-Positronic-Platform-Version`: the version of the
`positronic-platform-client` whose models it is built on. Client 0.41.2 refuses a successful answer that names
none, or one older than 0.40.0, so the header goes on every answer, refusals too (harmless there).

Every request of client 0.41.2 names its own version in `X-Positronic-Client-Version`. A keyed call from
a client older than the oldest we read is refused `bad_request` naming the version to install, as the
client's README says a platform does. Client 0.37.1 sends no header at all, and it still reads what we
answer, so a call without the header is served.

A pure ASGI middleware, for the reason `gateway.cors` gives.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version

from packaging.version import InvalidVersion, Version
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yardstick.core.refusals import bad_request
from yardstick.positronic.errors import POSITRONIC

CLIENT_VERSION_HEADER = "X-Positronic-Client-Version"
PLATFORM_VERSION_HEADER = "X-Positronic-Platform-Version"

# The contract we serve is the one of the client package our models come from (pinned in pyproject.toml).
PLATFORM_VERSION = version("positronic-platform-client")
# The oldest client whose models read what we answer (0.37.1 differs from 0.41.2 only in what we answer both).
OLDEST_CLIENT = Version("0.37.1")
INSTALL = f"pip install 'positronic-platform-client=={PLATFORM_VERSION}'"


def client_refusal(named: str | None, keyed: bool) -> str | None:
    """Why a call from the client that names itself `named` is refused, or None when it is served."""
    if named is None or not keyed:
        return None
    try:
        client = Version(named)
    except InvalidVersion:
        return (
            f"{CLIENT_VERSION_HEADER}: {named!r} is not a version; this platform serves contract "
            f"{PLATFORM_VERSION} and reads clients from {OLDEST_CLIENT} on: {INSTALL}"
        )
    if client < OLDEST_CLIENT:
        return (
            f"{CLIENT_VERSION_HEADER}: positronic-platform-client {client} is older than {OLDEST_CLIENT}, "
            f"the oldest this platform (contract {PLATFORM_VERSION}) reads: {INSTALL}"
        )
    return None


class ContractVersion:
    """`ours` tells the Positronic door's paths (where a client too old is refused) from other doors'."""

    def __init__(self, app: ASGIApp, ours: Callable[[str], bool]) -> None:
        self.app = app
        self.ours = ours

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[PLATFORM_VERSION_HEADER] = PLATFORM_VERSION
            await send(message)

        headers = Headers(scope=scope)
        why = client_refusal(headers.get(CLIENT_VERSION_HEADER), keyed="authorization" in headers)
        if why is not None and self.ours(scope["path"]):
            refused = POSITRONIC.refusal(Request(scope, receive), bad_request(why))
            await refused(scope, receive, named)
            return
        await self.app(scope, receive, named)
