"""Rig plans on a real robot's path (issue 26), end to end: a plan filed with the real `positronic-platform-
client` for `franka.tabletop`, blocked while no rig is online, pending (with its queue position) once one
says hello, claimed and played by a rig process (`RigAgent`) driving the simulated Franka with two policy
servers dialled over the wire, an operator answering at the station console over its HTTP routes; the run
finishes with `outcome` per endpoint as the verdicts given, its folders in the vocabulary's format, its score
`positronic-evals`' own of those labels. And what must not happen: a rig of another org claiming it, a rig
key reading submissions, an episode recorded twice when its rig process is replaced mid-episode."""

from __future__ import annotations

import datetime as dt
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from eval_vocabulary.episode import ENDED_BY, META_FILE, SEED, STATIC_FILE, TASK, UID
from eval_vocabulary.outcome import OUTCOME, Outcome
from eval_vocabulary.progress import STATE_SIGNAL
from platform_client.client import PlatformClient
from platform_client.enums import SubmissionStatus
from platform_client.errors import PlatformError
from platform_client.requests import CancelRequest
from positronic_evals.labels import label
from positronic_evals.scoring import score
from sqlalchemy import select

from deadlines import give_up_at
from dropping_proxy import DroppingProxy
from platform_harness import wait_for
from rig_helpers import WAIT_S, Lab, Operator, plan, running_lab, start_rig, stop_rig, until
from yardstick.core import rigs
from yardstick.core.artifacts import LocalArtifactStore
from yardstick.positronic.operator_labels import DEFAULT_RIG_SCORING, OPERATOR_LABELER, operator_label
from yardstick.positronic.own_routes import RIG_BEGIN, RIG_LAND
from yardstick.positronic.views import RIG_EPISODES
from yardstick.rig.client import PlatformLink, RigRefused
from yardstick.rig.folders import EpisodeWriter, Verdict
from yardstick.sdk.robots import robot_spec
from yardstick.store.models import Rig, RunEpisode


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(tmp_path_factory.mktemp("rigs")) as running:
        yield running


