"""Robots on a deployment, driven by the real Sequences SDK (`sequence_ai.connect`, in the venv apart): the
gateway's plane (connect, ready, keepalive, release), the worker's TLS plane pinned to its own certificate,
robot keys (`seq robot add | list | revoke`), labels and captures (`policy.label`, `seq policy data export`),
and the faults: a robot that vanishes, a worker killed mid-episode, a key revoked mid-run.

The simulated robot is a MuJoCo Franka (`catalog.sim_franka`) stepped by the test as a robot's control loop
steps it: each period the test observes it, hands the observation to the robot's program (`act_robot.py`),
and plays the action the program's `act()` returned."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from act_helpers import MODEL, SEQ, SEQ_PYTHON, WAIT_S, Robot, as_sent, seq, wait_until
from chromium import launched
from conftest import fresh_database, one_database
from platform_harness import Harness, running_platform
from yardstick.catalog.sim_franka import POSES, SimulatedFranka
from yardstick.core.captures import EpisodeFile
from yardstick.sdk.load import load_object
from yardstick.signin.passwords import set_password
from yardstick.store.models import ActSeat, ActWorker
from yardstick.wire.address import RemoteEndpoint, Root
from yardstick.worker.act_server import seq_msgpack
from yardstick.worker.act_server.certs import make_certificate
from yardstick.worker.act_server.episodes import Episodes, FramesMissing
from yardstick.worker.act_server.server import SESSION_HEADER, ActServer
from yardstick.worker.processes import census

ROOT = Path(__file__).parent.parent
EXAMPLES = Path(__file__).parent / "seq_examples"
SEAT_TTL_S = 6.0
PASSWORD = "correct horse battery"
GOAL = np.array(POSES["nominal"]) + np.array([0.3, -0.2, 0.1, 0.25, 0.0, 0.2, -0.3])


@pytest.fixture(scope="module", params=one_database("postgresql"))
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    assert SEQ.exists(), f"{SEQ} is missing: `make env` installs the Sequences CLI in a venv apart"
    folder = tmp_path_factory.mktemp(f"act-{request.param}")
    with (
        fresh_database(request.param, folder) as url,
        running_platform(folder, url, seat_ttl_s=SEAT_TTL_S, act_idle_s=600.0) as harness,
    ):
        harness.wait_for_workers(60)
        code = folder / "franka-reach"
        shutil.copytree(EXAMPLES / "franka-reach", code)
        deployed = seq(harness, "deploy", str(code))
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        captured = seq(harness, "policy", "set", MODEL, "capture=on")
        assert captured.returncode == 0, captured.stdout + captured.stderr
        shutil.copytree(EXAMPLES / "observer", folder / "observer")
        observer = seq(harness, "deploy", str(folder / "observer"))
        assert observer.returncode == 0, observer.stdout + observer.stderr
        yield harness


def observation(robot: SimulatedFranka) -> dict[str, Any]:
    seen = robot.observe()
    return {
        "joints": seen["state"]["joints"],
        "goal": GOAL.astype(np.float32),
        "image": seen["images"]["wrist"],
    }


def drive(robot: Robot, arm: SimulatedFranka, steps: int) -> list[tuple[dict[str, Any], np.ndarray]]:
    """`steps` periods of the control loop: observe, act, play; what was observed and answered, each."""
    played = []
    for _ in range(steps):
        seen = observation(arm)
        observed = robot.ask(observe=as_sent(seen))
        assert observed["ok"], observed
        answered = robot.ask(act=True)
        assert answered["ok"], answered
        action = np.asarray(answered["outputs"], dtype=np.float32)
        arm.act(action[0])
        played.append((seen, action))
    return played


def refusal(robot: Robot, arm: SimulatedFranka) -> dict[str, Any] | None:
    """One period of the loop: what the robot's observe or act raised, or None when both answered."""
    after = robot.ask(observe=as_sent(observation(arm)))
    if after["ok"]:
        after = robot.ask(act=True)
    return None if after["ok"] else after


def moved_on(robot: Robot, arm: SimulatedFranka) -> dict[str, Any] | None:
    """One period of the loop once the robot's worker is gone: what the act raised, or None when it answered.
    The observation must be taken, whichever worker the robot is bound for."""
    observed = robot.ask(observe=as_sent(observation(arm)))
    assert observed["ok"], observed
    answered = robot.ask(act=True)
    return None if answered["ok"] else answered


