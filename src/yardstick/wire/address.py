"""Where a session opens: the address each wire dials, and the grammar every field keeps.

The grammar is the Positronic contract's: a record carries no URL; each field holds one kind of value that
the wire writes as it is (`host`, `port`, `path`, `query`, `uds`); everything else is refused with the field
and the rule. `parse_address` reads a record (an endpoint file's `address:`), `parse_url` a URL a person
types on the command line. Both pass every value through the same field checks, so a URL accepts exactly
what a record accepts.

An `RemoteEndpoint` is a remote endpoint as a file or a URL names it: the wire, its address, and what a client
needs besides (a token, a CA file, a cap on concurrent sessions).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path, PurePosixPath
from typing import Any, Final
from urllib.parse import quote, unquote

import yaml

from yardstick.wire.errors import AddressError

SESSION_PATH = "/api/v1/session"
API_PATH = "/api/v1"
KEEPALIVE_PATH = f"{API_PATH}/keepalive"
MODELS_PATH = f"{API_PATH}/models"


@dataclass(frozen=True)
class HostPort:
    """A session on a server reached over the network (websocket, websocket_tls, grpc, grpc_tls)."""

    host: str
    port: int
    path: str = SESSION_PATH
    query: str = ""

    def at_root(self) -> HostPort:
        return replace(self, path="", query="")


@dataclass(frozen=True)
class UnixSocket:
    """A session on a server on this machine, on the socket it bound (websocket_unix)."""

    uds: PurePosixPath
    path: str = SESSION_PATH
    query: str = ""

    def at_root(self) -> UnixSocket:
        return replace(self, path="", query="")


@dataclass(frozen=True)
class Root:
    """A server whose protocol lives at its root and routes on the frames (roboarena, openpi)."""

    host: str
    port: int


Address = HostPort | UnixSocket | Root

WIRES: dict[str, type[HostPort] | type[UnixSocket] | type[Root]] = {
    "websocket": HostPort,
    "websocket_tls": HostPort,
    "websocket_unix": UnixSocket,
    "grpc": HostPort,
    "grpc_tls": HostPort,
    "roboarena": Root,
    # Ours, not the contract's: an openpi server speaks its own dialect at the root of a plain websocket.
    "openpi": Root,
}
"""Each wire by name, and the kind of address it dials."""

TLS_WIRES: Final = frozenset({"websocket_tls", "grpc_tls"})

# The fields each kind of address dials, in the order a message lists them, and those it cannot do without.
_FIELDS: Final[dict[type[Any], tuple[str, ...]]] = {
    kind: tuple(f.name for f in dataclass_fields(kind)) for kind in (HostPort, UnixSocket, Root)
}
_REQUIRED: Final[dict[type[Any], tuple[str, ...]]] = {
    kind: tuple(f.name for f in dataclass_fields(kind) if f.default is MISSING) for kind in _FIELDS
}
_ALL_FIELDS: Final = frozenset(name for names in _FIELDS.values() for name in names)


def bracketed(host: str) -> str:
    """`host` as it goes before `:port`: an IPv6 literal needs brackets there."""
    return f"[{host}]" if ":" in host else host


def netloc(host: str, port: int, default_port: int | None) -> str:
    """`host[:port]`, leaving out the port the scheme implies (as an HTTP `Host` header does)."""
    return bracketed(host) if port == default_port else f"{bracketed(host)}:{port}"


# ---------------------------------------------------------------------------------------------- fields

_LABEL = re.compile(r"[A-Za-z0-9_-]+")
_HOST_CHAR = re.compile(r"[A-Za-z0-9_.-]")
_PORTED = re.compile(r"[^:]*:[0-9]*")  # `name:80`, `name:`: a port where only a host belongs


def check_host(value: object, field: str = "address.host") -> str:
    """`value` if it is a hostname, an IPv4 address or a bare IPv6 address, else AddressError.

    The checks run from the most specific mistake to the least, so the refusal names what the person
    most likely meant (a URL, a port, brackets) rather than only the first odd character."""
    if not isinstance(value, str):
        raise AddressError(field, f"a hostname, IPv4 or IPv6 address as a string, not {type(value).__name__}")
    if not value:
        raise AddressError(field, "empty: name the server's hostname, IPv4 or IPv6 address")
    if "://" in value:
        raise AddressError(
            field, f"a scheme is refused ({value!r}): a record carries no URL; the wire names the scheme"
        )
    if "@" in value:
        raise AddressError(field, "userinfo ('user@') is refused: give a credential as token or token_env")
    if "[" in value or "]" in value:
        raise AddressError(
            field, f"brackets are refused ({value!r}): give an IPv6 address bare; the wire adds the brackets"
        )
    if "/" in value:
        raise AddressError(field, f"a path is refused ({value!r}): give the host alone")
    if ":" in value:
        # Only an IPv6 address holds a colon. Python's parser takes a zone index (`%eth0`), the contract
        # does not: the wire could not write it into a URL as it is.
        if "%" in value:
            raise AddressError(field, f"an IPv6 zone index is refused ({value!r})")
        try:
            ipaddress.IPv6Address(value)
        except ValueError:
            if _PORTED.fullmatch(value):
                raise AddressError(field, f"a port is refused ({value!r}): give it as port") from None
            raise AddressError(field, f"{value!r} holds a ':' but is not an IPv6 address") from None
        return value
    for char in value:
        if not _HOST_CHAR.fullmatch(char):
            raise AddressError(
                field,
                f"the character {char!r} is refused: a hostname holds labels of letters, digits, '-' and '_'"
                " joined by '.' (an internationalized name goes in its xn-- form)",
            )
    labels = value[:-1].split(".") if value.endswith(".") else value.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise AddressError(field, f"an empty label is refused ({value!r}): labels are joined by one '.'")
    # A name all of numbers is read by resolvers as an IPv4 address in some spelling (`127.1` is 127.0.0.1,
    # `0127.0.0.1` octal), so it is not written "as it is": only the plain dotted quad is taken.
    if all(label.isdigit() for label in labels):
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            raise AddressError(
                field, f"{value!r} is not an IPv4 address: four numbers 0-255 joined by '.', no leading zeros"
            ) from None
    return value


def check_port(value: object, field: str = "address.port") -> int:
    """`value` if it is an integer from 1 to 65535, else AddressError."""
    # bool is an int to Python, and `port: yes` is a YAML slip, not a port.
    if isinstance(value, bool) or not isinstance(value, int):
        hint = " (write it without quotes)" if isinstance(value, str) else ""
        raise AddressError(field, f"an integer from 1 to 65535, not {type(value).__name__}{hint}")
    if not 1 <= value <= 65535:
        raise AddressError(field, f"an integer from 1 to 65535, not {value}")
    return value


def check_path(value: object, field: str = "address.path") -> str:
    """`value` if it is the session route, else AddressError: a server names its model elsewhere."""
    if not isinstance(value, str):
        raise AddressError(field, f"the session route {SESSION_PATH} as a string, not {type(value).__name__}")
    if value == SESSION_PATH:
        return value
    if value.startswith(SESSION_PATH + "/") and len(value) > len(SESSION_PATH) + 1:
        raise AddressError(
            field,
            f"a checkpoint appended to the session route is refused ({value!r}): path is {SESSION_PATH}",
        )
    raise AddressError(field, f"{value!r} is not the session route: path is {SESSION_PATH}, no other route")


_QUERY_HINT = "percent-encode it (a space is %20, '#' is %23)"


def check_query(value: object, field: str = "address.query") -> str:
    """`value` if it is session params the wire can write as they are, else AddressError.

    The value itself is not echoed in a refusal: session params may carry a key."""
    if not isinstance(value, str):
        raise AddressError(field, f"the session params as a string (a=1&b=2), not {type(value).__name__}")
    if value.startswith("?"):
        raise AddressError(field, "a leading '?' is refused: give the params alone (mode=native)")
    for at, char in enumerate(value):
        if char == " ":
            raise AddressError(field, f"a space is refused (at {at}): percent-encode it as %20")
        if char == "#":
            raise AddressError(field, f"a '#' is refused (at {at}): percent-encode it as %23")
        if not "!" <= char <= "~":
            raise AddressError(
                field,
                f"the character U+{ord(char):04X} is refused (at {at}): visible ASCII only; {_QUERY_HINT}",
            )
    return value


def check_uds(value: object, field: str = "address.uds") -> PurePosixPath:
    """`value` as a path if it is an absolute socket path, else AddressError."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise AddressError(field, f"an absolute socket path as a string, not {type(value).__name__}")
    if not value:
        raise AddressError(field, "empty: name the socket's absolute path (/run/policy.sock)")
    if "\0" in value:
        raise AddressError(field, "a NUL byte is refused: no socket path holds one")
    if not value.startswith("/"):
        raise AddressError(field, f"a relative path is refused ({value!r}): give the socket's absolute path")
    return PurePosixPath(value)


