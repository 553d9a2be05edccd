"""Our policy server, driven by the peers' own clients: positronic-wire's dialers (websocket, unix
socket, gRPC) and openpi-client's WebsocketClientPolicy. Real sockets, real processes' code."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import toys
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.serve import PolicyServer, ServeOptions

pw = pytest.importorskip("positronic_wire.wire")
registry = pytest.importorskip("positronic_wire.registry")
serialization = pytest.importorskip("positronic_model_server.serialization")
openpi = pytest.importorskip("openpi_client.websocket_client_policy")

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PolicyServer]:
    uds = tmp_path_factory.mktemp("sock") / "policy.sock"
    hosts = {
        "rows": PolicyHost(toys.Rows, model_id="rows", reference="toys:Rows"),
        "sampler": PolicyHost(toys.Sampler, model_id="sampler", reference="toys:Sampler"),
    }
    with PolicyServer(hosts, ServeOptions(port=0, grpc_port=0, uds=str(uds))) as running:
        yield running


def peer_address(server: PolicyServer, wire: str, query: str = "", path: str = "/api/v1/session") -> Any:
    if wire == "websocket_unix":
        return pw.UnixSocketAddress(Path(server.options.uds or ""), path, query)
    port = server.grpc_port if wire == "grpc" else server.port
    return pw.HostPortAddress("127.0.0.1", port, path, query)


def open_peer(
    server: PolicyServer,
    wire: str,
    query: str = "",
    headers: dict[str, str] | None = None,
    path: str = "/api/v1/session",
) -> tuple[Any, dict[str, Any]]:
    conn = registry.client_wire(wire).dial(peer_address(server, wire, query, path), headers, 5.0)
    while True:
        frame = serialization.deserialise(conn.recv(timeout=10))
        if frame["status"] != "loading":
            return conn, frame


WIRES = ["websocket", "websocket_unix", "grpc"]


@pytest.mark.parametrize("wire", WIRES)
def test_a_session_over_the_peers_dialer(server: PolicyServer, wire: str) -> None:
    conn, ready = open_peer(server, wire)
    assert ready["status"] == "ready" and ready["protocol_version"] == 3
    meta = ready["meta"]
    assert meta["action_fps"] == 10 and meta["action_horizon_sec"] == pytest.approx(0.4)
    assert meta["checkpoint_id"] == "toys:Rows" and meta["effective_params"] == {}
    session_id = ready["session_id"]
    conn.send(serialization.serialise({"session_id": session_id, "observation": {"t": 3}}))
    reply = serialization.deserialise(conn.recv(timeout=5))
    assert reply["result"].ravel().tolist() == [300, 301, 302, 303]
    assert set(reply["timing"]) == {"served_ms", "decode_ms", "queued_ms", "infer_ms", "model_ms"}
    assert reply["timing"]["served_ms"] >= reply["timing"]["infer_ms"] >= 0
    # The server acknowledges the end and ends the stream, as the peers' own server does. positronic-wire's
    # gRPC send can learn of that end before its own write's receipt and raise, though the message went out:
    # the peers' own tests send the end this way too, and read the acknowledgement that follows.
    with contextlib.suppress(pw.PeerDisconnected):
        conn.send(serialization.serialise({"session_id": session_id, "end_session": True}))
    assert serialization.deserialise(conn.recv(timeout=5)) == {"session_id": session_id, "end_session": True}
    conn.close()


@pytest.mark.parametrize("wire", WIRES)
def test_the_peers_keepalive_and_probe(server: PolicyServer, wire: str) -> None:
    client = registry.client_wire(wire)
    address = peer_address(server, wire)
    assert client.keepalive(address, None, 5.0) is None  # no idle timeout configured
    assert client.probe(address, None, 5.0) is None


def test_session_params_are_read_as_json_and_unknown_or_repeated_ones_refused(server: PolicyServer) -> None:
    conn, ready = open_peer(server, "websocket", path="/api/v1/session/sampler")
    assert ready["meta"]["yardstick"]["id"] == "sampler"
    conn.close()
    for query in ("nope=1", "a=1&a=2"):
        conn, frame = open_peer(server, "websocket", query=query)
        assert frame["status"] == "error" and ("unknown" in frame["error"] or "twice" in frame["error"])
        with pytest.raises(pw.PeerDisconnected):
            conn.recv(timeout=5)
        conn.close()


def test_an_inference_error_keeps_the_session_open(server: PolicyServer) -> None:
    conn, ready = open_peer(server, "websocket")
    session_id = ready["session_id"]
    conn.send(serialization.serialise({"session_id": session_id, "observation": {"no t": 1}}))
    assert "KeyError" in serialization.deserialise(conn.recv(timeout=5))["error"]
    conn.send(serialization.serialise({"session_id": session_id, "observation": {"t": 1}}))
    assert serialization.deserialise(conn.recv(timeout=5))["result"].ravel()[0] == 100
    conn.close()


def test_a_foreign_session_id_ends_the_session(server: PolicyServer) -> None:
    conn, _ = open_peer(server, "websocket")
    conn.send(serialization.serialise({"session_id": "not-mine", "observation": {"t": 1}}))
    assert serialization.deserialise(conn.recv(timeout=5))["status"] == "error"
    with pytest.raises(pw.PeerDisconnected):
        conn.recv(timeout=5)


def test_openpi_clients_policy_against_our_server(server: PolicyServer) -> None:
    client = openpi.WebsocketClientPolicy("127.0.0.1", server.port)
    assert client.get_server_metadata()["name"] == "Rows"
    actions = client.infer({"t": 7, "image": np.zeros((8, 8, 3), np.uint8)})["actions"]
    assert actions.shape == (4, 1) and actions.ravel().tolist() == [700, 701, 702, 703]


def test_an_openpi_session_whose_policy_raises_gets_the_traceback_as_text(server: PolicyServer) -> None:
    client = openpi.WebsocketClientPolicy("127.0.0.1", server.port)
    with pytest.raises(RuntimeError, match="KeyError"):
        client.infer({"no t": 1})


def test_http_routes(server: PolicyServer) -> None:
    import json
    import urllib.request

    base = f"http://127.0.0.1:{server.port}"
    models = json.load(urllib.request.urlopen(f"{base}/api/v1/models"))
    assert [m["id"] for m in models["models"]] == ["rows", "sampler"]
    assert json.load(urllib.request.urlopen(f"{base}/healthz"))["status"] == "ok"
    request = urllib.request.Request(f"{base}/api/v1/keepalive", method="POST")
    assert json.load(urllib.request.urlopen(request)) == {"alive_seconds": None}


def test_a_token_is_demanded_when_configured() -> None:
    hosts = {"rows": PolicyHost(toys.Rows, model_id="rows", reference="toys:Rows")}
    with PolicyServer(hosts, ServeOptions(port=0, grpc_port=0, token=TOKEN)) as guarded:
        for wire in ("websocket", "grpc"):
            client = registry.client_wire(wire)
            with pytest.raises(pw.ConnectRefused) as refused:
                conn = client.dial(peer_address(guarded, wire), None, 5.0)
                conn.recv(timeout=5)
            assert refused.value.refusal is pw.Refusal.FORBIDDEN
            conn, ready = open_peer(guarded, wire, headers={"Authorization": f"Bearer {TOKEN}"})
            assert ready["status"] == "ready"
            conn.close()
            with pytest.raises(pw.ConnectRefused) as refused:
                client.keepalive(peer_address(guarded, wire), {"Authorization": "Bearer wrong"}, 5.0)
            assert refused.value.refusal is pw.Refusal.FORBIDDEN
