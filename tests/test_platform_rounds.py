"""A platform run that stops by a rule: filed through `yardstick eval submit --until`, grown in rounds on the
durable queue, decided on the episodes it played (a prefix of the plan's trials), reported with anytime-valid
intervals; refused where a rule cannot apply; and the same after a worker is SIGKILLed mid-round. A real
`yardstick server` (its own process, its worker process) on each database."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import select
from typer.testing import CliRunner

import deadlines
from conftest import TOYS, fresh_database, one_database
from platform_harness import ServerProcess, server_process
from toys import coin
from yardstick.cli.main import app
from yardstick.core import admin
from yardstick.positronic.own_routes import SUBMISSIONS_UNTIL
from yardstick.store.db import Database
from yardstick.store.models import Run, RunEpisode, ServedPolicy
from yardstick.store.states import EpisodeState

CAP = 200  # trials a task: the plan's count, the rule's cap

POLICIES = {"sure": {"skill": 0.97}, "half": {"skill": 0.5}, "slow-sure": {"skill": 0.97, "delay": 0.1}}


@pytest.fixture(scope="module", params=one_database("postgresql"))
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp(f"rounds-{request.param}")
    with fresh_database(request.param, folder) as url, server_process(folder, url) as server:
        db = Database(server.settings.database)
        with db.writing() as session:
            admin.create_eval(
                session,
                "toys.coins",
                f"{TOYS}:Coins",
                choice=admin.EvalTasks(["heads", "tails"], trials=CAP),
                org_slug="acme",
            )
            for name, params in POLICIES.items():
                session.add(ServedPolicy(name=name, reference=f"{TOYS}:Skill", params=params))
        db.close()
        server.start()
        yield server


def plan(key: str, spec: str, *, endpoints: int = 1, **changes: Any) -> dict[str, Any]:
    return {
        "request_type": {"type": "private_eval", "org": "acme"},
        "eval": "toys.coins",
        "endpoints": [
            {"name": f"p{i}", "kind": "served", "wire": "websocket", "spec": spec} for i in range(endpoints)
        ],
        "episodes_per_endpoint": CAP,
        "transaction_key": key,
        **changes,
    }


def yardstick(served: ServerProcess, *args: str) -> tuple[int, str, str]:
    env = {
        "YARDSTICK_PLATFORM_URL": served.url,
        "YARDSTICK_API_KEY": served.keys["alice"],
        "POSITRONIC_PLATFORM_URL": None,
        "POSITRONIC_PLATFORM_API_KEY": None,
        "COLUMNS": "200",
    }
    ran = CliRunner().invoke(app, list(args), env=env)
    return ran.exit_code, ran.stdout, ran.stderr


def submit(served: ServerProcess, tmp_path: Path, key: str, spec: str, *rule: str) -> dict[str, Any]:
    path = tmp_path / f"{key}.yaml"
    path.write_text(yaml.safe_dump(plan(key, spec)))
    code, out, err = yardstick(served, "eval", "submit", "--from-file", str(path), *rule, "--wait", "--json")
    assert code == 0, err
    return dict(json.loads(out))


def episodes(served: ServerProcess, ident: str) -> tuple[Run, list[RunEpisode]]:
    db = Database(served.settings.database)
    try:
        with db.reading() as session:
            run = session.get(Run, int(ident, 16))
            rows = list(
                session.execute(
                    select(RunEpisode)
                    .where(RunEpisode.submission_id == int(ident, 16))
                    .order_by(RunEpisode.index)
                ).scalars()
            )
        assert run is not None
        return run, rows
    finally:
        db.close()


def until(what: Any, timeout: float = 120.0) -> Any:
    return deadlines.until(what, timeout, f"{what} to come true", every=0.2)


def test_a_run_stops_once_its_gate_is_decided_on_a_prefix_of_its_trials(
    served: ServerProcess, tmp_path: Path
) -> None:
    view = submit(served, tmp_path, "decided", "sure", "--until", "decided", "--gate", "success>=0.8")
    assert view["status"] == "finished"
    run, rows = episodes(served, view["id"])
    stopping = run.stopping
    assert stopping is not None and stopping["decided"] and stopping["open"] == []
    assert stopping["state"]["gates"] == [{"gate": "success>=0.8", "decision": "met"}]
    # Played in rounds, far fewer than the plan's 400, every one done once, nothing held left.
    assert view["episodes"]["total"] == view["episodes"]["done"] == len(rows) < 2 * CAP
    assert {r.state for r in rows} == {EpisodeState.DONE}
    for task in ("heads", "tails"):
        mine = sorted((r.trial, r.seed, bool((r.result or {})["success"])) for r in rows if r.task_id == task)
        n = len(mine)
        assert n in stopping["rounds"] and n == stopping["state"]["tasks"][task]["episodes"]
        assert mine == [(k, k, coin(task, k) < 0.97) for k in range(n)]
    # The run's interval is the rule's (anytime-valid), and it clears the gate.
    assert run.scores is not None and run.scores["low"] == stopping["state"]["overall"]["low"] >= 0.8
    assert run.scores["stopping"]["decided"] is True
    code, out, _ = yardstick(served, "eval", "status", view["id"], "--json")
    assert code == 0 and json.loads(out)["yardstick"]["stopping"]["rounds"] == stopping["rounds"]
    code, _, err = yardstick(served, "eval", "status", view["id"])
    assert code == 0 and "until decided" in err and "gate success>=0.8: met" in err


def test_a_gate_out_of_reach_is_decided_missed(served: ServerProcess, tmp_path: Path) -> None:
    view = submit(served, tmp_path, "missed", "half", "--until", "decided", "--gate", "success>=0.8")
    run, rows = episodes(served, view["id"])
    assert run.stopping is not None and run.stopping["state"]["gates"][0]["decision"] == "missed"
    assert len(rows) <= 60  # a coin at one half is told from 0.8 within a few rounds


def test_the_run_page_shows_the_rounds_and_the_stopping_trace(served: ServerProcess, tmp_path: Path) -> None:
    view = submit(served, tmp_path, "width", "half", "--until", "width<=0.3")
    page = httpx.get(view["replay"]["url"], timeout=30).text
    assert 'id="stopping"' in page and "width&lt;=0.3" in page and 'id="stopping-chart"' in page
    run, _ = episodes(served, view["id"])
    assert run.stopping is not None
    for trace in run.stopping["state"]["tasks"].values():
        assert trace["high"] - trace["low"] <= 0.3


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {
                "plan": plan("two", "sure", endpoints=2),
                "stopping": {"until": "decided", "gates": ["success>=0.8"]},
            },
            "stops a run of one endpoint",
        ),
        ({"plan": plan("soon", "sure"), "stopping": {"until": "soon"}}, "not a stopping rule"),
        (
            {"plan": plan("steps", "sure"), "stopping": {"until": "decided", "gates": ["steps>=3"]}},
            "success rates only",
        ),
        ({"plan": plan("nogate", "sure"), "stopping": {"until": "decided"}}, "at least one --gate"),
        (
            {
                "plan": plan("alpha", "sure"),
                "stopping": {"until": "decided", "gates": ["success>=0.8"], "alpha": 0.9},
            },
            "stopping.alpha",
        ),
        (
            {
                "plan": plan("sample", "sure", sample={"count": 20}, episodes_per_endpoint=None),
                "stopping": {"until": "width<=0.2"},
            },
            "a sample fixes its trials",
        ),
    ],
)
def test_a_rule_that_cannot_apply_is_refused_naming_it_and_nothing_is_filed(
    served: ServerProcess, body: dict[str, Any], words: str
) -> None:
    if body["plan"].get("episodes_per_endpoint", 1) is None:
        del body["plan"]["episodes_per_endpoint"]
    before = len(served.client().list_submissions().submissions)
    answer = httpx.post(
        served.url + SUBMISSIONS_UNTIL,
        json=body,
        headers={"Authorization": f"Bearer {served.keys['alice']}"},
        timeout=30,
    )
    assert answer.status_code in (400, 422), answer.text
    assert words in answer.text
    assert len(served.client().list_submissions().submissions) == before


def test_the_cli_refuses_a_gate_without_a_rule(served: ServerProcess, tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan("cli", "sure")))
    code, _, err = yardstick(served, "eval", "submit", "--from-file", str(path), "--gate", "success>=0.8")
    assert code == 2 and "give --until too" in err


def test_a_worker_sigkilled_mid_round_leaves_the_same_rounds_and_decision_each_episode_once(
    served: ServerProcess, tmp_path: Path
) -> None:
    rule = ("--until", "decided", "--gate", "success>=0.8")
    path = tmp_path / "killed.yaml"
    path.write_text(yaml.safe_dump(plan("killed", "slow-sure")))
    code, out, err = yardstick(served, "eval", "submit", "--from-file", str(path), *rule)
    assert code == 0, err
    killed = out.strip()
    # Into the second round (trials 10-19 of each task: episodes 21-40 to land), then the worker dies.
    until(lambda: episodes(served, killed)[0].episodes_done >= 25, timeout=180)
    [doomed] = served.workers()
    os.kill(doomed, signal.SIGKILL)
    after = until(
        lambda: (r := episodes(served, killed))[0].status.value in ("finished", "errored") and r, 300
    )
    run, rows = after
    assert run.status.value == "finished", run.reason
    assert served.workers() and served.workers() != [doomed]

    reference = submit(served, tmp_path, "undisturbed", "slow-sure", *rule)
    again, again_rows = episodes(served, reference["id"])
    assert run.stopping is not None and again.stopping is not None
    assert run.stopping["rounds"] == again.stopping["rounds"]
    assert (
        run.stopping["state"]["gates"]
        == again.stopping["state"]["gates"]
        == [{"gate": "success>=0.8", "decision": "met"}]
    )
    # Each episode done once, the one the dead worker held played again, not twice.
    assert [r.state for r in rows] == [EpisodeState.DONE] * len(rows)
    assert run.episodes_done == run.episodes_total == len(rows) == len(again_rows)
    assert sorted((r.task_id, r.trial, (r.result or {})["success"]) for r in rows) == sorted(
        (r.task_id, r.trial, (r.result or {})["success"]) for r in again_rows
    )


# --- Yardstick's own board views through the CLI, on the org's (tenant) board ----------------------------


def filed(served: ServerProcess, tmp_path: Path, key: str, *extra: str, **changes: Any) -> str:
    path = tmp_path / f"{key}.yaml"
    path.write_text(yaml.safe_dump(plan(key, changes.pop("spec", "sure"), **changes)))
    code, out, err = yardstick(served, "eval", "submit", "--from-file", str(path), *extra, "--wait", "--json")
    assert code == 0, err
    return str(json.loads(out)["id"])


def test_checkpoints_named_on_the_cli_line_up_on_the_boards_curve(
    served: ServerProcess, tmp_path: Path
) -> None:
    filed(served, tmp_path, "ckpt-1000", "--checkpoint", "1000", spec="sure", episodes_per_endpoint=20)
    later = filed(
        served, tmp_path, "ckpt-2000", "--checkpoint", "2000", spec="half", episodes_per_endpoint=20
    )
    code, out, err = yardstick(served, "boards", "--board", "toys.coins", "--curves", "--json")
    assert code == 0, err
    [curve] = json.loads(out)["curves"]
    assert curve["policy"].startswith("p0 (") and [p["checkpoint"] for p in curve["points"]] == [
        "1000",
        "2000",
    ]
    regression = curve["points"][1]["regression"]
    # 0.97 against 0.5 on the same 40 coins: the later checkpoint lost every coin between 0.5 and 0.97.
    assert regression["against"] == "1000" and regression["this_only"] == 0 and regression["p_value"] < 0.05
    code, _, err = yardstick(served, "boards", "--board", "toys.coins", "--curves")
    assert code == 0 and "regressed against 1000" in err
    code, out, _ = yardstick(served, "eval", "status", later, "--json")
    [point] = json.loads(out)["yardstick"]["checkpoints"]
    assert point["endpoint"] == "p0@2000" and point["regression"]["against"] == "1000"
    # A tenant board: no key, no board.
    answer = httpx.get(served.url + "/yardstick/v1/boards/curves", params={"board": "toys.coins"}, timeout=30)
    assert answer.status_code == 404 and "toys.coins" in answer.text


def test_two_policies_in_one_run_are_ranked_pairwise_on_the_boards_cli(
    served: ServerProcess, tmp_path: Path
) -> None:
    path = tmp_path / "duel.yaml"
    duel = plan("duel", "sure", episodes_per_endpoint=20)
    duel["endpoints"] = [
        {"name": "steady", "kind": "served", "wire": "websocket", "spec": "sure"},
        {"name": "coin", "kind": "served", "wire": "websocket", "spec": "half"},
    ]
    path.write_text(yaml.safe_dump(duel))
    code, _, err = yardstick(served, "eval", "submit", "--from-file", str(path), "--wait")
    assert code == 0, err
    code, out, err = yardstick(served, "boards", "--board", "toys.coins", "--pairwise", "--json")
    assert code == 0, err
    read = json.loads(out)
    assert [s["policy"].split(" (")[0] for s in read["standings"]] == ["steady", "coin"]
    [duelled] = read["head_to_head"]
    assert duelled["a"].startswith("coin") and duelled["wins"] == 0 and duelled["losses"] > 0
    assert duelled["wins"] + duelled["ties"] + duelled["losses"] == read["games"] == 40
    code, _, err = yardstick(served, "boards", "--board", "toys.coins", "--pairwise")
    assert code == 0 and "head to head" in err and "steady" in err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["boards", "--pairwise"], "give --board SLUG"),
        (["boards", "--board", "toys.coins", "--pairwise", "--curves"], "one at a time"),
    ],
)
def test_the_board_views_misused_are_refused(served: ServerProcess, args: list[str], words: str) -> None:
    code, _, err = yardstick(served, *args)
    assert code == 2 and words in err


def test_a_checkpoint_label_with_an_at_is_refused(served: ServerProcess, tmp_path: Path) -> None:
    path = tmp_path / "at.yaml"
    path.write_text(yaml.safe_dump(plan("at", "sure")))
    code, _, err = yardstick(served, "eval", "submit", "--from-file", str(path), "--checkpoint", "a@b")
    assert code == 2 and "without '@'" in err