# --------------------------------------------------------------------------------------------- records


def _known_wires() -> str:
    return ", ".join(WIRES)


def _wire_kind(wire: object) -> type[HostPort] | type[UnixSocket] | type[Root]:
    if not isinstance(wire, str) or wire not in WIRES:
        raise AddressError("wire", f"unknown wire {wire!r}: one of {_known_wires()}")
    return WIRES[wire]


def address_fields(address: Address) -> dict[str, Any]:
    """The fields of an address as a record keeps them, which `parse_address` reads back to the same."""
    if isinstance(address, UnixSocket):
        return {"uds": str(address.uds), "path": address.path, "query": address.query}
    if isinstance(address, Root):
        return {"host": address.host, "port": address.port}
    return {"host": address.host, "port": address.port, "path": address.path, "query": address.query}


def parse_address(wire: str, fields: Mapping[str, Any]) -> Address:
    """The address `wire` dials, read from a record's fields, or AddressError naming the field and rule.

    `path` may be left out: it can only be the session route, so an omitted path is `SESSION_PATH`.
    `query` left out is empty. A field the wire does not dial is refused, and so is a `url`."""
    kind = _wire_kind(wire)
    if not isinstance(fields, Mapping):
        raise AddressError("address", f"a mapping of the fields {wire} dials, not {type(fields).__name__}")
    dials = _FIELDS[kind]
    listed = ", ".join(dials)
    for name in fields:
        if not isinstance(name, str):
            raise AddressError("address", f"field names are strings, not {name!r}")
        if name == "url":
            raise AddressError(
                "address.url", f"a record carries no URL: give the fields {wire} dials ({listed})"
            )
        if name not in _ALL_FIELDS:
            raise AddressError(f"address.{name}", f"unknown field: the {wire} wire dials {listed}")
        if name not in dials:
            raise AddressError(f"address.{name}", f"the {wire} wire does not dial {name}: it dials {listed}")
    for name in _REQUIRED[kind]:
        if name not in fields:
            raise AddressError(f"address.{name}", f"required: the {wire} wire dials {listed}")
    if kind is UnixSocket:
        return UnixSocket(
            uds=check_uds(fields["uds"]),
            path=check_path(fields.get("path", SESSION_PATH)),
            query=check_query(fields.get("query", "")),
        )
    host, port = check_host(fields["host"]), check_port(fields["port"])
    if kind is Root:
        return Root(host=host, port=port)
    return HostPort(
        host=host,
        port=port,
        path=check_path(fields.get("path", SESSION_PATH)),
        query=check_query(fields.get("query", "")),
    )


