"""The station console in a real browser (issue 26): an operator in headless Chromium plays a whole blind rig
plan of two endpoints through the page alone — the keyboard for one episode, the mouse for another — while a
rig process (`RigAgent` on the simulated Franka) plays it. The page shows each episode's instruction, scene
and queue, and live camera views once the arm moves; the ladder's rungs light up as they are marked; STOP
pre-selects Safety; a verdict sent with nothing picked says so and sends nothing; the run finishes with each
endpoint's `outcome` as the verdicts given; and the page never names a policy nor shows its token, at any
phase. Screenshots land in `test-output/rig-console/`."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from eval_vocabulary.outcome import VERDICTS, Outcome
from eval_vocabulary.progress import LADDER, STAGE_LABELS
from platform_client.enums import SubmissionStatus
from sqlalchemy import select

import chromium
from deadlines import give_up_at
from platform_harness import wait_for
from rig_helpers import WAIT_S, Lab, RunningRig, plan, running_lab, start_rig, stop_rig
from yardstick.rig.station import Judgement
from yardstick.store.models import Run, RunEpisode, Task

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

SHOTS = Path(__file__).resolve().parent.parent / "test-output" / "rig-console"

# Deadlines for a loaded two-core machine: a phase that waits on the rig (a policy to dial, a robot to
# reset, an episode to land) gets the lab's own; a page drawing what it already has gets a minute.
RIG_MS = int(WAIT_S * 1000)
PAGE_MS = 60_000
CAP_S = 180  # each episode's cap: far more than an operator in a browser needs, so none ends by the clock

BLIND = ("nudge", "hold", "policy-")  # the endpoints' names, and the prefix of their tokens
NO_VERDICT = "Pick a verdict first"


@dataclass(frozen=True)
class Expected:
    """An episode as the platform drew it: what the operator must be shown, and whose it is (never shown)."""

    index: int
    endpoint: str
    task_id: str
    instruction: str
    scene: dict[str, str]  # the scene's rows as the page labels them
    items: int | None


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with running_lab(tmp_path_factory.mktemp("rig-console")) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium.launched("the console") as launched:
        yield launched


def expected_episodes(lab: Lab, submission_id: Any) -> list[Expected]:
    """The run's episodes in the order a rig plays them, from the platform's own record of the plan."""
    with lab.harness.platform.db.reading() as session:
        run = session.get(Run, int(submission_id))
        assert run is not None
        rows = (
            session.execute(
                select(RunEpisode).where(RunEpisode.submission_id == run.id).order_by(RunEpisode.index)
            )
            .scalars()
            .all()
        )
        described = {
            t.task_id: t.description
            for t in session.execute(select(Task).where(Task.eval_id == run.eval_id)).scalars()
        }
        tasks = run.resolved["tasks"]
        items = run.benchmark_params.get("items") or {}
        found = []
        for row in rows:
            drawn = tasks[row.task_pos]
            scene = {"task": row.task_id, "episode": str(row.index), "cap": f"{CAP_S} s"}
            for key in ("start_pose", "tote_placement"):
                if drawn.get(key):
                    scene[key.replace("_", " ")] = str(drawn[key])
            count = items.get(row.benchmark_task)
            if count:
                scene["items"] = str(count)
            found.append(
                Expected(row.index, row.endpoint, row.task_id, described[row.task_id], scene, count or None)
            )
    return found


def release(rig: RunningRig) -> None:
    """After a failure, end the episode the rig is in (Stop, then Discard, at the station itself), so that
    the teardown does not wait out the rig's `verdict_wait_s` or the episode's cap."""
    rig.agent.quit.set()
    deadline = give_up_at(WAIT_S)
    while rig.thread.is_alive() and time.monotonic() < deadline:
        rig.agent.station.stop()
        rig.agent.station.judge(Judgement(Outcome.DISCARDED))
        rig.thread.join(timeout=0.2)


class ConsolePage:
    """The operator's view of the console page, and what it checks at each phase."""

    def __init__(self, page: Any, rig: RunningRig, cameras: tuple[str, ...]) -> None:
        self.page, self.rig, self.cameras = page, rig, cameras
        self.posts: list[str] = []  # the paths the page POSTed, in order: what the operator's actions sent
        self.errors: list[str] = []
        page.on("request", lambda r: self.posts.append(urlsplit(r.url).path) if r.method == "POST" else None)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def waiting(self, what: str, check: Callable[[], Any]) -> Any:
        """`check()`, saying on failure what the rig's loop raised (if it did) and what the page showed."""
        try:
            return check()
        except (AssertionError, playwright_sync.TimeoutError) as failed:
            raise AssertionError(
                f"{what}: {failed}\nrig errors: {self.rig.errors}\npage: {self.page.inner_text('body')}"
            ) from None

    def at(self, phase: str, index: int) -> None:
        """Until the page shows episode `index` in `phase`."""
        self.waiting(
            f"episode {index} at {phase}",
            lambda: self.page.wait_for_function(
                """([phase, index]) => document.getElementById("phase").textContent === phase &&
                    [...document.querySelectorAll("#scene tr")].some(
                        (r) => r.cells[0].textContent === "episode" && r.cells[1].textContent === index)""",
                arg=[phase, str(index)],
                timeout=RIG_MS,
            ),
        )

    def blind(self, when: str) -> None:
        """Nothing on the page, shown or hidden, markup or text, names a policy or carries its token."""
        html = self.page.content().lower()
        text = str(self.page.evaluate("document.documentElement.textContent")).lower()
        for word in BLIND:
            assert word not in html, f"{word!r} in the page's HTML at {when}"
            assert word not in text, f"{word!r} in the page's text at {when}"

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def scene(self) -> dict[str, str]:
        rows = self.page.eval_on_selector_all(
            "#scene tr", "rows => rows.map((r) => [r.cells[0].textContent, r.cells[1].textContent])"
        )
        return dict(rows)

    def laid_out(self, episode: Expected, later: list[Expected]) -> None:
        """At layout: the instruction, the scene to lay out, the queue of what follows, Start, the cameras'
        views; no policy."""
        page = self.page
        self.at("layout", episode.index)
        expect(page.locator("#instruction")).to_have_text(episode.instruction, timeout=PAGE_MS)
        scene = self.scene()
        assert {key: scene.get(key) for key in episode.scene} == episode.scene, scene
        queue = page.locator("#queue li")
        expect(queue).to_have_text([f"{e.task_id}: {e.instruction}" for e in later], timeout=PAGE_MS)
        expect(page.locator("#start")).to_be_visible()
        expect(page.locator("#stop")).to_be_hidden()
        expect(page.locator("#verdict")).to_be_hidden()
        self.views_load(episode.index)  # the scene through the cameras, before Start
        self.blind(f"layout of episode {episode.index}")
        self.shot(f"{episode.index}-layout")

    def playing(self, episode: Expected) -> None:
        """Playing: STOP, the ladder in the vocabulary's order with its labels, End; live camera views."""
        page = self.page
        self.at("playing", episode.index)
        expect(page.locator("#stop")).to_be_visible()
        expect(page.locator("#end")).to_be_visible()
        expect(page.locator("#start")).to_be_hidden()
        rungs = page.locator("#ladder button")
        expect(rungs).to_have_count(len(LADDER))
        assert page.eval_on_selector_all("#ladder button", "bs => bs.map((b) => b.dataset.stage)") == [
            str(stage) for stage in LADDER
        ]
        for position, stage in enumerate(LADDER):
            expect(rungs.nth(position)).to_contain_text(STAGE_LABELS[stage])
        self.views_load(episode.index)
        self.blind(f"playing of episode {episode.index}")
        self.shot(f"{episode.index}-playing")

    def views_load(self, index: int) -> None:
        """Each camera's view is an image that loaded (a decoded frame, not a broken or empty one), and a
        fresh frame replaces it while the arm moves."""
        page = self.page
        loaded = """(n) => { const views = [...document.querySelectorAll("#views img")];
            return views.length === n && views.every((v) => v.complete && v.naturalWidth > 0); }"""
        self.waiting(
            f"the camera views of episode {index}",
            lambda: page.wait_for_function(loaded, arg=len(self.cameras), timeout=RIG_MS),
        )
        assert sorted(page.eval_on_selector_all("#views img", "vs => vs.map((v) => v.alt)")) == sorted(
            self.cameras
        )
        first = page.eval_on_selector("#views img", "v => v.src")
        self.waiting(
            f"a fresh camera frame in episode {index}",
            lambda: page.wait_for_function(
                """(first) => { const v = document.querySelector("#views img");
                    return v.src !== first && v.complete && v.naturalWidth > 0; }""",
                arg=first,
                timeout=PAGE_MS,
            ),
        )

    def reached(self, stage: Any, index: int) -> None:
        rung = self.page.locator(f'#ladder button[data-stage="{stage}"]')
        self.waiting(
            f"{stage} shown reached in episode {index}",
            lambda: expect(rung).to_have_class(re.compile(r"\breached\b"), timeout=PAGE_MS),
        )

    def judging(self, episode: Expected, why: str, preselected: str | None) -> None:
        """The verdict form: the vocabulary's verdicts in order, Safety pre-selected after STOP (nothing
        otherwise), items delivered where the task has items."""
        page = self.page
        self.at("verdict", episode.index)
        expect(page.locator("#verdict")).to_be_visible(timeout=PAGE_MS)
        expect(page.locator("#stop")).to_be_hidden()
        radios = page.locator('#verdicts input[name="outcome"]')
        expect(radios).to_have_count(len(VERDICTS), timeout=PAGE_MS)
        assert page.eval_on_selector_all("#verdicts input", "rs => rs.map((r) => r.value)") == list(VERDICTS)
        checked = page.eval_on_selector_all("#verdicts input:checked", "rs => rs.map((r) => r.value)")
        assert checked == ([preselected] if preselected else []), checked
        expect(page.locator("#why")).to_contain_text(why)
        if episode.items:
            expect(page.locator("#items")).to_be_visible()
            expect(page.locator("#total")).to_have_text(str(episode.items))
        else:
            expect(page.locator("#items")).to_be_hidden()
        self.blind(f"verdict of episode {episode.index}")
        self.shot(f"{episode.index}-verdict")

    def picked(self, verdict: str) -> None:
        expect(self.page.locator(f'#verdicts input[value="{verdict}"]')).to_be_checked(timeout=PAGE_MS)

    def sends_nothing_unpicked(self, send: Callable[[], None], index: int) -> None:
        """With no verdict picked, Send says to pick one and posts nothing; the form stays, its message too
        (through the page's next redraws)."""
        page = self.page
        posted = len(self.posts)
        send()
        message = page.get_by_text(NO_VERDICT)
        expect(message).to_be_visible(timeout=PAGE_MS)
        for _ in range(3):  # three more polls of the station, each drawn: the message is no flash
            with page.expect_response(lambda r: urlsplit(r.url).path == "/state", timeout=PAGE_MS):
                pass
        assert message.is_visible(), f"the message went with a redraw in episode {index}"
        assert self.posts[posted:] == [], self.posts[posted:]
        expect(page.locator("#verdict")).to_be_visible()
        expect(page.locator("#phase")).to_have_text("verdict")

    def sent(self, episode: Expected) -> None:
        """The verdict went: the form goes (the station has it) and the page waits for the next episode."""
        self.waiting(
            f"the verdict of episode {episode.index} taken",
            lambda: expect(self.page.locator("#verdict")).to_be_hidden(timeout=RIG_MS),
        )
        assert self.posts[-1] == "/verdict", self.posts


