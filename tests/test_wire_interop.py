"""Our client side against servers that are not ours (positronic-model-server), and our server behind
TLS, reached through endpoint files."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import toy

sys.path.insert(0, str(Path(__file__).parent))
import toys
from yardstick.engine import BuildError, Component, RunRequest, Work, evaluate
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.serve import PolicyServer, ServeOptions

trustme = pytest.importorskip("trustme")
model_server = pytest.importorskip("positronic_model_server.server")
server_wire = pytest.importorskip("positronic_model_server.server_wire")
websocket_wire = pytest.importorskip("positronic_model_server.websocket_wire")
grpc_wire = pytest.importorskip("positronic_model_server.grpc_wire")


def outcomes(policy: str, trials: int = 2, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    work = Work(Component(toy("Tally")), Component(policy, params or {}), startup_timeout_s=5.0)
    result = evaluate(RunRequest(work=work, trials=trials, workers=0))
    assert result.complete, [r.error for r in result.results if r.error]
    return [r.outcome() for r in result.results]


class RowsSession(model_server.Session):  # type: ignore[misc]
    """A positronic-model-server session answering as toys.Rows does."""

    def infer(self, observation: Any) -> np.ndarray:
        return np.array([[observation["t"] * 100 + i] for i in range(4)], dtype=np.float64)


class RowsModel(model_server.Model):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__(metadata={"action_fps": 10, "action_horizon_sec": 0.4})

    def prepare_session(self, params: dict[str, Any]) -> Any:
        return RowsSession({"seq": [{"name": "identity", "version": 1, "args": {}}]})


@pytest.fixture(scope="module")
def positronic() -> Iterator[dict[str, int]]:
    wires = [
        websocket_wire.WebsocketWire(server_wire.ServedHostPort("127.0.0.1", 0)),
        grpc_wire.GrpcWire(server_wire.ServedHostPort("127.0.0.1", 0)),
    ]
    server = model_server.ModelServer(RowsModel)
    ready = threading.Event()
    thread = threading.Thread(target=server.serve, args=(wires, ready.set), daemon=True)
    thread.start()
    assert ready.wait(30)
    yield {"websocket": wires[0].served_address.port, "grpc": wires[1].served_address.port}
    server.shutdown()
    thread.join(timeout=15)


@pytest.mark.parametrize("wire", ["websocket", "grpc"])
def test_our_engine_evaluates_a_policy_on_positronic_model_server(
    positronic: dict[str, int], wire: str
) -> None:
    scheme = "ws" if wire == "websocket" else "grpc"
    # Its handshake tells the rate and the chunk (action_fps, action_horizon_sec), not the replan step.
    remote = outcomes(
        f"{scheme}://127.0.0.1:{positronic[wire]}/api/v1/session", params={"action_chunk_exec_len": 2}
    )
    # Its server closes after each session (it knows no next_session): our client dials again per episode.
    assert remote == outcomes(toy("Rows"))


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PolicyServer, Path]]:
    folder = tmp_path_factory.mktemp("tls")
    authority = trustme.CA()
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    cert, key, ca = folder / "cert.pem", folder / "key.pem", folder / "ca.pem"
    certificate.cert_chain_pems[0].write_to_path(cert)
    certificate.private_key_pem.write_to_path(key)
    authority.cert_pem.write_to_path(ca)
    hosts = {"rows": PolicyHost(toys.Rows, model_id="rows", reference=toy("Rows"))}
    options = ServeOptions(port=0, grpc_port=0, tls_cert=str(cert), tls_key=str(key), token="tls-token")
    with PolicyServer(hosts, options) as server:
        yield server, ca


@pytest.mark.parametrize("wire", ["websocket_tls", "grpc_tls"])
def test_an_endpoint_file_reaches_our_server_over_tls_with_a_token(
    tls_server: tuple[PolicyServer, Path], wire: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, ca = tls_server
    port = server.port if wire == "websocket_tls" else server.grpc_port
    monkeypatch.setenv("ROWS_TOKEN", "tls-token")
    endpoint = tmp_path / "rows.yaml"
    endpoint.write_text(
        f"wire: {wire}\naddress: {{host: 127.0.0.1, port: {port}}}\ntoken_env: ROWS_TOKEN\nca_file: {ca}\n"
    )
    assert outcomes(str(endpoint)) == outcomes(toy("Rows"))


def test_tls_without_the_authority_or_the_token_is_refused(
    tls_server: tuple[PolicyServer, Path], tmp_path: Path
) -> None:
    server, ca = tls_server
    untrusted = tmp_path / "untrusted.yaml"
    untrusted.write_text(f"wire: websocket_tls\naddress: {{host: 127.0.0.1, port: {server.port}}}\n")
    with pytest.raises(BuildError, match=r"refused the session \(final\)"):
        outcomes(str(untrusted))
    tokenless = tmp_path / "tokenless.yaml"
    tokenless.write_text(
        f"wire: websocket_tls\naddress: {{host: 127.0.0.1, port: {server.port}}}\nca_file: {ca}\n"
    )
    with pytest.raises(BuildError, match=r"refused the session \(forbidden\)"):
        outcomes(str(tokenless))
