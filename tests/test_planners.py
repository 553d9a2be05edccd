"""Planners, driven by the real Sequences SDK and CLI (in the venv apart): a `@seq.planner` deployed with
`seq deploy`, its keys (`seq planner key add | list | revoke`), what a site observes into it
(`sequence_ai.planner(name, key=...).observe(data)`), and its plans reaching the policy of a robot connected
with `sequence_ai.connect`, as `episode.state["seq.plans"]`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from act_helpers import SEQ, SEQ_PYTHON, WAIT_S, Robot, seq
from conftest import fresh_database, one_database
from deadlines import give_up_at
from platform_harness import Harness, running_platform

EXAMPLES = Path(__file__).parent / "seq_examples"
PLANNER = "site"
POLICY = "planned"


@pytest.fixture(scope="module", params=one_database("sqlite"))
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    assert SEQ.exists(), f"{SEQ} is missing: `make env` installs the Sequences CLI in a venv apart"
    folder = tmp_path_factory.mktemp(f"planners-{request.param}")
    with (
        fresh_database(request.param, folder) as url,
        running_platform(folder, url, seat_ttl_s=6.0, act_idle_s=600.0) as harness,
    ):
        harness.wait_for_workers(60)
        for example in ("planned-policy", "site-planner"):
            shutil.copytree(EXAMPLES / example, folder / example)
            deployed = seq(harness, "deploy", str(folder / example))
            assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        yield harness


def said(result: subprocess.CompletedProcess[str]) -> str:
    """What a command printed, its boxes' borders and wrapping undone."""
    return " ".join((result.stdout + result.stderr).replace("│", " ").split())


