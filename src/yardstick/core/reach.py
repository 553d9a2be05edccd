"""Which addresses a remote endpoint may name: not the platform's own machine, unless its administrator
says so.

A remote endpoint is dialled by a worker, inside the platform's network. Left open, a caller could point one
at the machine's own services (the database on 127.0.0.1, the gateway, a cloud's metadata service on
169.254.x) and have the worker speak to them. So an address on a loopback (127.0.0.0/8, ::1), link-local
(169.254.0.0/16, fe80::/10) or unspecified (0.0.0.0, ::) address, the name `localhost`, and every unix
socket are refused — when the run is filed (the field and the rule named) and again when a worker dials it,
after resolving its name, so a name that later resolves to such an address is refused too — unless the
install allows it (`yardstick server --allow-remote 127.0.0.1:8000`: `HOST:PORT`, `HOST` for any port,
`unix:/path`).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from yardstick.core.refusals import bad_request
from yardstick.core.runs import EndpointTarget
from yardstick.store.states import TargetKind
from yardstick.wire.address import Address, HostPort, Root, UnixSocket, bracketed

RULE = (
    "the platform dials no address on its own machine (loopback, link-local, unspecified, localhost) and no "
    "unix socket, unless its administrator allows it (yardstick server --allow-remote HOST:PORT)"
)


class Unreachable(ValueError):
    """An address a remote endpoint may not name here: the message says which and why."""


@dataclass(frozen=True)
class Reach:
    """The addresses of the platform's own machine its administrator lets remote endpoints name."""

    allowed: tuple[str, ...] = ()

    def check(self, endpoints: Iterable[EndpointTarget]) -> None:
        """Refuse (a bad request naming the endpoint's address) any remote endpoint on this machine."""
        for target in endpoints:
            if target.kind != TargetKind.REMOTE or target.address is None:
                continue
            try:
                self.refuse(target.address, resolve=False)
            except Unreachable as refused:
                raise bad_request(
                    f"endpoints.{target.name}.address: {refused}", field=f"endpoints.{target.name}.address"
                ) from None

    def refuse(self, address: Address, *, resolve: bool) -> None:
        """Unreachable when the address names this machine and is not allowed. With `resolve`, a host name
        is looked up and each address it has is held to the same rule (a worker, about to dial it)."""
        if isinstance(address, UnixSocket):
            if f"unix:{address.uds}" not in self.allowed:
                raise Unreachable(f"unix socket {address.uds}: {RULE}")
            return
        assert isinstance(address, HostPort | Root)
        host, port = address.host, address.port
        if self._allows(host, port):
            return
        if _local(host):
            raise Unreachable(f"{bracketed(host)}:{port}: {RULE}")
        if resolve:
            for found in _addresses(host, port):
                if _local(found) and not self._allows(found, port):
                    raise Unreachable(f"{host} resolves to {found}: {RULE}")

    def _allows(self, host: str, port: int) -> bool:
        host = host.strip("[]").lower()
        return (
            host in self.allowed
            or f"{bracketed(host)}:{port}" in self.allowed
            or f"{host}:{port}" in self.allowed
        )


def _local(host: str) -> bool:
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified


def _addresses(host: str, port: int) -> list[str]:
    try:
        return sorted({str(info[4][0]) for info in socket.getaddrinfo(host.strip("[]"), port)})
    except (OSError, UnicodeError):
        return []  # a name that does not resolve fails at the dial, with the wire's own reason