def seats(platform: Harness) -> list[ActSeat]:
    with platform.platform.db.reading() as session:
        return list(session.execute(select(ActSeat)).scalars())


def live_workers(platform: Harness) -> list[ActWorker]:
    with platform.platform.db.reading() as session:
        return list(session.execute(select(ActWorker).where(ActWorker.ended_at.is_(None))).scalars())


def test_a_robot_reaches_its_goal_under_the_hosted_policy_as_the_policy_acts_in_process(
    platform: Harness,
) -> None:
    arm = SimulatedFranka(image_size=16)
    robot = Robot(platform)
    try:
        # No worker serves the deployment yet: the SDK's wait starts one and returns once it serves.
        assert not live_workers(platform)
        waited = robot.ask(ready=WAIT_S)
        assert waited["ok"] and waited["waited_s"] > 0, waited
        assert [w for w in live_workers(platform) if w.url]
        played = drive(robot, arm, 30)
        joints = arm.observe()["state"]["joints"]
        assert np.abs(joints - GOAL).max() < 0.03, (joints, GOAL)
        # The same class in this process, on the same observations, answers the same actions.
        local = load_object(f"{EXAMPLES / 'franka-reach' / 'policy.py'}:FrankaReach")()
        for seen, action in played:
            assert np.array_equal(local.infer(seen), action)
        # The robot holds a seat, kept alive by the SDK's keepalives while it plays.
        held = wait_until(lambda: [s for s in seats(platform) if s.worker_id is not None])
        first = held[0].kept_until
        wait_until(lambda: any(s.kept_until > first for s in seats(platform)), timeout=SEAT_TTL_S * 4)
    finally:
        robot.close()
        arm.close()
    # Closed, the SDK gave its seat back.
    wait_until(lambda: not seats(platform), timeout=30)
    assert robot.process.returncode == 0, "".join(robot.errors)


def live_seats(platform: Harness) -> list[ActSeat]:
    now = dt.datetime.now(dt.UTC)
    return [s for s in seats(platform) if s.kept_until > now]


def test_a_labelled_episode_exports_as_a_lerobot_dataset_a_reader_opens(
    platform: Harness, tmp_path: Path
) -> None:
    arm = SimulatedFranka(image_size=16)
    robot = Robot(platform)
    try:
        drive(robot, arm, 6)
        ended = robot.ask(end=True)
        assert ended["ok"] and ended["ended"], ended
        labelled = robot.ask(label=True, notes="reached the goal")
        assert labelled["ok"] and labelled["labelled"] == ended["ended"], labelled
    finally:
        robot.close()
        arm.close()
    episode = ended["ended"]
    raw = seq(platform, "policy", "data", "export", MODEL, "-o", str(tmp_path / "raw"), "--format", "jsonl")
    assert raw.returncode == 0, raw.stdout + raw.stderr
    label = json.loads((tmp_path / "raw" / "labels" / f"{episode}.json").read_text())
    assert label == {"episode_id": episode, "success": True, "notes": "reached the goal"}
    lines = [
        json.loads(line)
        for file in (tmp_path / "raw" / "episodes").rglob(f"{episode}.jsonl")
        for line in file.read_text().splitlines()
    ]
    kinds = [line["kind"] for line in lines]
    assert kinds.count("observe") == 6 and kinds.count("act") == 6 and kinds[-1] == "end", kinds

    out = tmp_path / "dataset"
    exported = seq(platform, "policy", "data", "export", MODEL, "-o", str(out))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v2.1" and info["total_episodes"] >= 1
    assert info["features"]["observation.images.image"]["shape"] == [16, 16, 3]
    assert info["features"]["action"]["shape"] == [8]
    episodes = [json.loads(line) for line in (out / "meta" / "episodes.jsonl").read_text().splitlines()]
    mine = next(e for e in episodes if e["episode_id"] == episode)
    assert mine["success"] is True and mine["notes"] == "reached the goal" and mine["length"] == 6
    table = pq.read_table(out / "data" / "chunk-000" / f"episode_{mine['episode_index']:06d}.parquet")
    assert table.num_rows == 6
    assert table.column("next.success").to_pylist()[-1] is True
    assert len(table.column("action").to_pylist()[0]) == 8