def observe_into(
    platform: Harness, planner: str, data: Any, key: str | None
) -> subprocess.CompletedProcess[str]:
    """`sequence_ai.planner(planner, key=key).observe(data)` in a site's program; its number on stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=platform.url, SEQUENCES_API_KEY=platform.keys["alice"])
    program = (
        "import json, sys, sequence_ai\n"
        "site = sequence_ai.planner(sys.argv[1], key=sys.argv[2] or None)\n"
        "print(site.observe(json.loads(sys.argv[3])))\n"
    )
    return subprocess.run(
        [str(SEQ_PYTHON), "-c", program, planner, key or "", json.dumps(data)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def device_key(platform: Harness, member: str) -> str:
    added = seq(platform, "planner", "key", "add", PLANNER, "--member", member)
    assert added.returncode == 0, said(added)
    found = re.search(r"seq_planner_[A-Za-z0-9_-]+", added.stdout)
    assert found, said(added)
    return found.group(0)


def test_a_planners_keys_are_issued_listed_and_revoked_with_the_real_cli(platform: Harness) -> None:
    key = device_key(platform, "ipad_site_a")
    held = seq(platform, "planner", "key", "add", PLANNER, "--member", POLICY, "--name", "arm_cell")
    assert held.returncode == 0, said(held)
    assert "held by the platform" in said(held) and "seq_planner_" not in held.stdout

    listed = seq(platform, "planner", "key", "list", PLANNER)
    assert listed.returncode == 0, said(listed)
    text = said(listed)
    assert f"…{key[-4:]}" in text and "ipad_site_a (device)" in text and f"{POLICY} (policy) arm_cell" in text
    assert key not in listed.stdout  # never the key itself

    revoked = seq(platform, "planner", "key", "revoke", PLANNER, key)  # named by the key: its last four go
    assert revoked.returncode == 0, said(revoked)
    assert "is revoked" in said(revoked)
    assert f"…{key[-4:]}" not in said(seq(platform, "planner", "key", "list", PLANNER))
    refused = observe_into(platform, PLANNER, {"say": 1}, key)
    assert refused.returncode != 0 and "not live" in refused.stderr, refused.stderr

    # `--`: a key's last four may begin with "-", which argparse would read as an option.
    again = seq(platform, "planner", "key", "revoke", PLANNER, "--", key[-4:])
    assert again.returncode == 4 and "no live key" in said(again), said(again)
    nowhere = seq(platform, "planner", "key", "add", "nowhere", "--member", "x")
    assert nowhere.returncode == 4 and "no planner 'nowhere'" in said(nowhere), said(nowhere)
    a_policy = seq(platform, "planner", "key", "list", POLICY)
    assert a_policy.returncode != 0 and "is a policy, not a planner" in said(a_policy), said(a_policy)
    no_member = seq(platform, "planner", "key", "add", PLANNER)
    assert no_member.returncode != 0 and "--member" in said(no_member), said(no_member)


def test_a_device_key_says_into_its_planner_alone(platform: Harness) -> None:
    key = device_key(platform, "operator_tablet")
    told = observe_into(platform, PLANNER, {"note": "hello"}, key)
    assert told.returncode == 0, told.stderr
    first = int(told.stdout)
    by_account = observe_into(platform, PLANNER, {"note": "again"}, None)
    assert by_account.returncode == 0 and int(by_account.stdout) > first, by_account.stderr

    to_a_policy = observe_into(platform, POLICY, {"note": "x"}, key)
    assert to_a_policy.returncode != 0 and "is a policy, not a planner" in to_a_policy.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=platform.url, SEQUENCES_API_KEY=key)
    elsewhere = subprocess.run(
        [str(SEQ), "policy", "ls"], env=env, capture_output=True, text=True, timeout=120
    )
    assert elsewhere.returncode != 0 and "says into its planner only" in said(elsewhere), said(elsewhere)
    not_a_key = observe_into(platform, PLANNER, {"note": "x"}, "seq_robot_abc")
    assert not_a_key.returncode != 0 and "no planner key" in not_a_key.stderr


def test_a_site_observation_and_the_robots_own_reach_its_policy_through_the_planners_plan(
    platform: Harness,
) -> None:
    robot = Robot(platform, model=POLICY)
    try:
        key = device_key(platform, "ipad_site_b")
        told = observe_into(platform, PLANNER, {"say": 2.5}, key)
        assert told.returncode == 0, told.stderr
        told = observe_into(platform, PLANNER, {"say": 1.5}, key)
        assert told.returncode == 0, told.stderr

        deadline = give_up_at(WAIT_S)
        outputs: list[float] = []
        while time.monotonic() < deadline:
            observed = robot.ask(observe={"x": 0.75})
            assert observed["ok"], observed
            answered = robot.ask(act=True)
            assert answered["ok"], answered
            outputs = answered["outputs"][0]
            if outputs[0] >= 1 and outputs[1] == 4.0:
                break
        # The plan the policy read: what the site said (2.5 + 1.5, each heard once) and what the robot saw.
        assert outputs[1:] == [4.0, 0.75], outputs
        plans_before = outputs[0]
        more = robot.ask(observe={"x": 0.25})
        assert more["ok"], more
        deadline = give_up_at(WAIT_S)
        while time.monotonic() < deadline and outputs[2] != 0.25:
            assert robot.ask(observe={"x": 0.25})["ok"]
            outputs = robot.ask(act=True)["outputs"][0]
        assert outputs[1:] == [4.0, 0.25] and outputs[0] > plans_before, outputs
    finally:
        robot.close()


def test_a_robot_connects_to_its_policy_never_to_a_planner(platform: Harness) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=platform.url, SEQUENCES_API_KEY=platform.keys["alice"])
    probe = subprocess.run(
        [str(SEQ_PYTHON), "-c", f"import sequence_ai as s; s.connect(model={PLANNER!r}).act()"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.returncode != 0 and "is a planner" in probe.stderr, probe.stderr


def test_a_planners_members_are_checked_at_its_deploy(platform: Harness, tmp_path: Path) -> None:
    def planner_of(name: str, members: list[str]) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "planner.py").write_text(
            "import seq\n\n\n"
            f"@seq.planner(name={name!r}, members={members!r}, gpu='cpu')\n"
            "class P:\n"
            "    @seq.plan(every_s=1.0)\n"
            "    def plan(self, group):\n"
            "        return None\n"
        )
        return folder

    ghost = seq(platform, "deploy", str(planner_of("ghostly", ["ghost"])))
    assert ghost.returncode != 0 and "no deployment 'ghost'" in said(ghost), said(ghost)
    taken = seq(platform, "deploy", str(planner_of("second", [POLICY])))
    assert taken.returncode != 0 and f"{POLICY!r} is planned by {PLANNER!r}" in said(taken), said(taken)
