"""The address grammar of the wires: records, URLs, endpoint files. Every refusal names its field and rule."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from yardstick.wire.address import (
    SESSION_PATH,
    WIRES,
    Address,
    HostPort,
    RemoteEndpoint,
    Root,
    UnixSocket,
    endpoint_from_ref,
    format_url,
    load_endpoint_file,
    parse_address,
    parse_endpoint,
    parse_url,
)
from yardstick.wire.errors import AddressError


def refused(call: Any, *args: Any, field: str, rule: str, **kwargs: Any) -> AddressError:
    """Assert `call(*args)` raises AddressError naming `field`, with `rule` in its message."""
    with pytest.raises(AddressError) as caught:
        call(*args, **kwargs)
    assert caught.value.field == field, caught.value
    assert rule in caught.value.rule, caught.value
    return caught.value


NET: dict[Any, Any] = {"host": "policy.example", "port": 8000}
HOSTPORT_WIRES = ["websocket", "websocket_tls", "grpc", "grpc_tls"]
ROOT_WIRES = ["roboarena", "openpi"]

# ------------------------------------------------------------------------------------------ the wires


def test_every_wire_names_its_address_kind() -> None:
    expected = {
        "websocket": HostPort,
        "websocket_tls": HostPort,
        "websocket_unix": UnixSocket,
        "grpc": HostPort,
        "grpc_tls": HostPort,
        "roboarena": Root,
        "openpi": Root,
    }
    assert dict(WIRES) == expected


# ---------------------------------------------------------------------------------------- good records


@pytest.mark.parametrize("wire", HOSTPORT_WIRES)
@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (NET, HostPort("policy.example", 8000, SESSION_PATH, "")),
        ({**NET, "path": SESSION_PATH}, HostPort("policy.example", 8000)),
        (
            {"host": "baseline.example", "port": 443, "path": SESSION_PATH, "query": "mode=native"},
            HostPort("baseline.example", 443, SESSION_PATH, "mode=native"),
        ),
        ({**NET, "query": ""}, HostPort("policy.example", 8000)),
        ({**NET, "query": "a=%20b&c=%23d"}, HostPort("policy.example", 8000, query="a=%20b&c=%23d")),
    ],
)
def test_hostport_wires_read_their_fields(wire: str, fields: dict[str, Any], expected: HostPort) -> None:
    assert parse_address(wire, fields) == expected


def test_websocket_unix_reads_its_fields() -> None:
    assert parse_address("websocket_unix", {"uds": "/run/policy.sock"}) == UnixSocket(
        PurePosixPath("/run/policy.sock"), SESSION_PATH, ""
    )
    assert parse_address(
        "websocket_unix", {"uds": PurePosixPath("/tmp/p.sock"), "path": SESSION_PATH, "query": "m=1"}
    ) == UnixSocket(PurePosixPath("/tmp/p.sock"), SESSION_PATH, "m=1")


@pytest.mark.parametrize("wire", ROOT_WIRES)
def test_root_wires_read_host_and_port(wire: str) -> None:
    assert parse_address(wire, NET) == Root("policy.example", 8000)


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "policy.example.com",
        "policy.example.com.",  # the optional final '.'
        "my_host-1.internal",
        "UPPER.Example",
        "xn--bcher-kva.example",
        "a",
        "127.0.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "::1",
        "::",
        "2001:db8::8a2e:370:7334",
        "fe80::1",
        "::ffff:192.0.2.1",
        "2001:DB8:0:0:0:0:0:1",
    ],
)
def test_hosts_the_grammar_admits(host: str) -> None:
    assert parse_address("websocket", {"host": host, "port": 1}).host == host  # type: ignore[union-attr]


@pytest.mark.parametrize("port", [1, 80, 8000, 65535])
def test_ports_the_grammar_admits(port: int) -> None:
    assert parse_address("grpc", {"host": "h", "port": port}).port == port  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------- field refusals


@pytest.mark.parametrize(
    ("host", "rule"),
    [
        ("ws://policy.example", "a scheme is refused"),
        ("http://x", "a scheme is refused"),
        ("policy.example:80", "a port is refused"),
        ("x:", "a port is refused"),
        ("policy.example/api", "a path is refused"),
        ("policy.example/", "a path is refused"),
        ("u@policy.example", "userinfo"),
        ("user:pw@x", "userinfo"),
        ("[::1]", "brackets are refused"),
        ("[::1]:80", "brackets are refused"),
        ("fe80::1%eth0", "zone index"),
        ("fe80::1%1", "zone index"),
        ("1:2:3", "not an IPv6 address"),
        ("::g", "not an IPv6 address"),
        ("policy example", "the character ' ' is refused"),
        ("pol!cy", "the character '!' is refused"),
        ("bücher.example", "xn--"),
        ("x?y", "the character '?' is refused"),
        ("x%y", "the character '%' is refused"),
        ("a..b", "an empty label is refused"),
        (".a", "an empty label is refused"),
        (".", "an empty label is refused"),
        ("a.b..", "an empty label is refused"),
        ("", "empty"),
        ("999.1.1.1", "not an IPv4 address"),
        ("127.1", "not an IPv4 address"),
        ("01.2.3.4", "not an IPv4 address"),
        ("1.2.3.4.", "not an IPv4 address"),
        ("123", "not an IPv4 address"),
        (8000, "not int"),
        (None, "not NoneType"),
    ],
)
def test_hosts_the_grammar_refuses(host: object, rule: str) -> None:
    for wire in [*HOSTPORT_WIRES, *ROOT_WIRES]:
        refused(parse_address, wire, {"host": host, "port": 80}, field="address.host", rule=rule)


@pytest.mark.parametrize(
    ("port", "rule"),
    [
        (0, "from 1 to 65535, not 0"),
        (65536, "not 65536"),
        (-1, "not -1"),
        (True, "not bool"),
        (80.0, "not float"),
        ("80", "without quotes"),
        (None, "not NoneType"),
    ],
)
def test_ports_the_grammar_refuses(port: object, rule: str) -> None:
    for wire in [*HOSTPORT_WIRES, *ROOT_WIRES]:
        refused(parse_address, wire, {"host": "h", "port": port}, field="address.port", rule=rule)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/api/v1/session/ckpt", "a checkpoint appended"),
        ("/api/v1/session/org/model", "a checkpoint appended"),
        ("/api/v1/session/", "not the session route"),
        ("/api/v1", "not the session route"),
        ("/", "not the session route"),
        ("", "not the session route"),
        ("api/v1/session", "not the session route"),
        ("/API/V1/SESSION", "not the session route"),
        ("/api/v1/session?x=1", "not the session route"),
        (1, "as a string"),
    ],
)
def test_paths_the_grammar_refuses(path: object, rule: str) -> None:
    refused(parse_address, "websocket", {**NET, "path": path}, field="address.path", rule=rule)
    refused(parse_address, "websocket_unix", {"uds": "/s", "path": path}, field="address.path", rule=rule)


@pytest.mark.parametrize(
    ("query", "rule"),
    [
        ("?mode=native", "a leading '?'"),
        ("a=1#frag", "percent-encode it as %23"),
        ("a=b c", "percent-encode it as %20"),
        (" ", "%20"),
        ("a=\u00e9", "U+00E9"),
        ("a=\t", "U+0009"),
        ("a=\n", "U+000A"),
        ("a=\x7f", "U+007F"),
        ("a=\x00", "U+0000"),
        (5, "as a string"),
    ],
)
def test_queries_the_grammar_refuses(query: object, rule: str) -> None:
    refused(parse_address, "grpc", {**NET, "query": query}, field="address.query", rule=rule)
    refused(parse_address, "websocket_unix", {"uds": "/s", "query": query}, field="address.query", rule=rule)


def test_a_refused_query_character_says_how_to_encode_space_and_hash() -> None:
    error = refused(
        parse_address, "grpc", {**NET, "query": "a=é"}, field="address.query", rule="visible ASCII"
    )
    assert "%20" in error.rule and "%23" in error.rule


def test_a_query_refusal_does_not_echo_the_params() -> None:
    error = refused(
        parse_address, "grpc", {**NET, "query": "key=s3cret x"}, field="address.query", rule="%20"
    )
    assert "s3cret" not in str(error)


@pytest.mark.parametrize(
    ("uds", "rule"),
    [
        ("run/policy.sock", "a relative path"),
        ("./policy.sock", "a relative path"),
        ("~/policy.sock", "a relative path"),
        ("/run/po\0licy.sock", "NUL"),
        ("", "empty"),
        (PurePosixPath("rel.sock"), "a relative path"),
        (b"/run/policy.sock", "as a string"),
        (3, "as a string"),
    ],
)
def test_sockets_the_grammar_refuses(uds: object, rule: str) -> None:
    refused(parse_address, "websocket_unix", {"uds": uds}, field="address.uds", rule=rule)


# ---------------------------------------------------------------------------- fields a wire does not dial


@pytest.mark.parametrize(
    ("wire", "fields", "field", "rule"),
    [
        ("websocket", {**NET, "uds": "/s"}, "address.uds", "does not dial uds"),
        ("grpc_tls", {**NET, "uds": "/s"}, "address.uds", "does not dial uds"),
        ("websocket_unix", {"uds": "/s", "host": "h"}, "address.host", "does not dial host"),
        ("websocket_unix", {"uds": "/s", "port": 80}, "address.port", "does not dial port"),
        ("roboarena", {**NET, "path": SESSION_PATH}, "address.path", "does not dial path"),
        ("roboarena", {**NET, "query": "a=1"}, "address.query", "does not dial query"),
        ("openpi", {**NET, "path": SESSION_PATH}, "address.path", "does not dial path"),
        ("roboarena", {**NET, "uds": "/s"}, "address.uds", "it dials host, port"),
        ("websocket", {**NET, "url": "ws://h"}, "address.url", "a record carries no URL"),
        ("websocket_unix", {"url": "ws+unix:///s"}, "address.url", "a record carries no URL"),
        ("websocket", {**NET, "scheme": "ws"}, "address.scheme", "unknown field"),
        ("roboarena", {**NET, "token": "t"}, "address.token", "unknown field"),
        ("websocket", {"host": "h", "port": 80, 1: 2}, "address", "field names are strings"),
        ("websocket", {"port": 80}, "address.host", "required"),
        ("grpc", {"host": "h"}, "address.port", "required"),
        ("roboarena", {"host": "h"}, "address.port", "required"),
        ("websocket_unix", {"path": SESSION_PATH}, "address.uds", "required"),
        ("websocket", "ws://h:80", "address", "a mapping"),
    ],
)
def test_fields_out_of_place_are_refused(wire: str, fields: Any, field: str, rule: str) -> None:
    refused(parse_address, wire, fields, field=field, rule=rule)


def test_an_unknown_wire_is_refused_naming_the_known_ones() -> None:
    error = refused(parse_address, "http", NET, field="wire", rule="unknown wire 'http'")
    for wire in WIRES:
        assert wire in error.rule


# ------------------------------------------------------------------------------------------------ URLs


@pytest.mark.parametrize(
    ("url", "wire", "address"),
    [
        (
            "ws://h:8000/api/v1/session?mode=native",
            "websocket",
            HostPort("h", 8000, SESSION_PATH, "mode=native"),
        ),
        ("ws://h/api/v1/session", "websocket", HostPort("h", 80)),
        ("ws://h:8000/api/v1/session?", "websocket", HostPort("h", 8000)),
        ("wss://h/api/v1/session", "websocket_tls", HostPort("h", 443)),
        ("wss://h:8443/api/v1/session?a=1&b=%20", "websocket_tls", HostPort("h", 8443, query="a=1&b=%20")),
        ("ws://h:8000", "openpi", Root("h", 8000)),
        ("ws://h:8000/", "openpi", Root("h", 8000)),
        ("ws://h", "openpi", Root("h", 80)),
        ("openpi://h:8000", "openpi", Root("h", 8000)),
        ("openpi://h:8000/", "openpi", Root("h", 8000)),
        ("roboarena://h:8000", "roboarena", Root("h", 8000)),
        ("grpc://h:50051/api/v1/session?m=1", "grpc", HostPort("h", 50051, query="m=1")),
        ("grpc://h:50051", "grpc", HostPort("h", 50051)),
        ("grpc://h", "grpc", HostPort("h", 80)),
        ("grpc://h:50051?m=1", "grpc", HostPort("h", 50051, query="m=1")),
        ("grpcs://h/api/v1/session", "grpc_tls", HostPort("h", 443)),
        ("grpcs://h:8443", "grpc_tls", HostPort("h", 8443)),
        ("ws://[::1]:8000/api/v1/session", "websocket", HostPort("::1", 8000)),
        ("ws://[::1]", "openpi", Root("::1", 80)),
        ("grpcs://[2001:db8::1]:9000/api/v1/session", "grpc_tls", HostPort("2001:db8::1", 9000)),
        ("roboarena://[::1]:8000", "roboarena", Root("::1", 8000)),
        ("ws://127.0.0.1:8000/api/v1/session", "websocket", HostPort("127.0.0.1", 8000)),
        ("WS://Policy.Example:8000/api/v1/session", "websocket", HostPort("Policy.Example", 8000)),
        (
            "ws+unix:///run/policy.sock/api/v1/session?m=1",
            "websocket_unix",
            UnixSocket(PurePosixPath("/run/policy.sock"), SESSION_PATH, "m=1"),
        ),
        ("ws+unix:///run/policy.sock", "websocket_unix", UnixSocket(PurePosixPath("/run/policy.sock"))),
        (
            "ws+unix:///run/policy.sock?m=1",
            "websocket_unix",
            UnixSocket(PurePosixPath("/run/policy.sock"), query="m=1"),
        ),
        ("unix:///tmp/p.sock", "websocket_unix", UnixSocket(PurePosixPath("/tmp/p.sock"))),
        ("unix:///tmp/p.sock/api/v1/session", "websocket_unix", UnixSocket(PurePosixPath("/tmp/p.sock"))),
        ("ws+unix:///tmp/my%20p.sock", "websocket_unix", UnixSocket(PurePosixPath("/tmp/my p.sock"))),
    ],
)
def test_url_forms(url: str, wire: str, address: Address) -> None:
    assert parse_url(url) == (wire, address)


@pytest.mark.parametrize(
    ("url", "field", "rule"),
    [
        ("http://h:8000/api/v1/session", "url", "unknown scheme 'http'"),
        ("tcp://h:8000", "url", "unknown scheme"),
        ("h:8000", "url", "not a URL"),
        ("", "url", "not a URL"),
        ("ws:/h", "url", "not a URL"),
        ("ws://user@h/api/v1/session", "url", "userinfo"),
        ("ws://user:pw@h:80/api/v1/session", "url", "userinfo"),
        ("ws://h/api/v1/session#frag", "url", "a fragment"),
        ("ws://h#", "url", "a fragment"),
        ("ws://h/other", "address.path", "not the session route"),
        ("ws://h/api/v1/session/ckpt", "address.path", "a checkpoint appended"),
        ("grpc://h/api/v1/session/ckpt", "address.path", "a checkpoint appended"),
        ("wss://h/api/v1", "address.path", "not the session route"),
        ("wss://h", "address.path", "openpi has no TLS wire"),
        ("wss://h/", "address.path", "openpi has no TLS wire"),
        ("ws://h:8000?m=1", "address.query", "openpi dialect"),
        ("roboarena://h:8000/api/v1/session", "address.path", "dials no path"),
        ("roboarena://h:8000?x=1", "address.query", "dials no query"),
        ("openpi://h:8000/x", "address.path", "dials no path"),
        ("roboarena://h", "address.port", "required"),
        ("openpi://h", "address.port", "required"),
        ("ws://h:0/api/v1/session", "address.port", "not 0"),
        ("ws://h:65536/api/v1/session", "address.port", "not 65536"),
        ("ws://h:/api/v1/session", "address.port", "after ':'"),
        ("ws://h:abc/api/v1/session", "address.port", "after ':'"),
        ("ws://h:+80/api/v1/session", "address.port", "after ':'"),
        ("ws://h:000080/api/v1/session", "address.port", "after ':'"),
        ("ws:///api/v1/session", "address.host", "empty"),
        ("ws://:8000/api/v1/session", "address.host", "empty"),
        ("ws://::1/api/v1/session", "address.host", "goes in brackets"),
        ("ws://[h]:80/api/v1/session", "address.host", "brackets hold an IPv6 address only"),
        ("ws://[::1/api/v1/session", "url", "unclosed"),
        ("ws://[::1]x/api/v1/session", "url", "after the IPv6 address"),
        ("ws://[fe80::1%25eth0]:80/api/v1/session", "address.host", "zone index"),
        ("ws://h%20x/api/v1/session", "address.host", "'%' is refused"),
        ("ws://ho st/api/v1/session", "address.host", "' ' is refused"),
        ("ws://999.1.1.1/api/v1/session", "address.host", "not an IPv4 address"),
        ("ws://h/api/v1/session?a b", "address.query", "%20"),
        ("ws://h/api/v1/session??a", "address.query", "a leading '?'"),
        ("ws://h/api/v1/session?\u00e9", "address.query", "visible ASCII"),
        ("ws+unix://host/run/p.sock", "url", "has no host"),
        ("ws+unix://", "address.uds", "empty"),
        ("ws+unix:///api/v1/session", "address.uds", "empty"),
        ("ws+unix:///run/p.sock/api/v1/session/ckpt", "address.path", "a checkpoint appended"),
        ("ws+unix:///run/p.sock/api/v1/models", "address.path", "not the session route"),
        ("ws+unix:///run/p.sock/api/v1", "address.path", "not the session route"),
        ("ws+unix:///run/p%00.sock", "address.uds", "NUL"),
        ("ws+unix:///run/p%ff.sock", "address.uds", "not UTF-8"),
        ("unix://rel/p.sock", "url", "has no host"),
    ],
)
def test_url_refusals(url: str, field: str, rule: str) -> None:
    refused(parse_url, url, field=field, rule=rule)


def test_a_url_must_be_a_string() -> None:
    refused(parse_url, 8000, field="url", rule="as a string")


@pytest.mark.parametrize(
    "url",
    [
        "ws://h:8000/api/v1/session",
        "ws://h/api/v1/session?mode=native",
        "wss://h/api/v1/session",
        "wss://h:8443/api/v1/session?a=%20&b=%23",
        "ws://h:8000",
        "ws://h",
        "ws://[::1]:8000",
        "ws://[::1]:8000/api/v1/session?x=1",
        "grpc://h/api/v1/session",
        "grpc://10.0.0.1:50051/api/v1/session?m=1",
        "grpcs://[2001:db8::1]/api/v1/session",
        "grpcs://h:8443/api/v1/session",
        "roboarena://h:8000",
        "roboarena://[::1]:80",
        "ws+unix:///run/policy.sock/api/v1/session",
        "ws+unix:///run/policy.sock/api/v1/session?m=1",
        "ws+unix:///tmp/my%20policy%3F.sock/api/v1/session",
    ],
)
def test_canonical_urls_round_trip(url: str) -> None:
    wire, address = parse_url(url)
    assert format_url(wire, address) == url
    assert parse_url(format_url(wire, address)) == (wire, address)


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("ws://h:80/api/v1/session", "ws://h/api/v1/session"),
        ("wss://h:443/api/v1/session", "wss://h/api/v1/session"),
        ("grpc://h:50051", "grpc://h:50051/api/v1/session"),
        ("grpcs://h:443", "grpcs://h/api/v1/session"),
        ("ws://h:8000/", "ws://h:8000"),
        ("openpi://h:8000", "ws://h:8000"),
        ("openpi://h:80", "ws://h"),
        ("unix:///run/p.sock", "ws+unix:///run/p.sock/api/v1/session"),
        ("ws+unix:///run//p.sock", "ws+unix:///run/p.sock/api/v1/session"),
    ],
)
def test_other_spellings_format_to_the_canonical_one(url: str, canonical: str) -> None:
    assert format_url(*parse_url(url)) == canonical


@pytest.mark.parametrize(
    ("wire", "fields"),
    [
        ("websocket", {"host": "::1", "port": 8000, "query": "a=1"}),
        ("grpc_tls", {"host": "policy.example.", "port": 443}),
        ("websocket_unix", {"uds": "/run/a b#c.sock", "query": "x=%20"}),
        ("roboarena", {"host": "10.1.2.3", "port": 8000}),
        ("openpi", {"host": "fe80::1", "port": 8000}),
    ],
)
def test_every_record_formats_to_a_url_that_reads_back(wire: str, fields: dict[str, Any]) -> None:
    address = parse_address(wire, fields)
    assert parse_url(format_url(wire, address)) == (wire, address)


def test_format_url_refuses_an_address_of_another_kind() -> None:
    refused(format_url, "roboarena", HostPort("h", 80), field="wire", rule="dials a Root, not a HostPort")
    refused(format_url, "nope", Root("h", 80), field="wire", rule="unknown wire")


def test_the_url_form_accepts_exactly_what_a_record_accepts() -> None:
    # The same host refusal, whichever way the host arrives.
    for url, host in [("ws://a..b/api/v1/session", "a..b"), ("ws://a_b-c.d./api/v1/session", "a_b-c.d.")]:
        try:
            via_record: object = parse_address("websocket", {"host": host, "port": 80})
        except AddressError as error:
            via_record = (error.field, error.rule)
        try:
            via_url: object = parse_url(url)[1]
        except AddressError as error:
            via_url = (error.field, error.rule)
        assert via_record == via_url


# ------------------------------------------------------------------------------------------- endpoints


def test_an_endpoint_record_with_everything(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    endpoint = parse_endpoint(
        {
            "name": "baseline",
            "kind": "remote",
            "wire": "websocket_tls",
            "address": {
                "host": "baseline.example",
                "port": 443,
                "path": SESSION_PATH,
                "query": "mode=native",
            },
            "token": "tok-123",
            "ca_file": str(ca),
            "max_concurrent_sessions": 2,
        }
    )
    assert endpoint == RemoteEndpoint(
        wire="websocket_tls",
        address=HostPort("baseline.example", 443, SESSION_PATH, "mode=native"),
        token="tok-123",
        ca_file=str(ca),
        max_concurrent_sessions=2,
        name="baseline",
    )
    assert endpoint.url == "wss://baseline.example/api/v1/session?mode=native"


def test_an_endpoint_never_shows_its_token() -> None:
    endpoint = parse_endpoint({"wire": "roboarena", "address": NET, "token": "s3cret-token"})
    assert endpoint.token == "s3cret-token"
    assert "s3cret" not in repr(endpoint)


def test_the_smallest_endpoint_record() -> None:
    assert parse_endpoint({"wire": "roboarena", "address": NET}) == RemoteEndpoint(
        "roboarena", Root("policy.example", 8000)
    )


def test_token_env_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARDSTICK_TEST_TOKEN", "from-env")
    endpoint = parse_endpoint({"wire": "grpc", "address": NET, "token_env": "YARDSTICK_TEST_TOKEN"})
    assert endpoint.token == "from-env"


def test_token_env_unset_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YARDSTICK_TEST_TOKEN", raising=False)
    refused(
        parse_endpoint,
        {"wire": "grpc", "address": NET, "token_env": "YARDSTICK_TEST_TOKEN"},
        field="token_env",
        rule="YARDSTICK_TEST_TOKEN is not set",
    )
    monkeypatch.setenv("YARDSTICK_TEST_TOKEN", "")
    refused(
        parse_endpoint,
        {"wire": "grpc", "address": NET, "token_env": "YARDSTICK_TEST_TOKEN"},
        field="token_env",
        rule="is not set",
    )


def test_a_bad_token_from_the_environment_is_refused_without_echoing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("YARDSTICK_TEST_TOKEN", "s3cret\nInjected: header")
    error = refused(
        parse_endpoint,
        {"wire": "grpc", "address": NET, "token_env": "YARDSTICK_TEST_TOKEN"},
        field="token_env",
        rule="visible ASCII",
    )
    assert "s3cret" not in str(error)


@pytest.mark.parametrize(
    ("record", "field", "rule"),
    [
        ({"wire": "grpc", "address": NET, "url": "grpc://h"}, "url", "a record carries no URL"),
        ({"url": "ws://h:8000"}, "url", "a record carries no URL"),
        ({"wire": "websocket", "address": "ws://h:80/api/v1/session"}, "address", "a record carries no URL"),
        ({"wire": "grpc", "address": NET, "host": "h"}, "host", "unknown field"),
        ({"wire": "grpc", "address": NET, "spec": "x"}, "spec", "unknown field"),
        ({"wire": "grpc", "address": NET, "kind": "served"}, "kind", "only a remote endpoint"),
        ({"wire": "grpc", "address": NET, "kind": "image"}, "kind", "only a remote endpoint"),
        ({"wire": "grpc", "address": NET, "name": ""}, "name", "a non-empty string"),
        ({"wire": "grpc", "address": NET, "name": 3}, "name", "a non-empty string"),
        ({"address": NET}, "wire", "required"),
        ({"wire": "http", "address": NET}, "wire", "unknown wire"),
        ({"wire": None, "address": NET}, "wire", "unknown wire"),
        ({"wire": "grpc"}, "address", "required"),
        ({"wire": "grpc", "address": [1]}, "address", "a mapping"),
        ({"wire": "grpc", "address": {"host": "h:80", "port": 80}}, "address.host", "a port is refused"),
        ({"wire": "roboarena", "address": {**NET, "path": SESSION_PATH}}, "address.path", "does not dial"),
        ({"wire": "grpc", "address": NET, "token": "a", "token_env": "B"}, "token", "not both"),
        ({"wire": "grpc", "address": NET, "token": ""}, "token", "empty"),
        ({"wire": "grpc", "address": NET, "token": 5}, "token", "as a string"),
        ({"wire": "grpc", "address": NET, "token": "a b"}, "token", "visible ASCII"),
        ({"wire": "grpc", "address": NET, "token_env": ""}, "token_env", "environment variable"),
        ({"wire": "grpc", "address": NET, "token_env": 3}, "token_env", "environment variable"),
        ({"wire": "grpc", "address": NET, "ca_file": "/etc/hostname"}, "ca_file", "only the TLS wires"),
        ({"wire": "websocket", "address": NET, "ca_file": "/x"}, "ca_file", "only the TLS wires"),
        ({"wire": "grpc_tls", "address": NET, "ca_file": "/no/such/ca.pem"}, "ca_file", "no such file"),
        ({"wire": "grpc_tls", "address": NET, "ca_file": ""}, "ca_file", "a PEM file"),
        (
            {"wire": "grpc", "address": NET, "max_concurrent_sessions": 0},
            "max_concurrent_sessions",
            "1 or more",
        ),
        (
            {"wire": "grpc", "address": NET, "max_concurrent_sessions": -3},
            "max_concurrent_sessions",
            "1 or more",
        ),
        (
            {"wire": "grpc", "address": NET, "max_concurrent_sessions": True},
            "max_concurrent_sessions",
            "1 or more",
        ),
        (
            {"wire": "grpc", "address": NET, "max_concurrent_sessions": 1.5},
            "max_concurrent_sessions",
            "1 or more",
        ),
        (
            {"wire": "grpc", "address": NET, "max_concurrent_sessions": "2"},
            "max_concurrent_sessions",
            "1 or more",
        ),
        (["wire", "grpc"], "endpoint", "a mapping"),
    ],
)
def test_endpoint_refusals(record: Any, field: str, rule: str) -> None:
    refused(parse_endpoint, record, field=field, rule=rule)


def test_max_concurrent_sessions_of_one() -> None:
    endpoint = parse_endpoint({"wire": "websocket", "address": NET, "max_concurrent_sessions": 1})
    assert endpoint.max_concurrent_sessions == 1


# ---------------------------------------------------------------------------------------- endpoint files

YAML_ENDPOINT = """\
name: baseline
kind: remote
wire: websocket_tls # names the wire, then that wire's address
address: {host: baseline.example, port: 443, path: /api/v1/session, query: mode=native}
token_env: YARDSTICK_TEST_TOKEN
ca_file: certs/ca.pem
max_concurrent_sessions: 1
"""


def test_a_yaml_endpoint_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARDSTICK_TEST_TOKEN", "tok")
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.pem").write_text("pem")
    file = tmp_path / "baseline.yaml"
    file.write_text(YAML_ENDPOINT)
    monkeypatch.chdir("/")  # a relative ca_file is the file's neighbour, wherever the command runs
    endpoint = load_endpoint_file(file)
    assert endpoint == RemoteEndpoint(
        wire="websocket_tls",
        address=HostPort("baseline.example", 443, SESSION_PATH, "mode=native"),
        token="tok",
        ca_file=str(tmp_path / "certs" / "ca.pem"),
        max_concurrent_sessions=1,
        name="baseline",
    )
    assert endpoint_from_ref(str(file)) == endpoint


def test_a_json_endpoint_file(tmp_path: Path) -> None:
    file = tmp_path / "unix.json"
    file.write_text(json.dumps({"wire": "websocket_unix", "address": {"uds": "/run/p.sock"}, "token": "t"}))
    endpoint = load_endpoint_file(file)
    assert endpoint == RemoteEndpoint("websocket_unix", UnixSocket(PurePosixPath("/run/p.sock")), token="t")
    assert endpoint_from_ref(str(file)) == endpoint


@pytest.mark.parametrize(
    ("name", "text", "field", "rule"),
    [
        (
            "e.yaml",
            "wire: grpc\naddress: {host: h, port: 80}\nwire: grpc_tls\n",
            "wire",
            "given twice (line 3)",
        ),
        ("e.yaml", "wire: grpc\naddress: {host: h, port: 80, host: g}\n", "host", "given twice"),
        ("e.json", '{"wire": "grpc", "wire": "grpc", "address": {}}', "wire", "given twice"),
        ("e.yaml", "wire: grpc\naddress: {host: h, port: '80'}\n", "address.port", "without quotes"),
        ("e.yaml", "wire: grpc\naddress: {host: h, port: 80}\nurl: grpc://h\n", "url", "carries no URL"),
        ("e.yaml", "wire: [unclosed\n", "file", "not valid YAML"),
        ("e.json", "{nope", "file", "not valid JSON"),
        ("e.yaml", "- a list\n", "endpoint", "a mapping"),
        ("e.yaml", "", "endpoint", "a mapping"),
    ],
)
def test_endpoint_file_refusals(tmp_path: Path, name: str, text: str, field: str, rule: str) -> None:
    file = tmp_path / name
    file.write_text(text)
    error = refused(load_endpoint_file, file, field=field, rule=rule)
    assert str(file) in error.rule


def test_a_missing_endpoint_file_is_refused(tmp_path: Path) -> None:
    refused(load_endpoint_file, tmp_path / "none.yaml", field="file", rule="no such file")


# ---------------------------------------------------------------------------------------- references


@pytest.mark.parametrize(
    ("ref", "wire", "address"),
    [
        ("ws://h:8000/api/v1/session", "websocket", HostPort("h", 8000)),
        ("ws://h:8000", "openpi", Root("h", 8000)),
        ("grpcs://h", "grpc_tls", HostPort("h", 443)),
        ("roboarena://h:8000", "roboarena", Root("h", 8000)),
        ("ws+unix:///run/p.sock", "websocket_unix", UnixSocket(PurePosixPath("/run/p.sock"))),
    ],
)
def test_a_url_reference_is_an_endpoint(ref: str, wire: str, address: Address) -> None:
    assert endpoint_from_ref(ref) == RemoteEndpoint(wire, address)


@pytest.mark.parametrize(
    "ref",
    [
        "my_pkg.policies:Expert",
        "/path/to/policy.py:Policy",
        "missing.yaml",
        "missing.json",
        "hf://org/model",
        "http://example.com/policy",
        "checkpoint-7",
    ],
)
def test_what_is_not_an_endpoint_reference(ref: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert endpoint_from_ref(ref) is None


def test_a_bad_url_of_a_wire_scheme_is_refused_not_ignored() -> None:
    refused(endpoint_from_ref, "ws://h:8000/api/v1/session/ckpt", field="address.path", rule="checkpoint")