def test_a_blind_rig_plan_is_played_at_the_station_and_scored_from_the_operators_labels(lab: Lab) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-1"))
    assert created.status is SubmissionStatus.pending
    assert created.resolved.rig_shape.name == "franka"
    blocked = client.get_submission(created.submission_id)
    assert blocked.status is SubmissionStatus.blocked and "no franka rig" in (blocked.reason or ""), blocked

    PlatformLink(
        lab.harness.url, lab.keys["lab-franka-1"]
    ).hello()  # the rig comes online, claims nothing yet
    pending = client.get_submission(created.submission_id)
    assert pending.status is SubmissionStatus.pending and pending.queue_position == 1, pending

    rig = start_rig(lab, "lab-franka-1")
    given: dict[int, str] = {}
    try:
        verdicts = ["Success", "Fail", "Safety", "Discarded"]
        for verdict in verdicts:
            shown = rig.operator.at("layout", rig.errors)
            episode = shown["episode"]
            page = json.dumps(shown)
            assert "nudge" not in page and "hold" not in page and "policy-" not in page  # blind
            assert episode["instruction"] and "start_pose" in episode["scene"]
            rig.operator.press("/start")
            rig.operator.at("playing", rig.errors)
            until(
                lambda: rig.operator.http.get("/camera/wrist.jpg").status_code == 200,
                "the arm moving",
                about=lambda: (rig.errors, rig.operator.state()),
            )
            rig.operator.press("/mark/reaching")
            rig.operator.press("/mark/contact")
            if verdict == "Safety":
                rig.operator.press("/stop")
            else:
                rig.operator.press("/end")
            judged = rig.operator.at("verdict", rig.errors)
            assert judged["episode"]["why_ended"] == ("stop" if verdict == "Safety" else "end")
            items = 1 if verdict == "Success" and episode.get("items") else None
            rig.operator.press("/verdict", {"outcome": verdict, "successful_items": items, "notes": "fine"})
            given[int(episode["index"])] = verdict
        ended = wait_for(client, created.submission_id, timeout=WAIT_S)
    finally:
        stop_rig(rig)
    assert not rig.errors, rig.errors
    assert ended.status is SubmissionStatus.finished, ended
    assert ended.episodes.done == ended.episodes.total == 4

    with lab.harness.platform.db.reading() as session:
        rows = (
            session.execute(select(RunEpisode).where(RunEpisode.submission_id == int(created.submission_id)))
            .scalars()
            .all()
        )
    by_endpoint = {name: [given[e.index] for e in rows if e.endpoint == name] for name in ("nudge", "hold")}
    seeds = {e.index: e.seed for e in rows}
    expected = {
        name: (
            sum(v != "Discarded" for v in said),
            sum(v in ("Success", "Fail", "Safety") for v in said),
            sum(v == "Success" for v in said),
        )
        for name, said in by_endpoint.items()
    }
    assert ended.outcome is not None
    assert {e.endpoint: (e.kept, e.judged, e.succeeded) for e in ended.outcome.endpoints} == expected

    # The folders, read back with the vocabulary's names, and scored by positronic-evals' own rule.
    # `result` is the run's result, by a signed link: never a path of the server's own folder.
    assert urlsplit(ended.artifacts.result).scheme == "http"
    assert httpx.get(ended.artifacts.result).json()["scores"]["primary"] == ended.scores.primary
    folders = episode_folders(lab, int(ended.id))
    assert len(folders) == 4
    labels = []
    for folder in folders:
        static = json.loads((folder / STATIC_FILE).read_text())
        meta = json.loads((folder / META_FILE).read_text())
        index = int(folder.name)
        assert static[OUTCOME] == given[index] and static[TASK] and meta[UID]
        assert static[ENDED_BY] == "operator"
        assert static[SEED] == seeds[index]  # vocabulary 0.6.0: the trial's seed in its statics
        assert (folder / f"{STATE_SIGNAL}.parquet").is_file()
        assert any(folder.glob("*.mp4"))
        if given[index] != "Discarded":
            found = label(folder, (OPERATOR_LABELER,), {OPERATOR_LABELER: operator_label})
            labels.append(found[1] if found else None)
    assert ended.scores.primary == pytest.approx(score(DEFAULT_RIG_SCORING, labels).primary)

    # The replay: each episode with its verdict, its furthest stage and its camera videos.
    assert ended.replay is not None
    page = httpx.get(ended.replay.url, timeout=60)
    assert page.status_code == 200 and "Furthest stage" in page.text
    data = httpx.get(ended.replay.url + "data.json", timeout=60).json()
    assert {e["index"]: e["values"]["outcome"] for e in data["episodes"]} == given
    assert {e["values"]["stage"] for e in data["episodes"]} == {"contact"}
    videos = [video for e in data["episodes"] for video in e["videos"]]
    assert {video["camera"] for video in videos} == {"exterior", "wrist"} and len(videos) == 8
    served = httpx.get(videos[0]["url"], timeout=60)
    assert served.status_code == 200 and served.headers["content-type"] == "video/mp4"

    refused = httpx.get(
        f"{lab.harness.url}/v1/submissions.artifacts",
        params={"id": str(created.submission_id)},
        headers={"Authorization": f"Bearer {lab.harness.keys['alice']}"},
    )
    assert refused.status_code == 400 and "rig plan" in refused.text


def test_a_rig_of_another_org_or_shape_claims_nothing_and_a_rig_key_reads_no_submissions(lab: Lab) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-others"))
    for name in ("globex-franka", "lab-yam"):
        assert PlatformLink(lab.harness.url, lab.keys[name]).claim() is None, name
    assert client.get_submission(created.submission_id).episodes.done == 0
    as_rig = PlatformClient(lab.harness.url, api_key=lab.keys["lab-franka-2"])  # type: ignore[arg-type]
    with pytest.raises(PlatformError) as unread:
        as_rig.get_submission(created.submission_id)
    assert unread.value.http_status == 401
    with pytest.raises(PlatformError) as unfiled:
        as_rig.create_submission(plan(lab, "rig-files"))
    assert unfiled.value.http_status == 401
    client.cancel_submission(CancelRequest(id=created.submission_id))


def test_a_rig_plan_is_refused_where_no_rig_could_play_it(lab: Lab) -> None:
    gina = lab.harness.user("tina", "globex")
    assert gina
    with lab.harness.platform.db.writing() as session:
        rigs.revoke(session, "globex", "globex-franka")
    with pytest.raises(PlatformError) as refused:
        lab.harness.client("tina").create_submission(plan(lab, "no-rig", org="globex"))
    assert refused.value.http_status == 400 and "no franka rig" in str(refused.value)


