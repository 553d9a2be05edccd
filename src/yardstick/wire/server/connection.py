"""A server's end of one connection, whatever carries it: the session runner speaks only this."""

from __future__ import annotations

from typing import Protocol


class ServerConnection(Protocol):
    async def send(self, message: bytes) -> None:
        """Raises PeerDisconnected once the client is gone."""

    async def receive(self) -> bytes:
        """The next message. Raises PeerDisconnected once the client ends the connection, ProtocolError on
        a text frame where bytes were due."""

    async def send_text(self, text: str) -> None: ...

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """End the connection; `code` 1008 refuses, 1011 reports an internal error."""
