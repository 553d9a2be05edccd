"""The client side of a wire: a dialer opens connections to an address; a connection carries whole
messages (bytes) both ways and reads none of them. The session protocol sits on top (`session.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from yardstick.wire.errors import ConnectRefusal


class Connection(Protocol):
    def send(self, message: bytes) -> None:
        """Send one message; returns once it is written. Raises PeerDisconnected once the peer is gone."""

    def recv(self, timeout: float | None = None) -> bytes:
        """The next message. Raises TimeoutError when none comes in time, PeerDisconnected when the peer
        ends the connection, ConnectRefused when the server refuses the session before its first message,
        RemoteError when the peer answers in text (an error)."""

    def close(self) -> None:
        """Close this end; never raises."""


class Dialer(Protocol):
    """One wire's client side. Stateless but for its settings (a CA file for the TLS wires)."""

    name: str

    def url(self, address: Any) -> str:
        """The address as this wire names it, for logs and errors."""

    def dial(self, address: Any, headers: Mapping[str, str] | None, open_timeout: float) -> Connection:
        """An open connection. Raises ConnectRefused (with its ConnectRefusal) when it does not open, or
        AddressError when `address` is not the kind this wire dials."""

    def keepalive(self, address: Any, headers: Mapping[str, str] | None, timeout: float) -> int | None:
        """Reset the server's idle timer outside any session: the seconds it stays alive, or None for no
        idle timeout. Raises ConnectRefused, or KeepaliveUnsupported."""

    def probe(
        self, address: Any, headers: Mapping[str, str] | None, open_timeout: float
    ) -> ConnectRefusal | None:
        """None when a server answers at `address` (without opening a session), else why not."""


class KeepaliveUnsupported(Exception):
    """The server serves sessions but not the keepalive call (roboarena and openpi never do)."""