# ------------------------------------------------------------------------------------------------ URLs

# scheme -> (wire, default port). A default of None: the URL must name its port (no usual one exists).
_SCHEMES: Final[dict[str, tuple[str, int | None]]] = {
    "ws": ("websocket", 80),
    "wss": ("websocket_tls", 443),
    "ws+unix": ("websocket_unix", None),
    "unix": ("websocket_unix", None),
    "grpc": ("grpc", 80),
    "grpcs": ("grpc_tls", 443),
    "roboarena": ("roboarena", None),
    "openpi": ("openpi", None),
}
# wire -> the scheme `format_url` writes, and the port it leaves out.
_SPELLING: Final[dict[str, tuple[str, int | None]]] = {
    "websocket": ("ws", 80),
    "websocket_tls": ("wss", 443),
    "websocket_unix": ("ws+unix", None),
    "grpc": ("grpc", 80),
    "grpc_tls": ("grpcs", 443),
    "roboarena": ("roboarena", None),
    # openpi clients dial a plain websocket at the server's root: write what they dial.
    "openpi": ("ws", 80),
}
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)
# Where a socket path ends in a unix URL: the first `/api/v1` segment starts the route.
_API_SEGMENT = re.compile(re.escape(API_PATH) + r"(?=/|$)")


_URL_FORMS: Final = ", ".join(
    f"{scheme}:///" if wire == "websocket_unix" else f"{scheme}://" for scheme, (wire, _) in _SCHEMES.items()
)