def test_the_deployments_page_shows_its_robots_and_labelled_episodes_to_its_org_alone(
    platform: Harness,
) -> None:
    with platform.platform.db.writing() as session:
        for login in ("alice", "gina"):
            set_password(session, login, PASSWORD)
    arm = SimulatedFranka(image_size=16)
    robot = Robot(platform)
    try:
        drive(robot, arm, 3)
        ended = robot.ask(end=True)
        assert ended["ok"] and ended["ended"], ended
        assert robot.ask(label=False, notes="stopped 4 cm short")["ok"]
        drive(robot, arm, 1)  # the next episode, still playing
        page_path = f"/deployments/acme/{MODEL}"
        with launched("the deployment page") as browser:
            page = browser.new_page()
            page.goto(platform.url + page_path)
            # Not signed in: the sign-in form first, then back to the page.
            page.wait_for_selector("input[name=login]")
            sign_in(page, "alice")
            page.wait_for_selector("#episodes")
            assert page.url.endswith(page_path)
            row = page.locator(f'#episodes tr[data-episode="{ended["ended"]}"]')
            cells = row.locator("td").all_inner_texts()
            assert cells[3:5] == ["3", "3"], cells  # its observations and actions
            assert row.locator(".ended").inner_text() == "by the robot"
            assert row.locator(".label").inner_text() == "failure"
            assert row.locator(".notes").inner_text() == "stopped 4 cm short"
            assert page.inner_text("#capture") == "on"
            # This robot, connected now, on the worker serving it (no key, nor the SDK's whole session).
            assert int(page.inner_text("#robot-count")) >= 1
            robots = page.inner_text("#robots")
            assert "an account's key" in robots
            assert not any(s.session in robots for s in seats(platform))
            # A member of another org finds no such deployment.
            other = browser.new_context().new_page()
            other.goto(platform.url + page_path)
            other.wait_for_selector("input[name=login]")
            sign_in(other, "gina")
            other.wait_for_selector("h1")
            assert other.inner_text("h1") == "No such deployment"
            assert "stopped 4 cm short" not in other.content()
    finally:
        robot.close()
        arm.close()


def sign_in(page: Any, login: str) -> None:
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")


