"""Every kind of failure, made to happen through a real platform worker, reaches the client as the contract's
reason code, and is charged to the caller (the policy's failures) or given back (the benchmark's: the
catalogue's benchmarks are the platform's). The kind is named where the failure happens; nothing reads a
message to choose the code."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from platform_client.eval_plan import EvalPlan

from conftest import free_port, fresh_database, one_database
from deadlines import give_up_at
from platform_harness import TOYS, Harness, running_platform
from yardstick.core import admin
from yardstick.core.refusals import RefusalKind
from yardstick.engine.failures import FailureKind
from yardstick.positronic.errors import CODES, REASONS
from yardstick.store.models import ServedPolicy

# Short enough that a hang is cut quickly, long enough that a healthy call never is.
CALL_LIMIT_S = 1.5


@dataclass(frozen=True)
class Servers:
    slow: int  # answers every request after 5 s: past the reply budget
    guarded: int  # demands a token the platform does not send
    dying: int  # a server process whose policy kills it at step 5 of "ten"


def _serve_in_threads() -> Iterator[tuple[int, int]]:
    sys.path.insert(0, str(TOYS.parent))
    import toys
    from yardstick.wire.server.host import PolicyHost
    from yardstick.wire.server.serve import PolicyServer, ServeOptions

    slow = PolicyHost(toys.SlowRows, model_id="slow", reference="toys:SlowRows", params={"delay": 5.0})
    guarded = PolicyHost(toys.Rows, model_id="rows", reference="toys:Rows")
    with (
        PolicyServer({"slow": slow}, ServeOptions(port=0)) as slow_server,
        PolicyServer({"rows": guarded}, ServeOptions(port=0, token="not-yours")) as guarded_server,
    ):
        yield slow_server.port or 0, guarded_server.port or 0


# How a failure is named and charged is the same on either database: one kind (conftest.one_database).
@pytest.fixture(scope="module", params=one_database("postgresql"))
def setting(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Harness, Servers]]:
    folder = tmp_path_factory.mktemp(request.param)
    port = free_port()
    dying = subprocess.Popen(
        [sys.executable, "-m", "yardstick.cli", "policy", "serve", f"{TOYS}:DieOnTen", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_healthy(port)
        threads = _serve_in_threads()
        slow, guarded = next(threads)
        with (
            fresh_database(request.param, folder) as url,
            running_platform(
                folder, url, call_timeout_s=CALL_LIMIT_S, per_day=100, allow_remote=("127.0.0.1",)
            ) as harness,
        ):
            with harness.platform.db.writing() as session:
                for slug, benchmark, tasks in (
                    ("toys.broken", "Fragile", ["bad"]),
                    ("toys.stuck", "Fragile", ["hang"]),
                    ("toys.unbuilt", "UnbuildableBench", None),
                ):
                    admin.create_eval(
                        session, slug, f"{TOYS}:{benchmark}", choice=admin.EvalTasks(tasks, trials=1)
                    )
                for name, cls in (
                    ("hang", "HangOnTen"),
                    ("garbled", "Garbled"),
                    ("unbuilt", "Unbuildable"),
                    ("absent", "NeedsAbsentSimulator"),
                ):
                    session.add(ServedPolicy(name=name, reference=f"{TOYS}:{cls}"))
            yield harness, Servers(slow, guarded, port)
        threads.close()
    finally:
        dying.kill()
        dying.wait(timeout=10)


def _wait_healthy(port: int) -> None:
    deadline = give_up_at(60)
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise TimeoutError(f"the policy server on port {port} did not come up")


def served(spec: str) -> dict[str, Any]:
    return {"name": "policy", "kind": "served", "wire": "websocket", "spec": spec}


def remote(port: int) -> dict[str, Any]:
    address = {"host": "127.0.0.1", "port": port, "path": "/api/v1/session"}
    return {"name": "policy", "wire": "websocket", "address": address}


# kind, the eval, the endpoint (by the servers), the contract's reason code, whether the caller is charged
CASES: list[tuple[str, str, Any, str, bool]] = [
    ("policy_crash", "toys.tally", lambda s: served("crash"), "policy_inference_crash", True),
    ("malformed_answer", "toys.tally", lambda s: served("garbled"), "policy_inference_crash", True),
    ("policy_timeout", "toys.tally", lambda s: served("hang"), "latency_budget_exceeded", True),
    ("policy_setup_crash", "toys.tally", lambda s: served("unbuilt"), "policy_setup_crash", True),
    ("latency_budget", "toys.tally", lambda s: remote(s.slow), "latency_budget_exceeded", True),
    ("session_refused", "toys.tally", lambda s: remote(s.guarded), "policy_setup_crash", True),
    ("session_dropped", "toys.tally", lambda s: remote(s.dying), "policy_inference_crash", True),
    ("benchmark_crash", "toys.broken", lambda s: served("rows"), "internal_error", False),
    ("benchmark_timeout", "toys.stuck", lambda s: served("rows"), "internal_error", False),
    ("benchmark_setup_crash", "toys.unbuilt", lambda s: served("rows"), "internal_error", False),
    ("install_incomplete", "toys.tally", lambda s: served("absent"), "internal_error", False),
]


@pytest.mark.parametrize(
    ("kind", "evaluation", "endpoint", "code", "charged"), CASES, ids=[c[0] for c in CASES]
)
def test_each_failure_kind_reaches_the_client_as_its_reason_code_charged_or_refunded(
    setting: tuple[Harness, Servers], kind: str, evaluation: str, endpoint: Any, code: str, charged: bool
) -> None:
    harness, servers = setting
    alice = harness.client("alice")
    used_before = alice.me().quota_for("submissions.day").used  # type: ignore[union-attr]
    plan = EvalPlan.model_validate(
        {
            "request_type": {"type": "private_eval", "org": "acme"},
            "eval": evaluation,
            "endpoints": [endpoint(servers)],
            "episodes_per_endpoint": 1,
            "transaction_key": f"{kind}-{harness.settings.database}",
        }
    )
    view = harness.wait(alice, alice.create_submission(plan).submission_id, timeout=90)
    assert view.status.name == "errored", view
    assert view.reason_code.name == code, view.reason
    diagnostics = httpx.get(view.artifacts.diagnostics).json()
    assert (diagnostics["failure"], diagnostics["charged"]) == (kind, charged)
    used_after = alice.me().quota_for("submissions.day").used  # type: ignore[union-attr]
    assert used_after - used_before == (1 if charged else 0)


def test_every_kind_has_one_reason_code_and_every_refusal_one_error_code() -> None:
    assert set(REASONS) == set(FailureKind)
    assert set(CODES) == set(RefusalKind)