def _split_authority(authority: str, scheme: str, default_port: int | None) -> tuple[str, int]:
    """Host and port of `host[:port]` or `[ipv6][:port]`, each through the field grammar."""
    if "@" in authority:
        raise AddressError("url", "userinfo ('user@') is refused: give a credential as token or token_env")
    if authority.startswith("["):
        inside, closed, after = authority[1:].partition("]")
        if not closed:
            raise AddressError("url", f"an unclosed '[' in {authority!r}: write [ipv6]:port")
        if ":" not in inside:
            raise AddressError("address.host", f"brackets hold an IPv6 address only, not {inside!r}")
        host = check_host(inside)
        if after and not after.startswith(":"):
            raise AddressError("url", f"after the IPv6 address comes ':port' or nothing, not {after!r}")
        has_port, port_text = bool(after), after[1:]
    else:
        if authority.count(":") > 1:
            raise AddressError(
                "address.host", f"an IPv6 address in a URL goes in brackets: {scheme}://[::1]:8000"
            )
        host_text, colon, port_text = authority.partition(":")
        host, has_port = check_host(host_text), bool(colon)
    if not has_port:
        if default_port is None:
            raise AddressError("address.port", f"required: {scheme}:// names its port ({scheme}://host:port)")
        return host, default_port
    # Digits only (int() would take '+80', ' 80', '٨٠'), and few enough that int() never balks.
    if not re.fullmatch(r"[0-9]{1,5}", port_text):
        raise AddressError("address.port", f"an integer from 1 to 65535 after ':', not {port_text!r}")
    return host, check_port(int(port_text))


def _split_unix(path: str) -> tuple[PurePosixPath, str]:
    """The socket path and the route of a unix URL's path: the route starts at the first `/api/v1`."""
    found = _API_SEGMENT.search(path)
    socket, route = (path, SESSION_PATH) if found is None else (path[: found.start()], path[found.start() :])
    try:
        # A URL cannot hold a space or a '%' as it is; a socket path can, so it travels percent-encoded.
        socket = unquote(socket, errors="strict")
    except UnicodeDecodeError:
        raise AddressError("address.uds", "percent-escapes that are not UTF-8 are refused") from None
    return check_uds(socket), check_path(route)


def parse_url(url: str) -> tuple[str, Address]:
    """The wire and address a command-line URL names, or AddressError naming `url` or the field.

    One spelling per wire: `ws://host[:port]/api/v1/session[?q]` (websocket), `wss://…` (websocket_tls),
    `ws://host[:port]` with no route (openpi, a server at the root), `ws+unix:///abs.sock[/api/v1/session][?q]`
    or `unix:///…` (websocket_unix), `grpc://host[:port][/api/v1/session][?q]` (grpc), `grpcs://…`
    (grpc_tls), `roboarena://host:port`, `openpi://host:port`. An IPv6 host is written in brackets."""
    if not isinstance(url, str):
        raise AddressError("url", f"a URL as a string, not {type(url).__name__}")
    matched = _URL.fullmatch(url)
    if matched is None:
        raise AddressError("url", f"not a URL ({url!r}): write scheme://…, one of {_URL_FORMS}")
    scheme, rest = matched[1].lower(), matched[2]
    if scheme not in _SCHEMES:
        raise AddressError("url", f"unknown scheme {scheme!r}: one of {_URL_FORMS}")
    wire, default_port = _SCHEMES[scheme]
    if "#" in rest:
        raise AddressError("url", "a fragment ('#…') is refused: a session has none; in a query '#' is %23")
    rest, has_query, query_text = rest.partition("?")
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    query = check_query(query_text) if has_query else ""

    if wire == "websocket_unix":
        if authority:
            raise AddressError(
                "url", f"a unix socket URL has no host ({authority!r}): write {scheme}:///run/policy.sock"
            )
        uds, route = _split_unix(path)
        return wire, UnixSocket(uds=uds, path=route, query=query)

    host, port = _split_authority(authority, scheme, default_port)
    at_root = path in ("", "/")
    if wire in ("roboarena", "openpi"):
        if not at_root:
            raise AddressError("address.path", f"the {wire} wire dials no path: its server is at the root")
        if has_query:
            raise AddressError("address.query", f"the {wire} wire dials no query")
        return wire, Root(host=host, port=port)
    if wire == "websocket" and at_root:
        # openpi clients dial a websocket at the server's root, and that is how people write them.
        if has_query:
            raise AddressError(
                "address.query", "ws:// with no route is the openpi dialect, which dials no query"
            )
        return "openpi", Root(host=host, port=port)
    if wire == "websocket_tls" and at_root:
        # ws:// with no route reads as openpi, which has no TLS wire: guessing either way would mislead.
        raise AddressError(
            "address.path",
            f"wss:// names the session route (wss://host{SESSION_PATH}); openpi has no TLS wire",
        )
    # gRPC has no root dialect: a route left out can only be the session route.
    route = SESSION_PATH if at_root else check_path(path)
    return wire, HostPort(host=host, port=port, path=route, query=query)