def test_a_replaced_rig_process_leaves_its_episode_system_and_the_plan_goes_on(lab: Lab) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-dropped", endpoints=("hold",)))
    first = PlatformLink(lab.harness.url, lab.keys["lab-franka-2"])
    playbook = first.claim()
    assert playbook is not None and playbook.submission == f"{int(created.submission_id):x}"
    first.begin(playbook.submission, playbook.episodes[0]["index"])  # then the process dies mid-episode
    second = PlatformLink(lab.harness.url, lab.keys["lab-franka-2"])  # the rig restarted: a new session
    again = second.claim()
    assert again is not None and again.dropped == [playbook.episodes[0]["index"]]
    assert [e["index"] for e in again.episodes] == [e["index"] for e in playbook.episodes[1:]]
    view = client.get_submission(created.submission_id)
    assert view.episodes.done == 1
    client.cancel_submission(CancelRequest(id=created.submission_id))


def test_a_policy_that_fails_mid_episode_stops_the_robot_first_and_the_operator_still_judges(
    lab: Lab,
) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-crash", endpoints=("crash",), cap=60))
    rig = start_rig(lab, "lab-franka-1")
    try:
        for _ in range(2):
            rig.operator.at("layout", rig.errors)
            rig.operator.press("/start")
            judged = rig.operator.at("verdict", rig.errors)  # the policy broke: nobody pressed anything
            assert judged["episode"]["why_ended"] == "policy"
            assert rig.agent.robot.stopped  # the arm was stopped before the operator was asked
            rig.operator.press("/verdict", {"outcome": "Fail", "notes": "arm froze"})
        ended = wait_for(client, created.submission_id, timeout=WAIT_S)
    finally:
        stop_rig(rig)
    assert not rig.errors, rig.errors
    assert ended.status is SubmissionStatus.finished and ended.outcome is not None
    assert [(e.endpoint, e.kept, e.judged, e.succeeded) for e in ended.outcome.endpoints] == [
        ("crash", 2, 2, 0)
    ]
    folders = episode_folders(lab, int(ended.id))
    notes = [json.loads((folder / STATIC_FILE).read_text()).get("yardstick.notes", "") for folder in folders]
    assert all("arm froze" in n and "broke on its fourth answer" in n for n in notes), notes


def test_a_dropped_connection_costs_the_rig_neither_its_run_nor_the_operators_verdict(lab: Lab) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-dropped-link", endpoints=("hold",), cap=60))
    address = urlsplit(lab.harness.url)
    with DroppingProxy(address.hostname or "127.0.0.1", address.port or 80) as proxy:
        rig = start_rig(lab, "lab-franka-1", url=proxy.url)
        try:
            for verdict, dropped in (("Discarded", RIG_LAND), ("Success", RIG_BEGIN)):
                rig.operator.at("layout", rig.errors)
                proxy.drop_next(f"POST {dropped}".encode())  # a keep-alive the server closed, as it happens
                rig.operator.press("/start")
                rig.operator.at("playing", rig.errors)
                rig.operator.press("/end")
                rig.operator.at("verdict", rig.errors)
                rig.operator.press("/verdict", {"outcome": verdict})
            ended = wait_for(client, created.submission_id, timeout=WAIT_S)
        finally:
            stop_rig(rig)
    assert not rig.errors, rig.errors
    assert proxy.dropped == 2
    assert ended.status is SubmissionStatus.finished
    with lab.harness.platform.db.reading() as session:
        rows = session.execute(
            select(RunEpisode)
            .where(RunEpisode.submission_id == int(created.submission_id))
            .order_by(RunEpisode.index)
        ).scalars()
        played = [((e.result or {}).get("outcome"), e.attempt) for e in rows]
    assert played == [("Discarded", 1), ("Success", 1)]  # each verdict as given, each episode played once


def test_a_rig_that_lands_an_episode_twice_is_answered_alike_and_nothing_changes(lab: Lab) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-landed-twice", endpoints=("hold",)))
    link = PlatformLink(lab.harness.url, lab.keys["lab-franka-2"])
    try:
        playbook = link.claim()
        assert playbook is not None
        index = playbook.episodes[0]["index"]
        link.begin(playbook.submission, index)
        link.begin(playbook.submission, index)  # its first answer lost: asked again
        folder = _judged_folder(playbook.submission, index, "Discarded")
        first = link.land(playbook.submission, index, folder)
        again = link.land(playbook.submission, index, folder)  # the first answer lost with its connection
        assert first == again and first["outcome"] == "Discarded"
        view = client.get_submission(created.submission_id)
        assert view.episodes.done == 1
    finally:
        link.close()
        client.cancel_submission(CancelRequest(id=created.submission_id))
    with lab.harness.platform.db.reading() as session:
        episode = session.execute(
            select(RunEpisode).where(
                RunEpisode.submission_id == int(created.submission_id), RunEpisode.index == index
            )
        ).scalar_one()
    assert (episode.attempt, (episode.result or {}).get("outcome")) == (1, "Discarded")