def test_a_robot_key_reaches_its_deployment_alone_and_is_refused_once_revoked(platform: Harness) -> None:
    added = seq(platform, "robot", "add", "--policy", MODEL)
    assert added.returncode == 0, added.stderr
    key = added.stdout.strip().splitlines()[-1]
    assert key.startswith("seq_robot_")
    # The rest of the API is not its to call.
    refused = seq(platform, "policy", "ls", key=key)
    assert refused.returncode == 3 and "robot key" in refused.stderr, refused
    # A connect to a deployment it was not issued for.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEQUENCES_")}
    env.update(SEQUENCES_BASE_URL=platform.url, SEQUENCES_API_KEY=key)
    probe = subprocess.run(
        [str(SEQ_PYTHON), "-c", "import sequence_ai as s; s.connect(model='another').act()"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.returncode != 0 and "its own deployment only" in probe.stderr, probe.stderr

    arm, second_arm = SimulatedFranka(image_size=16), SimulatedFranka(image_size=16)
    robot = Robot(platform, key=key)
    second = Robot(platform)
    try:
        drive(robot, arm, 3)
        drive(second, second_arm, 3)
        # Both robots sit on one worker, which serves them both.
        held = wait_until(
            lambda: (
                len({s.worker_id for s in live_seats(platform)} - {None}) == 1
                and len(live_seats(platform)) == 2
            )
        )
        assert held
        assert len([w for w in live_workers(platform) if w.url]) == 1
        listed = seq(platform, "robot", "list")
        assert (
            listed.returncode == 0 and f"…{key[-4:]}" in listed.stdout and "1 connection" in listed.stdout
        ), listed
        # `--`: a key's last four may begin with "-", which argparse would read as an option.
        revoked = seq(platform, "robot", "revoke", "--", key[-4:])
        assert revoked.returncode == 0 and "revoked" in revoked.stdout, revoked

        # Its calls are refused, on the worker's plane (which believes the seats it read for half a second)
        # and then the gateway's; the other robot plays on.
        after = wait_until(lambda: refusal(robot, arm), timeout=60)
        assert after["error"] == "AuthError" and "not live" in after["message"], after
        drive(second, second_arm, 2)
    finally:
        robot.kill()
        second.close()
        arm.close()
        second_arm.close()
    gone = seq(platform, "robot", "revoke", "--", key[-4:])
    assert gone.returncode == 4, gone


def test_a_robot_that_vanishes_frees_its_seat_within_the_ttl(platform: Harness) -> None:
    arm = SimulatedFranka(image_size=16)
    robot = Robot(platform)
    try:
        drive(robot, arm, 2)
        mine = wait_until(lambda: live_seats(platform))[0].session
    finally:
        robot.kill()  # no release, no keepalive: the robot is gone
        arm.close()
    wait_until(lambda: all(s.session != mine for s in live_seats(platform)), timeout=SEAT_TTL_S * 3)


def test_a_stopped_deployment_ends_its_worker_and_refuses_its_robots_until_started(platform: Harness) -> None:
    arm = SimulatedFranka(image_size=16)
    robot = Robot(platform)
    try:
        drive(robot, arm, 2)
        serving = wait_until(lambda: [w for w in live_workers(platform) if w.url])[0]
        stopped = seq(platform, "policy", "stop", MODEL)
        assert stopped.returncode == 0, stopped.stderr
        with platform.platform.db.reading() as session:
            ended = session.get(ActWorker, serving.id)
            assert ended is not None and ended.why_ended == "the deployment was stopped"
        assert not live_seats(platform)

        after = wait_until(lambda: refusal(robot, arm), timeout=60)
        assert after["error"] == "Conflict" and "is stopped" in after["message"], after
        assert seq(platform, "policy", "start", MODEL).returncode == 0
        # Started again, a new worker serves it. The robot's next act may still be bound for the ended worker
        # (the observation before it was taken in the episode begun there): the SDK moves the robot, its
        # episode begins anew on the new worker and that act is refused saying so. Or the SDK renewed its seat
        # before the observation, and the act answers. Either way the robot plays on.
        moved = moved_on(robot, arm)
        assert moved is None or "begins its episode anew" in moved["message"], moved
        drive(robot, arm, 2)
        assert next(w for w in live_workers(platform) if w.url).id != serving.id
    finally:
        seq(platform, "policy", "start", MODEL)
        robot.close()
        arm.close()


def test_a_worker_killed_mid_episode_and_the_robot_carries_on_with_another(platform: Harness) -> None:
    arm = SimulatedFranka(image_size=16)
    robot = Robot(platform)
    try:
        drive(robot, arm, 3)
        before = wait_until(lambda: [w for w in live_workers(platform) if w.url])[0]
        for worker in platform.workers:
            worker.kill()
            worker.join(timeout=30)
        platform.workers.clear()
        platform.start_worker()
        # The robot's next act finds its worker gone; the SDK goes back to the gateway, which ends it on
        # its look and seats the robot on the new one once that serves. There the episode begins anew, with
        # none of the old one's observations: the act is refused saying so (unless the SDK's keepalive moved
        # the robot before it observed), and the robot plays on.
        moved = moved_on(robot, arm)
        assert moved is None or "begins its episode anew" in moved["message"], moved
        drive(robot, arm, 3)
        after = wait_until(lambda: [w for w in live_workers(platform) if w.url])[0]
        assert after.id != before.id
        with platform.platform.db.reading() as session:
            ended = session.get(ActWorker, before.id)
            assert ended is not None and ended.ended_at is not None and ended.why_ended
        # The capture says where the first episode broke, and why.
        folder = platform.settings.capture_root
        files = [
            [json.loads(line) for line in file.read_text().splitlines()]
            for file in folder.rglob(f"episodes/{before.id}/*.jsonl")
        ]
        broken = max(files, key=lambda lines: lines[0]["ts"])  # this robot's: the last begun there
        assert [line["kind"] for line in broken][:6] == ["observe", "act"] * 3, broken
        assert broken[-1]["kind"] == "broke", broken
        assert "did not answer the gateway's look" in broken[-1]["why"], broken
    finally:
        robot.close()
        arm.close()


def test_a_policy_that_observes_is_handed_every_observation_the_robot_made_in_order(
    platform: Harness,
) -> None:
    """A robot observes faster than it acts: each of its observations reaches the policy's @seq.observe,
    in order and numbered by step, before the act that follows them; none twice."""
    robot = Robot(platform, model="observer")
    try:
        for x in (1.0, 2.0, 3.0):
            assert robot.ask(observe={"x": x})["ok"]
        first = robot.ask(act=True)
        assert first["ok"] and first["outputs"] == [[3.0, 6.0, 2.0]], first
        assert robot.ask(observe={"x": 10.0})["ok"]
        second = robot.ask(act=True)
        assert second["ok"] and second["outputs"] == [[4.0, 16.0, 3.0]], second
        # An act with nothing new observed answers from what it kept: nothing is observed twice.
        third = robot.ask(act=True)
        assert third["ok"] and third["outputs"] == [[4.0, 16.0, 3.0]], third
    finally:
        robot.close()


@pytest.fixture(scope="module")
def idling(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """A platform whose act workers stop after 3 s without an act."""
    folder = tmp_path_factory.mktemp("act-idle")
    with running_platform(folder, None, seat_ttl_s=SEAT_TTL_S, act_idle_s=3.0) as harness:
        harness.wait_for_workers(60)
        shutil.copytree(EXAMPLES / "observer", folder / "observer")
        deployed = seq(harness, "deploy", str(folder / "observer"))
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        yield harness


def boxes(platform: Harness) -> int:
    """The boxes running below the platform's workers."""
    return sum(census(worker.pid).boxes for worker in platform.workers if worker.pid is not None)


def test_an_idle_worker_stops_its_box_reaped_and_the_next_robot_starts_another(idling: Harness) -> None:
    robot = Robot(idling, model="observer")
    try:
        assert robot.ask(observe={"x": 1.0})["ok"]
        assert robot.ask(act=True)["ok"]
        first = wait_until(lambda: [w for w in live_workers(idling) if w.url])[0]
        assert boxes(idling), "the policy's box runs while its worker serves"
    finally:
        robot.close()
    # No act for act_idle_s: the worker stops, and its box with it.
    wait_until(lambda: not live_workers(idling), timeout=WAIT_S)
    with idling.platform.db.reading() as session:
        ended = session.get(ActWorker, first.id)
        assert ended is not None and (ended.why_ended or "").startswith("idle"), ended
    wait_until(lambda: not boxes(idling), timeout=60)
    again = Robot(idling, model="observer")
    try:
        assert again.ask(observe={"x": 2.0})["ok"]
        answered = again.ask(act=True)
        assert answered["ok"] and answered["outputs"] == [[1.0, 2.0, 0.0]], answered
    finally:
        again.close()


def test_an_act_waits_for_the_observations_before_it_and_one_past_what_is_kept_is_refused_at_once() -> None:
    episodes = Episodes()
    episode, fresh = episodes.observed("e1", "robot", [(1, "b"), (0, "a")], [])
    assert [n for n, _ in fresh] == [1, 0]
    # Observation 2 arrives while act 3 waits for it.
    threading.Timer(0.2, lambda: episodes.observed("e1", "robot", [(2, "c")], [])).start()
    assert episodes.take_before(episode, 3, wait_s=WAIT_S) == ([(0, "a"), (1, "b")], "c")
    with pytest.raises(FramesMissing) as missing:
        episodes.take_before(episode, 10**12, wait_s=WAIT_S)  # no worker keeps that many: refused at once
    assert missing.value.first == 3
    # Posted twice (a resend), an observation is kept once.
    assert episodes.observed("e1", "robot", [(3, "d"), (3, "d")], [])[1] == [(3, "d")]


def test_a_post_that_comes_after_its_episode_ended_opens_no_journal_again(tmp_path: Path) -> None:
    """A robot's observation still on its way when the robot ends its episode is not journaled after the
    episode's 'end' (the journal would read as an episode never ended)."""
    server = ActServer(
        1,
        RemoteEndpoint(wire="openpi", address=Root(host="127.0.0.1", port=1)),  # never dialled: no act
        "direct-secret",
        make_certificate(tmp_path, "127.0.0.1"),
        lambda: frozenset({"robot"}),
        host="127.0.0.1",
        request_timeout_s=10.0,
        capture=lambda episode_id: EpisodeFile(tmp_path / f"{episode_id}.jsonl", episode_id),
    )
    url = server.start()
    headers = {"Authorization": "Bearer direct-secret", SESSION_HEADER: "robot"}
    try:
        with httpx.Client(base_url=url, headers=headers, verify=False, timeout=WAIT_S) as client:

            def observe(number: int) -> None:
                body = {"episode_id": "e1", "frames": [{"seq": number, "inputs": {"x": float(number)}}]}
                packed = {"content-type": seq_msgpack.MEDIA_TYPE}
                posted = client.post("/observe", content=seq_msgpack.pack(body), headers=packed)
                assert posted.status_code == 200, posted.text

            observe(0)
            ended = client.post("/act/episode_end", json={"episode_id": "e1"})
            assert ended.status_code == 200 and ended.json()["ended"] is True, ended.text
            observe(1)  # late
    finally:
        server.close()
    lines = [json.loads(line) for line in (tmp_path / "e1.jsonl").read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["observe", "end"], lines


def test_an_observation_is_journaled_before_the_act_it_woke() -> None:
    """The capture writes an observation before the act answered from it: the act waiting for it cannot
    run on until the journal has it (written after `observed` returned, the act's thread, woken first,
    wrote 'act' first on a loaded machine)."""
    episodes = Episodes()
    episode, _ = episodes.observed("e1", "robot", [(0, "a")], [])
    journal: list[str] = []
    acted = threading.Event()

    def act() -> None:
        episodes.take_before(episode, 2, wait_s=WAIT_S)
        journal.append("act")
        acted.set()

    def keep(episode_id: str, fresh: list[tuple[int, Any]]) -> None:
        # The act's thread is given every chance to run on: it cannot, for observation 1 is not its yet.
        acted.wait(0.5)
        journal.extend(f"observe {n}" for n, _ in fresh)

    waiting = threading.Thread(target=act)
    waiting.start()
    wait_until(lambda: episodes._changed._waiters)  # type: ignore[attr-defined]  # the act waits for 1
    episodes.observed("e1", "robot", [(1, "b")], [], kept=keep)
    waiting.join(WAIT_S)
    assert journal == ["observe 1", "act"]


def test_one_episodes_slow_journal_holds_no_other_episodes_observations_or_acts() -> None:
    """An observation's journal is written outside the lock every episode shares: a robot posting megabytes
    of images (or a slow disk) holds up its own act only."""
    episodes = Episodes()
    writing, written = threading.Event(), threading.Event()

    def slow(episode_id: str, fresh: list[tuple[int, Any]]) -> None:
        writing.set()
        written.wait(WAIT_S)

    posting = threading.Thread(target=lambda: episodes.observed("e1", "robot-1", [(0, "a")], [], kept=slow))
    posting.start()
    try:
        assert writing.wait(WAIT_S)
        other, _ = episodes.observed("e2", "robot-2", [(0, "x"), (1, "y")], [])
        assert episodes.take_before(other, 2, wait_s=WAIT_S) == ([(0, "x")], "y")  # not held by e1's
        held = episodes.of("e1", "robot-1")
        # Its own act waits for the observation being written, and a resend of it is not kept twice.
        assert episodes.observed("e1", "robot-1", [(0, "a")], [])[1] == []
        with pytest.raises(FramesMissing):
            episodes.take_before(held, 1, wait_s=0.05)
    finally:
        written.set()
        posting.join(WAIT_S)
    assert episodes.take_before(episodes.of("e1", "robot-1"), 1, wait_s=WAIT_S) == ([], "a")


def test_an_observation_whose_journal_failed_is_not_kept_and_its_resend_is_journaled() -> None:
    """No act answers from an observation its journal lacks: one whose journal raised is not kept, so the
    robot's resend of it is new and journaled."""
    episodes = Episodes()

    def broken(episode_id: str, fresh: list[tuple[int, Any]]) -> None:
        raise ValueError("an observation that cannot be written")

    with pytest.raises(ValueError):
        episodes.observed("e1", "robot", [(0, "a")], [], kept=broken)
    episode = episodes.of("e1", "robot")
    with pytest.raises(FramesMissing):
        episodes.take_before(episode, 1, wait_s=0.05)
    journal: list[tuple[int, Any]] = []
    _, fresh = episodes.observed("e1", "robot", [(0, "a")], [], kept=lambda _, new: journal.extend(new))
    assert fresh == journal == [(0, "a")]
    assert episodes.take_before(episode, 1, wait_s=WAIT_S) == ([], "a")
