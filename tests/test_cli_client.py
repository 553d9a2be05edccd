"""`yardstick eval submit|resolve|status|list|cancel|artifacts|catalog` and `yardstick boards` against a real
platform: a gateway on a free port and a worker process on a fresh data directory, Meta-World runs played by
the expert. Nothing of ours is mocked; the exit statuses are the contract's table."""

from __future__ import annotations

import json
import multiprocessing
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from platform_client.enums import ErrorCode
from platform_client.errors import PlatformError
from platform_client.responses import ResolvedPlan
from pydantic import ValidationError
from typer.testing import CliRunner

from conftest import free_port
from deadlines import give_up_at
from yardstick.cli.client_cmd import exit_status
from yardstick.cli.exits import Exit
from yardstick.cli.main import app
from yardstick.cli.platform_cmd import run_worker
from yardstick.core import admin
from yardstick.core.settings import Settings
from yardstick.gateway.app import create_app
from yardstick.gateway.services import open_services

runner = CliRunner()

PLAN: dict[str, Any] = {
    "request_type": {"type": "private_eval", "org": "acme"},
    "eval": "metaworld.mt10",
    "endpoints": [{"name": "expert", "kind": "served", "wire": "websocket", "spec": "metaworld-expert"}],
    "episodes_per_endpoint": 1,
    "transaction_key": "t1",
}


@dataclass(frozen=True)
class Live:
    url: str
    key: str  # alice's, in acme (which may compose plans)
    plain_key: str  # bob's, in an org without the grant to compose


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    # A competition of a served policy: a lab's own, opened (the contract's take one image).
    settings = Settings(data_dir=tmp_path_factory.mktemp("platform"), open_competitions=True)
    services = open_services(settings)
    with services.platform.db.writing() as session:
        admin.create_org(session, "acme")
        admin.create_org(session, "plain", may_compose=False)
        admin.create_user(session, "alice", orgs=["acme"])
        admin.create_user(session, "bob", orgs=["plain"])
        key = admin.create_key(session, "alice").plaintext
        plain_key = admin.create_key(session, "bob").plaintext
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(services), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    worker = multiprocessing.get_context("spawn").Process(target=run_worker, args=(settings,))
    worker.start()
    deadline = give_up_at(30)
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the gateway did not start"
    try:
        yield Live(f"http://127.0.0.1:{port}", key, plain_key)
    finally:
        worker.terminate()
        worker.join(timeout=60)
        if worker.is_alive():
            worker.kill()
        server.should_exit = True
        thread.join(timeout=10)
        services.close()


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def yardstick(live: Live | None, *args: str, key: str | None = None, url: str | None = None) -> Ran:
    env = {
        "YARDSTICK_PLATFORM_URL": url or (live.url if live else None),
        "YARDSTICK_API_KEY": key if key is not None else (live.key if live else None),
        "POSITRONIC_PLATFORM_URL": None,
        "POSITRONIC_PLATFORM_API_KEY": None,
        "COLUMNS": "200",
    }
    result = runner.invoke(app, list(args), env=env)
    return Ran(result.exit_code, result.stdout, result.stderr)


def plan_file(tmp_path: Path, name: str = "plan.yaml", **changes: Any) -> Path:
    import yaml

    path = tmp_path / name
    path.write_text(yaml.safe_dump({**PLAN, **changes}))
    return path