def test_an_operator_plays_a_blind_rig_plan_at_the_console_by_keyboard_and_by_mouse(
    lab: Lab, browser: Any
) -> None:
    client = lab.harness.client("alice")
    created = client.create_submission(plan(lab, "console-1", cap=CAP_S))
    episodes = expected_episodes(lab, created.submission_id)
    assert len(episodes) == 4 and {e.endpoint for e in episodes} == {"nudge", "hold"}
    assert any(e.items for e in episodes) and not all(e.items for e in episodes)

    rig = start_rig(lab, "lab-franka-1", verdict_wait_s=WAIT_S)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    station = ConsolePage(page, rig, tuple(rig.agent.station.cameras))
    keys = page.keyboard
    given: dict[int, str] = {}
    try:
        page.goto(str(rig.operator.http.base_url), timeout=PAGE_MS)
        station.blind("the first load")

        # Episode 0, by keyboard: S, each rung 1–5 (lit as marked), E; Enter with nothing picked; 1, Enter.
        first = episodes[0]
        station.laid_out(first, episodes[1:])
        keys.press("s")
        station.playing(first)
        for number, stage in enumerate(LADDER, start=1):
            keys.press(str(number))
            station.reached(stage, first.index)
        keys.press("e")
        station.judging(first, "end", None)
        station.sends_nothing_unpicked(lambda: keys.press("Enter"), first.index)
        keys.press("5")
        station.picked("System")
        keys.press("1")  # the operator changes their mind before sending
        station.picked("Success")
        keys.press("Enter")
        station.sent(first)
        given[first.index] = "Success"

        # Episode 1, by mouse: Start, two rungs, STOP (Safety pre-selected), items and notes, Send.
        second = episodes[1]
        station.laid_out(second, episodes[2:])
        page.locator("#start").click()
        station.playing(second)
        for stage in LADDER[1:3]:
            page.locator(f'#ladder button[data-stage="{stage}"]').click()
            station.reached(stage, second.index)
        page.locator("#stop").click()
        station.judging(second, "stop", "Safety")
        if second.items:
            page.locator("#items").fill("0")
        page.locator("#notes").fill("the arm swung wide")
        page.locator("#send").click()
        station.sent(second)
        given[second.index] = "Safety"

        # Episode 2, by mouse: Start, a rung, End; Send with nothing picked; Discard.
        third = episodes[2]
        station.laid_out(third, episodes[3:])
        page.locator("#start").click()
        station.playing(third)
        page.locator(f'#ladder button[data-stage="{LADDER[0]}"]').click()
        station.reached(LADDER[0], third.index)
        page.locator("#end").click()
        station.judging(third, "end", None)
        station.sends_nothing_unpicked(lambda: page.locator("#send").click(), third.index)
        page.locator("#discard").click()
        station.sent(third)
        assert station.posts[-1] == "/verdict"
        given[third.index] = "Discarded"

        # Episode 3, by keyboard: S and at once Space — a STOP pressed before the page has drawn the
        # episode playing is a STOP all the same — then Safety pre-selected, 2 then 4, Enter.
        fourth = episodes[3]
        station.laid_out(fourth, [])
        keys.press("s")
        keys.press(" ")
        station.judging(fourth, "stop", "Safety")
        keys.press("2")
        station.picked("Fail")
        keys.press("4")
        station.picked("Safety")
        keys.press("Enter")
        station.sent(fourth)
        given[fourth.index] = "Safety"

        ended = wait_for(client, created.submission_id, timeout=WAIT_S)
        station.blind("the run's end")
    finally:
        context.close()
        release(rig)
        stop_rig(rig)
    assert not rig.errors, rig.errors
    assert not station.errors, f"the page threw: {station.errors}"
    assert ended.status is SubmissionStatus.finished, ended
    assert ended.episodes.done == ended.episodes.total == len(episodes)

    # What the operator did went through the page's own calls, one verdict an episode.
    assert station.posts.count("/verdict") == len(episodes), station.posts
    assert station.posts.count("/start") == len(episodes), station.posts

    # Each episode recorded the verdict clicked or typed; each endpoint's outcome counts them.
    with lab.harness.platform.db.reading() as session:
        rows = (
            session.execute(select(RunEpisode).where(RunEpisode.submission_id == int(created.submission_id)))
            .scalars()
            .all()
        )
        recorded = {row.index: (row.result or {}).get("outcome") for row in rows}
        endpoint_of = {row.index: row.endpoint for row in rows}
    assert recorded == given
    expected = {}
    for name in ("nudge", "hold"):
        said = [verdict for index, verdict in given.items() if endpoint_of[index] == name]
        kept = [verdict for verdict in said if verdict != "Discarded"]
        expected[name] = (len(kept), sum(v in VERDICTS for v in kept), kept.count("Success"))
    assert ended.outcome is not None
    assert {e.endpoint: (e.kept, e.judged, e.succeeded) for e in ended.outcome.endpoints} == expected

    # The run's replay page: each episode with the verdict given and its furthest stage; videos that play.
    replay = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    try:
        assert ended.replay is not None
        replay.goto(ended.replay.url)
        rows = replay.locator("#episodes tbody tr")
        assert rows.count() == len(episodes)
        shown = {
            int(r): o
            for r, o in (
                row.split("|")
                for row in rows.evaluate_all(
                    "rows => rows.map(r => r.dataset.index + '|' + r.dataset.outcome)"
                )
            )
        }
        assert shown == given
        assert "Furthest stage" in replay.locator("#episodes thead").inner_text()
        replay.eval_on_selector(
            "#episodes tbody tr:first-child video", "v => { v.muted = true; return v.play(); }"
        )
        replay.wait_for_function(
            "() => { const v = document.querySelector('#episodes tbody tr:first-child video');"
            " return v && v.duration > 0 && (v.currentTime > 0 || v.ended); }",
            timeout=60_000,
        )
    finally:
        replay.context.close()