def episode_folders(lab: Lab, submission: int) -> list[Path]:
    """The folders a rig run's episodes landed as, read where the platform keeps them."""
    store = lab.harness.platform.artifacts
    assert isinstance(store, LocalArtifactStore)
    kept = store.folder(submission) / RIG_EPISODES
    return sorted(p for p in kept.iterdir() if p.is_dir())


def _judged_folder(submission: str, index: int, outcome: str) -> Path:
    """An episode folder in the vocabulary's format with the operator's verdict, as the rig writes one."""
    from yardstick.catalog.sim_franka import SimulatedFranka

    spec = robot_spec(SimulatedFranka)
    folder = Path(tempfile.mkdtemp(prefix="ys-test-rig-")) / f"{index:06d}"
    writer = EpisodeWriter(
        folder,
        uid=f"{submission}-{index:06d}",
        task="put the cube in the tote",
        benchmark_task="tabletop",
        hz=spec.hz,
        started_wall_ns=time.time_ns(),
        cameras=spec.cameras,
        endpoint_token="e0",
        scene={},
        rig="lab-franka-2",
        shape=spec.shape,
    )
    writer.close(Verdict(outcome=Outcome(outcome), seconds_to_end=1.0))
    return folder


def test_an_operator_who_walks_away_leaves_the_episode_unscored_not_failed(lab: Lab) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-away", endpoints=("hold",), cap=2))
    rig = start_rig(lab, "lab-franka-1", verdict_wait_s=2.0)
    try:
        for _ in range(2):  # Start is pressed; the cap ends the episode, and nobody judges it
            rig.operator.at("layout", rig.errors)
            for camera in rig.agent.station.cameras:  # the scene through the cameras, before Start
                until(
                    lambda c=camera: rig.operator.http.get(f"/camera/{c}.jpg").status_code == 200, camera, 60
                )
            rig.operator.press("/start")
            assert rig.operator.at("verdict", rig.errors)["episode"]["why_ended"] == "cap"
        ended = wait_for(client, created.submission_id, timeout=WAIT_S)
    finally:
        stop_rig(rig)
    assert not rig.errors, rig.errors
    assert ended.status is SubmissionStatus.finished and ended.outcome is not None
    assert [(e.endpoint, e.kept, e.judged, e.succeeded) for e in ended.outcome.endpoints] == [
        ("hold", 2, 0, 0)
    ]
    assert ended.scores.primary is None  # no label at all: nothing to score, and no failure counted
    folders = episode_folders(lab, int(ended.id))
    assert [json.loads((f / STATIC_FILE).read_text())[OUTCOME] for f in folders] == ["UNSCORED", "UNSCORED"]