@pytest.fixture(scope="module")
def finished(live: Live, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The id of a private MT10 run that `submit --wait` followed to its end."""
    ran = yardstick(
        live, "eval", "submit", "--from-file", str(plan_file(tmp_path_factory.mktemp("f"))), "--wait"
    )
    assert ran.code == 0, ran.stderr
    ident = ran.stdout.strip()
    assert ident and int(ident, 16) > 0
    assert "finished" in ran.stderr and "score (primary): 1.000" in ran.stderr, ran.stderr
    return ident


def test_submit_wait_follows_the_run_to_its_score(finished: str, live: Live) -> None:
    ran = yardstick(live, "eval", "status", finished, "--json")
    assert ran.code == 0, ran.stderr
    view = ran.json()
    assert view["status"] == "finished" and view["id"] == finished
    assert view["episodes"] == {"total": 10, "done": 10, "outstanding": 0}
    assert view["scores"]["primary"] == 1.0
    human = yardstick(live, "eval", "status", finished)
    assert human.code == 0 and "finished" in human.stderr and "10/10" in human.stderr
    assert "result: http" in human.stderr


def test_a_run_of_two_endpoints_shows_each_ones_success_not_only_the_pooled_score(
    live: Live, tmp_path: Path
) -> None:
    endpoints = [
        PLAN["endpoints"][0],
        {"name": "random", "kind": "served", "wire": "websocket", "spec": "random"},
    ]
    path = plan_file(tmp_path, endpoints=endpoints, transaction_key="two")
    waited = yardstick(live, "eval", "submit", "--from-file", str(path), "--wait")
    assert waited.code == 0, waited.stderr
    ident = waited.stdout.strip()
    for shown in (waited.stderr, yardstick(live, "eval", "status", ident).stderr):
        assert "the primary score pools 2 endpoints; each one's own:" in shown, shown
        # The expert solves every MT10 task at its seed: one episode a task, the interval over the ten tasks.
        interval = r"\((\d+\.\d)%-(\d+\.\d)%, stratified clopper-pearson 95%, 10 episodes\)"
        expert = re.search(r"endpoint expert: success 100\.0% " + interval, shown)
        assert expert and float(expert[1]) < 100.0 and expert[2] == "100.0", shown
        assert re.search(r"endpoint random: success \d+\.\d% " + interval, shown), shown
    details = yardstick(live, "eval", "status", ident, "--json").json()["yardstick"]["endpoints"]
    assert set(details) == {"expert", "random"} and details["expert"]["value"] == 1.0


def test_resolve_prints_a_table_per_task_and_the_total(live: Live, tmp_path: Path) -> None:
    path = plan_file(tmp_path, transaction_key="dry")
    ran = yardstick(live, "eval", "resolve", "--from-file", str(path))
    assert ran.code == 0, ran.stderr
    assert "reach-v3" in ran.stderr and "expert×1" in ran.stderr and "total" in ran.stderr
    assert "10 episodes" in ran.stderr
    as_json = yardstick(live, "eval", "resolve", "--from-file", str(path), "--json")
    resolved = ResolvedPlan.model_validate(as_json.json())
    assert resolved.episodes_total == 10 and len(resolved.tasks) == 10


def test_list_pages_through_every_submission(live: Live, finished: str) -> None:
    ran = yardstick(live, "eval", "list", "--json")
    assert ran.code == 0, ran.stderr
    listing = ran.json()
    assert listing["next"] is None and finished in [row["id"] for row in listing["submissions"]]
    table = yardstick(live, "eval", "list")
    assert table.code == 0 and finished in table.stderr and "metaworld.mt10" in table.stderr
    limited = yardstick(live, "eval", "list", "--limit", "1", "--json").json()
    assert len(limited["submissions"]) == 1


def test_cancel_a_queued_run_and_not_a_finished_one(live: Live, finished: str, tmp_path: Path) -> None:
    ran = yardstick(
        live, "eval", "submit", "--from-file", str(plan_file(tmp_path, transaction_key="t2")), "--json"
    )
    assert ran.code == 0, ran.stderr
    created = ran.json()
    second = created["submission_id"]
    assert created["status"] in ("pending", "running") and created["resolved"]["episodes_total"] == 10
    cancelled = yardstick(live, "eval", "cancel", second, "--json")
    assert cancelled.code == 0, cancelled.stderr
    assert cancelled.json()["status"] == "cancelled"
    assert yardstick(live, "eval", "status", second, "--json").json()["status"] == "cancelled"
    # Already ended: the platform refuses, the caller's fault, the envelope on stdout.
    again = yardstick(live, "eval", "cancel", finished, "--json")
    assert again.code == Exit.CALLER
    assert again.json()["error"]["code"] == "bad_request"
    human = yardstick(live, "eval", "cancel", finished)
    assert human.code == Exit.CALLER and human.stdout == "" and "bad_request:" in human.stderr


def test_artifacts_list_and_download(live: Live, finished: str, tmp_path: Path) -> None:
    ran = yardstick(live, "eval", "artifacts", finished, "--json")
    assert ran.code == 0, ran.stderr
    keys = [entry["key"] for entry in ran.json()["artifacts"]]
    # The result; for each of the ten episodes its record, its video, its trajectory and its 3D replay; and
    # the scenes the replays are drawn in, one a task's model, each once.
    scenes = [k for k in keys if k.startswith("attempts/1/scenes/") and k.endswith(".glb")]
    assert "result.json" in keys and 1 <= len(scenes) <= 10 and len(keys) == 41 + len(scenes), keys
    episodes = yardstick(live, "eval", "artifacts", finished, "--prefix", "attempts/1/episodes/", "--json")
    names = sorted(entry["key"].rsplit("/", 1)[1] for entry in episodes.json()["artifacts"])
    each = ["record.json", "image.corner.mp4", "trajectory.jsonl.gz", "replay.seqreplay"]
    assert names == sorted(each * 10)
    folder = tmp_path / "out"
    fetched = yardstick(live, "eval", "artifacts", finished, "--download", str(folder))
    assert fetched.code == 0, fetched.stderr
    assert "result.json" in fetched.stderr
    result = json.loads((folder / "result.json").read_text())
    assert result["status"] == "finished" and result["submission_id"] == finished
    assert len(list((folder / "attempts" / "1" / "episodes").glob("*/record.json"))) == 10


def test_catalog_lists_tasks_only_with_the_grant(live: Live) -> None:
    ran = yardstick(live, "eval", "catalog", "--json")
    assert ran.code == 0, ran.stderr
    offered = ran.json()
    assert "metaworld.mt10" in [e["id"] for e in offered["evals"]]
    assert offered["tasks"] and "reach-v3" in [t["id"] for t in offered["tasks"]]
    plain = yardstick(live, "eval", "catalog", "--json", key=live.plain_key)
    assert plain.code == 0 and plain.json()["tasks"] is None
    human = yardstick(live, "eval", "catalog", key=live.plain_key)
    assert human.code == 0 and "metaworld.mt10" in human.stderr and "needs a grant" in human.stderr


def test_boards_rank_a_competition_run(live: Live, tmp_path: Path) -> None:
    path = plan_file(tmp_path, request_type={"type": "nebius_competition"}, transaction_key="c1")
    ran = yardstick(live, "eval", "submit", "--from-file", str(path), "--wait", "--json")
    assert ran.code == 0, ran.stderr
    competing = ran.json()["id"]
    listed = yardstick(live, "boards", "--json", key="")
    assert listed.code == 0, listed.stderr  # a public board needs no key
    assert "metaworld.mt10" in [b["board"] for b in listed.json()["boards"]]
    board = yardstick(live, "boards", "--board", "metaworld.mt10", "--json").json()
    assert [(row["rank"], row["submission_id"]) for row in board["rankings"]] == [(1, competing)]
    table = yardstick(live, "boards", "--board", "metaworld.mt10")
    tag = board["rankings"][0]["tag"]
    assert table.code == 0 and f"anonymous#{tag}" in table.stderr and "1.000" in table.stderr
    missing = yardstick(live, "boards", "--board", "no.such.board", "--json")
    assert missing.code == Exit.CALLER and missing.json()["error"]["code"] == "not_found"


# --- exit statuses -------------------------------------------------------------------------------------


def test_usage_errors_exit_2(live: Live, tmp_path: Path) -> None:
    bad_id = yardstick(live, "eval", "status", "not-hex")
    assert bad_id.code == Exit.USAGE and "not a submission id" in bad_id.stderr
    unknown = plan_file(tmp_path, "unknown.yaml", bogus_field=3)
    refused = yardstick(live, "eval", "submit", "--from-file", str(unknown), "--json")
    assert refused.code == Exit.USAGE and refused.stdout == ""
    assert "bogus_field" in refused.stderr and "Extra inputs are not permitted" in refused.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("request_type: [unclosed\n")
    assert yardstick(live, "eval", "resolve", "--from-file", str(broken)).code == Exit.USAGE
    not_json = tmp_path / "plan.json"
    not_json.write_text("{nope")
    assert yardstick(live, "eval", "submit", "--from-file", str(not_json)).code == Exit.USAGE
    missing = yardstick(live, "eval", "submit", "--from-file", str(tmp_path / "absent.yaml"))
    assert missing.code == Exit.USAGE and "cannot be read" in missing.stderr


def test_caller_errors_exit_1(live: Live) -> None:
    no_key = yardstick(live, "eval", "list", key="")
    assert no_key.code == Exit.CALLER and "no API key" in no_key.stderr
    wrong = yardstick(live, "eval", "list", "--json", key="ys_not-a-key")
    assert wrong.code == Exit.CALLER and wrong.json()["error"]["code"] == "unauthorized"
    unknown = yardstick(live, "eval", "status", "abc123")
    assert unknown.code == Exit.CALLER and "not_found:" in unknown.stderr


def test_no_platform_exits_3(tmp_path: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    ran = yardstick(None, "eval", "list", "--json", url=nobody, key="ys_any")
    assert ran.code == Exit.PLATFORM and ran.stdout == "" and "no answer" in ran.stderr
    assert yardstick(None, "boards", url=nobody, key="").code == Exit.PLATFORM


def test_exit_status_maps_each_failure_to_its_fault() -> None:
    def refusal(status: int, code: str) -> PlatformError:
        return PlatformError.from_payload(status, {"error": {"code": code, "message": "m"}})

    assert exit_status(refusal(400, "bad_request")) is Exit.CALLER
    assert exit_status(refusal(401, "unauthorized")) is Exit.CALLER
    assert exit_status(refusal(429, "quota_exceeded")) is Exit.CALLER
    assert exit_status(refusal(500, "internal_error")) is Exit.PLATFORM
    assert exit_status(refusal(503, "upstream_unavailable")) is Exit.PLATFORM
    assert exit_status(refusal(400, "upstream_unavailable")) is Exit.PLATFORM
    assert exit_status(refusal(502, "bad_request")) is Exit.PLATFORM
    # A body with no envelope (a proxy's page): the client synthesizes internal_error.
    proxied = PlatformError.from_payload(404, "<html>not here</html>")
    assert proxied.code is ErrorCode.internal_error and exit_status(proxied) is Exit.PLATFORM
    assert exit_status(httpx.ConnectError("refused")) is Exit.PLATFORM
    assert exit_status(httpx.ReadTimeout("slow")) is Exit.PLATFORM
    try:
        ResolvedPlan.model_validate_json(b"{}")
    except ValidationError as exc:
        assert exit_status(exc) is Exit.PLATFORM
    with pytest.raises(TypeError):
        exit_status(KeyError("mine"))
