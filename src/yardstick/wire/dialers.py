"""Every wire's dialer, by the name a caller selects it by."""

from __future__ import annotations

import functools

from yardstick.wire.address import TLS_WIRES
from yardstick.wire.dial_grpc import GrpcConnection, GrpcDialer, GrpcTlsDialer
from yardstick.wire.dial_websocket import (
    OpenpiDialer,
    RoboarenaDialer,
    WebsocketConnection,
    WebsocketDialer,
    WebsocketTlsDialer,
    WebsocketUnixDialer,
)
from yardstick.wire.transport import Dialer

__all__ = [
    "DIALERS",
    "TLS_WIRES",
    "GrpcConnection",
    "GrpcDialer",
    "GrpcTlsDialer",
    "OpenpiDialer",
    "RoboarenaDialer",
    "WebsocketConnection",
    "WebsocketDialer",
    "WebsocketTlsDialer",
    "WebsocketUnixDialer",
    "dialer",
]

DIALERS: dict[str, type[Dialer]] = {
    kind.name: kind
    for kind in (
        WebsocketDialer,
        WebsocketTlsDialer,
        WebsocketUnixDialer,
        GrpcDialer,
        GrpcTlsDialer,
        RoboarenaDialer,
        OpenpiDialer,
    )
}

# The dialers of the wires that verify a certificate (`TLS_WIRES`), and so take a CA file.
_TLS: dict[str, type[WebsocketTlsDialer] | type[GrpcTlsDialer]] = {
    WebsocketTlsDialer.name: WebsocketTlsDialer,
    GrpcTlsDialer.name: GrpcTlsDialer,
}


@functools.lru_cache(maxsize=32)
def dialer(name: str, *, ca_file: str | None = None) -> Dialer:
    """The dialer of the wire called `name`. `ca_file` (PEM) replaces the system's roots on a TLS wire.

    A dialer holds nothing but its settings, so one is made per name and CA file and shared: a TLS dialer
    loads its roots once (milliseconds), not at every session opened.

    Raises ValueError for a name no wire has, or a CA file given to a wire without TLS.
    """
    if name not in DIALERS:
        raise ValueError(f"wire: no wire is called {name!r}; the wires are {', '.join(DIALERS)}")
    if name in _TLS:
        return _TLS[name](ca_file=ca_file)
    if ca_file is not None:
        raise ValueError(
            f"ca_file: the {name} wire has no TLS, so it takes no CA file "
            f"(the wires with TLS are {', '.join(_TLS)})"
        )
    return DIALERS[name]()