@dataclass
class RigProcess:
    """`yardstick rig run` as a lab runs it at the robot: the process, an operator at the console it printed,
    and what it prints from then on, a line at a time."""

    process: subprocess.Popen[str]
    operator: Operator
    lines: queue.Queue[str]

    def expect(self, text: str) -> str:
        """The next line holding `text`, waited for until a deadline generous for a loaded machine."""
        deadline = give_up_at(WAIT_S)
        said = []
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            said.append(line)
            if text in line:
                return line
        raise AssertionError(f"the rig printed no {text!r}: {''.join(said)}")

    def type(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()


def rig_process(lab: Lab, name: str, *more: str) -> RigProcess:
    env = {**os.environ, "YARDSTICK_RIG_KEY": lab.keys[name], "MUJOCO_GL": "egl", "COLUMNS": "200"}
    command = [sys.executable, "-m", "yardstick.cli", "rig", "run", "--shape", "franka", "--name", name]
    process = subprocess.Popen(
        [*command, "--platform", lab.harness.url, "--once", "--verdict-wait", "120", *more],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()
    started = RigProcess(process, Operator("http://unknown/"), lines)
    try:
        address = started.expect("station console: ").split("station console: ", 1)[1].strip()
    except AssertionError:
        process.kill()
        raise
    started.operator = Operator(address)
    return started


def test_a_rig_process_killed_mid_episode_resumes_the_plan_on_restart_each_episode_recorded_once(
    lab: Lab,
) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-killed", endpoints=("hold",), cap=60))
    first = rig_process(lab, "lab-franka-2")
    operator = first.operator
    try:
        killed_at = operator.at("layout")["episode"]["index"]
        operator.press("/start")
        operator.at("playing")
        until(lambda: operator.http.get("/camera/wrist.jpg").status_code == 200, "the arm moving")
        first.process.kill()  # the power is cut mid-episode
        assert first.process.wait(timeout=60) == -signal.SIGKILL
        second = rig_process(lab, "lab-franka-2")
        operator = second.operator
        try:
            resumed = operator.at("layout")["episode"]
            assert resumed["index"] == killed_at + 1  # the next episode: the cut one is not played twice
            operator.press("/start")
            operator.at("playing")
            operator.press("/end")
            operator.at("verdict")
            operator.press("/verdict", {"outcome": "Success", "successful_items": 1})
            ended = wait_for(client, created.submission_id, timeout=WAIT_S)
            assert second.process.wait(timeout=WAIT_S) == 0  # --once: it played its run and stopped
        finally:
            second.process.kill()
    finally:
        first.process.kill()
    assert ended.status is SubmissionStatus.finished and ended.outcome is not None
    assert [(e.endpoint, e.kept, e.judged, e.succeeded) for e in ended.outcome.endpoints] == [
        ("hold", 2, 2, 1)
    ]
    with lab.harness.platform.db.reading() as session:
        rows = session.execute(
            select(RunEpisode)
            .where(RunEpisode.submission_id == int(created.submission_id))
            .order_by(RunEpisode.index)
        ).scalars()
        played = [(e.index, (e.result or {}).get("outcome"), e.attempt) for e in rows]
    assert played == [(killed_at, "System", 1), (killed_at + 1, "Success", 1)]


def test_a_run_whose_rig_went_silent_is_taken_on_by_another_rig_of_its_shape(lab: Lab) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-taken-on", endpoints=("hold",)))
    silent = PlatformLink(lab.harness.url, lab.keys["lab-franka-1"])
    playbook = silent.claim()
    assert playbook is not None and playbook.submission == f"{int(created.submission_id):x}"
    silent.begin(playbook.submission, playbook.episodes[0]["index"])  # then its network goes
    other = PlatformLink(lab.harness.url, lab.keys["lab-franka-2"])
    assert other.claim() is None  # held by a rig that spoke just now: nobody else's
    with lab.harness.platform.db.writing() as session:  # two minutes and more pass without a word from it
        rig = session.execute(select(Rig).where(Rig.name == "lab-franka-1")).scalar_one()
        rig.seen_at = rig.seen_at - dt.timedelta(seconds=rigs.LOST_S + 1)
    taken = other.claim()
    assert taken is not None and taken.submission == playbook.submission
    assert taken.dropped == [playbook.episodes[0]["index"]]
    with pytest.raises(RigRefused, match="not this rig's"):
        silent.begin(playbook.submission, playbook.episodes[1]["index"])  # back online: the run is not its
    client.cancel_submission(CancelRequest(id=created.submission_id))


def test_an_operator_at_a_terminal_plays_the_plan_by_typed_commands(lab: Lab) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "tabletop-terminal", endpoints=("hold",), cap=60))
    rig = rig_process(lab, "lab-franka-2", "--terminal")
    try:
        laid_out = rig.expect("phase: layout")
        assert "Put the cube in the tote." in laid_out and "start pose: nominal" in laid_out
        assert "hold" not in laid_out and "policy-" not in laid_out
        rig.type("9")
        assert "not a command now" in rig.expect("not a command")
        rig.type("s")
        rig.expect("phase: playing")
        rig.type("2")
        rig.expect("marked reaching")
        rig.type("e")
        rig.expect("phase: verdict")
        rig.type("1 x")
        rig.expect("not a whole number")
        rig.type("1 1 clean grasp")
        rig.expect("verdict: Success")
        rig.expect("phase: layout")
        rig.type("s")
        rig.expect("phase: playing")
        rig.type("x")
        rig.expect("STOPPED")
        assert "ended by stop" in rig.expect("phase: verdict")
        rig.type("4")
        rig.expect("verdict: Safety")
        ended = wait_for(client, created.submission_id, timeout=WAIT_S)
        assert rig.process.wait(timeout=WAIT_S) == 0
    finally:
        rig.process.kill()
    assert ended.status is SubmissionStatus.finished and ended.outcome is not None
    counted = [(e.endpoint, e.kept, e.judged, e.succeeded) for e in ended.outcome.endpoints]
    assert counted == [("hold", 2, 2, 1)]