def format_url(wire: str, address: Address) -> str:
    """`address` as a URL that `parse_url` reads back to the same wire and address, for logs.

    IPv6 hosts go in brackets, and a port the scheme implies is left out."""
    kind = _wire_kind(wire)
    if not isinstance(address, kind):
        raise AddressError("wire", f"the {wire} wire dials a {kind.__name__}, not a {type(address).__name__}")
    scheme, default_port = _SPELLING[wire]
    if isinstance(address, UnixSocket):
        tail = f"{address.path}?{address.query}" if address.query else address.path
        return f"{scheme}://{quote(str(address.uds))}{tail}"
    where = netloc(address.host, address.port, default_port)
    if isinstance(address, Root):
        return f"{scheme}://{where}"
    query = f"?{address.query}" if address.query else ""
    return f"{scheme}://{where}{address.path}{query}"


# ------------------------------------------------------------------------------------------- endpoints


@dataclass(frozen=True)
class RemoteEndpoint:
    """A remote endpoint: the wire, the address it dials, and what a client needs besides.

    The token is left out of repr: an endpoint gets logged, a credential never does."""

    wire: str
    address: Address
    token: str | None = field(default=None, repr=False)
    ca_file: str | None = None
    max_concurrent_sessions: int | None = None
    name: str | None = None

    @property
    def url(self) -> str:
        return format_url(self.wire, self.address)


_ENDPOINT_KEYS: Final = (
    "name",
    "kind",
    "wire",
    "address",
    "token",
    "token_env",
    "ca_file",
    "max_concurrent_sessions",
)


def _check_token(value: object, field: str) -> str:
    # The token goes into a header as it is: a control character or a space would break or forge one.
    # The refusal never quotes it.
    if not isinstance(value, str):
        raise AddressError(field, f"a token as a string, not {type(value).__name__}")
    if not value:
        raise AddressError(field, "empty")
    if not all("!" <= char <= "~" for char in value):
        raise AddressError(field, "visible ASCII characters only (no space, no line break)")
    return value


def _read_token(record: Mapping[str, Any]) -> str | None:
    if "token" in record and "token_env" in record:
        raise AddressError("token", "give token or token_env, not both")
    if "token" in record:
        return _check_token(record["token"], "token")
    if "token_env" not in record:
        return None
    variable = record["token_env"]
    if not isinstance(variable, str) or not variable or "=" in variable or "\0" in variable:
        raise AddressError("token_env", f"the name of an environment variable, not {variable!r}")
    value = os.environ.get(variable)
    if not value:
        raise AddressError("token_env", f"the environment variable {variable} is not set")
    return _check_token(value, "token_env")


def _read_ca_file(value: object, wire: str, base_dir: Path | None) -> str:
    if wire not in TLS_WIRES:
        raise AddressError(
            "ca_file", f"only the TLS wires ({', '.join(sorted(TLS_WIRES))}) take a CA file, not {wire}"
        )
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise AddressError("ca_file", f"the path of a PEM file, not {value!r}")
    path = Path(value).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.is_file():
        raise AddressError("ca_file", f"no such file: {path}")
    return str(path)


