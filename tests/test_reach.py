"""Remote endpoints may not name the platform's own machine (loopback, link-local, unspecified, localhost, a
unix socket), at filing and at the dial, unless the administrator allows the address."""

from __future__ import annotations

import socket

import pytest

from yardstick.core.reach import Reach, Unreachable
from yardstick.core.refusals import Refusal
from yardstick.core.runs import EndpointTarget
from yardstick.store.states import TargetKind
from yardstick.wire.address import Address, parse_address

SESSION = "/api/v1/session"


def at(wire: str, fields: dict[str, object]) -> Address:
    return parse_address(wire, fields)


@pytest.mark.parametrize(
    ("wire", "address"),
    [
        ("websocket", {"host": "127.0.0.1", "port": 5432, "path": SESSION}),
        ("websocket", {"host": "127.8.9.10", "port": 80, "path": SESSION}),
        ("websocket_tls", {"host": "localhost", "port": 443, "path": SESSION}),
        ("grpc", {"host": "::1", "port": 6379, "path": SESSION}),
        ("grpc", {"host": "::ffff:127.0.0.1", "port": 6379, "path": SESSION}),
        ("websocket", {"host": "169.254.169.254", "port": 80, "path": SESSION}),
        ("websocket", {"host": "fe80::1", "port": 80, "path": SESSION}),
        ("websocket", {"host": "0.0.0.0", "port": 8080, "path": SESSION}),
        ("openpi", {"host": "api.localhost", "port": 8000}),
        ("websocket_unix", {"uds": "/var/run/postgresql/.s.PGSQL.5432", "path": SESSION}),
    ],
)
def test_an_address_on_the_platforms_machine_is_refused_naming_the_endpoint(
    wire: str, address: dict[str, object]
) -> None:
    target = EndpointTarget(name="probe", kind=TargetKind.REMOTE, wire=wire, address=at(wire, address))
    with pytest.raises(Refusal) as refused:
        Reach().check([target])
    assert "endpoints.probe.address" in str(refused.value) and "--allow-remote" in str(refused.value)


def test_what_the_administrator_allows_is_dialled_and_a_name_is_held_to_what_it_resolves_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    allowed = Reach(("127.0.0.1:8000", "::1", "unix:/run/policy.sock"))
    allowed.refuse(at("websocket", {"host": "127.0.0.1", "port": 8000, "path": SESSION}), resolve=True)
    allowed.refuse(at("grpc", {"host": "::1", "port": 1234, "path": SESSION}), resolve=True)
    allowed.refuse(at("websocket_unix", {"uds": "/run/policy.sock", "path": SESSION}), resolve=True)
    with pytest.raises(Unreachable):
        allowed.refuse(at("websocket", {"host": "127.0.0.1", "port": 8001, "path": SESSION}), resolve=False)
    # A name passes at filing, and is refused at the dial once it resolves here (DNS, a boundary of ours,
    # answers as a rebinding name server would).
    real = socket.getaddrinfo

    def rebinding(host: str, *args: object) -> object:
        if host == "rebind.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80))]
        return real(host, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    Reach().refuse(at("websocket", {"host": "rebind.example", "port": 80, "path": SESSION}), resolve=False)
    with pytest.raises(Unreachable, match=r"resolves to 127\.0\.0\.1"):
        Reach().refuse(at("websocket", {"host": "rebind.example", "port": 80, "path": SESSION}), resolve=True)
    Reach().refuse(at("websocket", {"host": "203.0.113.7", "port": 80, "path": SESSION}), resolve=True)