def parse_endpoint(
    record: Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None
) -> RemoteEndpoint:
    """A remote endpoint read from a record, or AddressError naming the key and the rule.

    Keys: `wire`, `address` (the fields the wire dials), `token` or `token_env` (the name of an environment
    variable that holds it), `ca_file` (TLS wires only; a relative path is taken from `base_dir`, else
    from the working directory), `max_concurrent_sessions` (1 or more), and `kind: remote` and `name`."""
    if not isinstance(record, Mapping):
        raise AddressError(
            "endpoint", f"a mapping of {', '.join(_ENDPOINT_KEYS)}, not {type(record).__name__}"
        )
    for key in record:
        if key == "url":
            raise AddressError("url", "a record carries no URL: name the wire, and its fields under address")
        if key not in _ENDPOINT_KEYS:
            raise AddressError(str(key), f"unknown field: an endpoint holds {', '.join(_ENDPOINT_KEYS)}")
    if "kind" in record and record["kind"] != "remote":
        raise AddressError(
            "kind", f"only a remote endpoint is named by a file or a URL, not {record['kind']!r}"
        )
    name = record.get("name")
    if name is not None and (not isinstance(name, str) or not name):
        raise AddressError("name", f"a non-empty string, not {name!r}")
    if "wire" not in record:
        raise AddressError("wire", f"required: one of {_known_wires()}")
    wire = record["wire"]
    _wire_kind(wire)
    if "address" not in record:
        raise AddressError("address", f"required: the fields the {wire} wire dials")
    fields = record["address"]
    if isinstance(fields, str):
        raise AddressError("address", "a record carries no URL: give the address as its fields")
    address = parse_address(wire, fields)
    token = _read_token(record)
    ca_file = None
    if "ca_file" in record:
        ca_file = _read_ca_file(record["ca_file"], wire, None if base_dir is None else Path(base_dir))
    limit = record.get("max_concurrent_sessions")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise AddressError("max_concurrent_sessions", f"an integer of 1 or more, not {limit!r}")
    return RemoteEndpoint(
        wire=wire, address=address, token=token, ca_file=ca_file, max_concurrent_sessions=limit, name=name
    )


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML reader that refuses a key given twice: plain YAML keeps the last, silently."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        try:
            if key in seen:
                line = key_node.start_mark.line + 1
                raise AddressError(str(key), f"given twice (line {line}): an entry carries one answer each")
            seen.add(key)
        except TypeError:  # an unhashable key: construct_mapping refuses it with its own message
            pass
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise AddressError(key, "given twice: an entry carries one answer each")
        out[key] = value
    return out


def load_endpoint_file(path: str | os.PathLike[str]) -> RemoteEndpoint:
    """The remote endpoint a YAML or JSON file names (JSON by a .json suffix, else YAML).

    A refusal keeps the field and adds the file to its rule. A relative `ca_file` is read from the file's
    folder, so a file and its certificate move together."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AddressError("file", f"no such file: {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AddressError("file", f"cannot read {file}: {exc}") from None
    try:
        if file.suffix.lower() == ".json":
            record = json.loads(text, object_pairs_hook=_unique_pairs)
        else:
            record = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects
        return parse_endpoint(record, base_dir=file.parent)
    except AddressError as exc:
        raise AddressError(exc.field, f"{exc.rule} (in {file})") from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        form = "JSON" if file.suffix.lower() == ".json" else "YAML"
        raise AddressError("file", f"{file} is not valid {form}: {exc}") from None


def endpoint_from_ref(ref: str) -> RemoteEndpoint | None:
    """The endpoint `ref` names, or None when `ref` names no endpoint (a class, a checkpoint, …).

    A URL of one of the wires' schemes is an endpoint, and a bad one is refused rather than passed on:
    the person meant an endpoint. An existing .yaml, .yml or .json file is loaded as one."""
    matched = _URL.fullmatch(ref)
    if matched is not None and matched[1].lower() in _SCHEMES:
        wire, address = parse_url(ref)
        return RemoteEndpoint(wire=wire, address=address)
    if ref.lower().endswith((".yaml", ".yml", ".json")):
        file = Path(ref).expanduser()
        if file.is_file():
            return load_endpoint_file(file)
    return None
