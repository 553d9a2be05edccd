"""The 3D replay viewer in a real browser: a tiny MT10 run recorded with `--record replay`, its run folder's
report.html and replay.html opened as files in headless Chromium (WebGL drawn by SwiftShader), played, and
looked at; a replay's looks (a colour, a node hidden) shown from the frame they change, scrubbing back too.
Screenshots land in `test-output/replay/`."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image
from platform_client.eval_plan import EvalPlan
from sqlalchemy import select

import chromium
from platform_harness import Harness, running_platform
from yardstick.core import admin
from yardstick.replay3d import format as seqreplay
from yardstick.replay3d.gltf import unpack
from yardstick.store.models import RunEpisode

SHOTS = Path(__file__).resolve().parent.parent / "test-output" / "replay"
BACKGROUND = (0xE8, 0xEC, 0xF1)  # the viewer's clear colour (viewer.js)
# Loading ~2.5 MB of three.js and a 1.6 MB scene, then drawing in software, on a loaded 2-core machine.
DEADLINE_MS = 90_000


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two MT10 episodes (reach, push) by the scripted expert, with their replays and trajectories."""
    out = tmp_path_factory.mktemp("replay") / "run"
    ran = subprocess.run(
        [
            str(Path(sys.executable).parent / "yardstick"),
            "eval",
            "run",
            "--benchmark",
            "mt10",
            "--policy",
            "expert",
            "--tasks",
            "reach-v3,push-v3",
            "--trials",
            "1",
            "--in-process",
            "--record",
            "replay",
            "--record",
            "trajectory",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    return out


@pytest.fixture(scope="module")
def looks_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An episode of `looks_bench.LooksBench` (its cart red from step 2, its ball hidden from step 3)."""
    out = tmp_path_factory.mktemp("looks") / "run"
    bench = Path(__file__).resolve().parent / "looks_bench.py"
    ran = subprocess.run(
        [
            str(Path(sys.executable).parent / "yardstick"),
            *("eval", "run", "--benchmark", f"{bench}:LooksBench", "--policy", f"{bench}:Push"),
            *("--trials", "1", "--in-process", "--record", "replay", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium.launched("the replay viewer") as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    with chromium.checked_page(browser, height=860) as opened:
        yield opened


def opened(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_function(
        "() => window.yardstickReplay && (window.yardstickReplay.ready || window.yardstickReplay.failed)",
        timeout=DEADLINE_MS,
    )
    failed = page.evaluate("() => window.yardstickReplay.failed || null")
    assert failed is None, failed


def drawn(shot: bytes) -> float:
    """The share of a screenshot's pixels that are not the viewer's background."""
    pixels = np.asarray(Image.open(io.BytesIO(shot)).convert("RGB"), dtype=np.int16)
    return float((np.abs(pixels - np.array(BACKGROUND)).max(axis=2) > 12).mean())


def state(page: Any) -> dict[str, Any]:
    return dict(page.evaluate("() => window.yardstickReplay.state()"))


def test_the_report_links_each_episodes_replay(run: Path, page: Any) -> None:
    page.goto((run / "report.html").as_uri())
    links = page.locator("a.replay3d")
    assert links.count() == 2
    assert links.nth(1).get_attribute("href") == "replay.html?episode=1"
    links.nth(1).click()
    page.wait_for_function("() => window.yardstickReplay?.ready", timeout=DEADLINE_MS)
    assert page.locator(".pane .title").inner_text() == "#1 push-v3 · seed 0"
    assert page.locator(".pane .outcome").inner_text() == "Success"


def test_a_replay_opened_as_a_file_is_drawn_and_moves_as_it_plays(run: Path, page: Any) -> None:
    opened(page, (run / "replay.html").as_uri() + "?episode=1")
    stage = page.locator(".stage")
    first = stage.screenshot()
    assert drawn(first) > 0.2, "the scene is not drawn"
    assert state(page)["frames"] == [0]
    page.click("#play")
    page.wait_for_function("() => window.yardstickReplay.state().clock > 0.4", timeout=DEADLINE_MS)
    page.evaluate("() => window.yardstickReplay.player.pause()")
    later = stage.screenshot(path=str(SHOTS / "played.png"))
    assert state(page)["frames"][0] > 10
    assert first != later
    moved = np.abs(
        np.asarray(Image.open(io.BytesIO(first)), dtype=np.int16)
        - np.asarray(Image.open(io.BytesIO(later)), dtype=np.int16)
    )
    assert (moved.max(axis=2) > 30).mean() > 0.002, "the scene does not move"
    # Under the timeline: the step's action and metrics, from the trajectory.
    readout = page.locator(".readout").inner_text()
    assert "action [" in readout and "reward" in readout
    page.screenshot(path=str(SHOTS / "viewer.png"))


def test_the_viewer_reads_the_file_exactly_as_the_format_does(run: Path, page: Any) -> None:
    opened(page, (run / "replay.html").as_uri() + "?episode=0")
    read = seqreplay.read(run / "episodes" / "000000" / "replay.seqreplay")
    seen = page.evaluate(
        """() => { const r = window.yardstickReplay.player.panes[0].replay;
                   return {nodes: r.nodes, t: Array.from(r.t), step: Array.from(r.step),
                           pos: Array.from(r.pos), quat: Array.from(r.quat)}; }"""
    )
    assert seen["nodes"] == read.nodes
    assert seen["t"] == read.t.tolist() and seen["step"] == read.step.tolist()
    assert np.array_equal(np.array(seen["pos"], dtype=np.float32), read.pos.reshape(-1))
    assert np.array_equal(np.array(seen["quat"], dtype=np.float32), read.quat.reshape(-1))


def test_the_view_frames_and_follows_what_moves_and_leaves_the_fixtures_out(run: Path, page: Any) -> None:
    """The scene marks the nodes fixed to the world (the table, the wall, the robot's base: recorded, for a
    benchmark may place them anew each episode) `fixed`: the camera frames the others, and follows one of
    them."""
    opened(page, (run / "replay.html").as_uri() + "?episode=0")
    replay = seqreplay.read(run / "episodes" / "000000" / "replay.seqreplay")
    document, _ = unpack((run / "scenes" / f"{replay.scene_sha256}.glb").read_bytes())
    fixed = {n["name"] for n in document["nodes"] if n.get("extras", {}).get("fixed")}
    assert fixed and fixed < set(replay.nodes)  # Meta-World's table, wall and base are fixtures
    seen = page.evaluate(
        """() => { const view = window.yardstickReplay.player.panes[0].view;
                   const names = view.replay.nodes;
                   return {framed: view.framed.map((o) => names[view.objects.indexOf(o)]),
                           followed: names[view.followed]}; }"""
    )
    assert seen["framed"] == [n for n in replay.nodes if n not in fixed]
    assert seen["followed"] == "rightclaw"  # Meta-World's gripper, not a fixture


def test_two_episodes_side_by_side_play_on_one_clock(run: Path, page: Any) -> None:
    opened(page, (run / "replay.html").as_uri() + "?episode=0&episode=1")
    stages = page.locator(".stage")
    assert page.locator(".stage canvas").count() == 2
    assert all(drawn(stages.nth(i).screenshot()) > 0.2 for i in range(2)), "a pane is not drawn"
    page.evaluate("() => window.yardstickReplay.player.seek(0.3)")
    frames = state(page)["frames"]
    # One clock: each pane shows its frame at 0.3 s (MT10 plays 80 steps a second).
    assert frames == [24, 24]
    page.screenshot(path=str(SHOTS / "side-by-side.png"))


def test_a_replays_looks_show_from_their_frame_scrubbing_either_way(looks_run: Path, page: Any) -> None:
    opened(page, (looks_run / "replay.html").as_uri() + "?episode=0")
    read = seqreplay.read(looks_run / "episodes" / "000000" / "replay.seqreplay")
    assert [(frame, node) for frame, node, _ in read.looks] == [
        (0, "cart"),
        (0, "ball"),
        (2, "cart"),
        (3, "ball"),
    ]
    stage = page.locator(".stage")

    def shown(frame: int) -> tuple[list[float], bool, float]:
        """At `frame` (10 a second): the cart's colour, whether the ball is drawn, and the share of the
        picture that is the cart's blue."""
        page.evaluate(f"() => window.yardstickReplay.player.seek({frame / 10})")
        assert state(page)["frames"] == [frame]
        colour, visible = page.evaluate(
            """() => { const view = window.yardstickReplay.player.panes[0].view;
                       let colour = null;
                       view.root.getObjectByName("cart").traverse((o) => {
                         if (o.isMesh && !colour) colour = o.material.color.toArray(); });
                       return [colour, view.root.getObjectByName("ball").visible]; }"""
        )
        pixels = np.asarray(Image.open(io.BytesIO(stage.screenshot())).convert("RGB"), dtype=np.int16)
        blue = (pixels[..., 2] - np.maximum(pixels[..., 0], pixels[..., 1]) > 40).mean()
        return colour, visible, float(blue)

    blue, red = [0.2, 0.4, 0.8], [1.0, 0.0, 0.0]
    # Forward, then back over each change, then forward again: each frame shows what holds at it.
    for frame, cart, ball in [
        (1, blue, True),
        (3, red, False),
        (6, red, False),
        (2, red, True),
        (0, blue, True),
    ]:
        colour, visible, drawn_blue = shown(frame)
        assert np.allclose(colour, cart, atol=1e-3) and visible is ball, (frame, colour, visible)
        assert (drawn_blue > 0.002) is (cart == blue), (frame, drawn_blue)
    page.evaluate("() => window.yardstickReplay.player.seek(0.3)")
    stage.screenshot(path=str(SHOTS / "looks.png"))


@pytest.fixture(scope="module")
def blind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, str, list[int]]]:
    """A platform with a blind sample of two policies (Meta-World's expert and a random one) on one MT10
    task, one seed: its worker records each episode's video and, as the benchmark declares one, its 3D
    replay, and the run's page is what it recorded. Yields the platform, the run's page and the two
    episodes."""
    # Competitions of several served policies: a lab's own, opened (the contract's take one image).
    with running_platform(
        tmp_path_factory.mktemp("site"), None, workers=1, open_competitions=True
    ) as harness:
        with harness.platform.db.writing() as session:
            admin.create_eval(
                session,
                "metaworld.reach",
                "mt10",
                params={"cameras": ["corner"], "image_size": 64, "reflections": False},
                choice=admin.EvalTasks(["reach-v3"], trials=1),
                record_video=True,
            )
        alice = harness.client("alice")
        plan = EvalPlan.model_validate(
            {
                "request_type": {"type": "nebius_competition"},
                "eval": "metaworld.reach",
                "endpoints": [
                    {"name": name, "kind": "served", "wire": "websocket", "spec": name}
                    for name in ("metaworld-expert", "random")  # the shipped policies
                ],
                "sample": {"percent": 100, "seed": 1},
                "transaction_key": "blind-3d",
            }
        )
        view = harness.wait(alice, alice.create_submission(plan).submission_id).model_dump(mode="json")
        assert view["status"] == "finished", view
        run_id = int(view["id"], 16)
        with harness.platform.db.reading() as session:
            pair = sorted(
                session.execute(select(RunEpisode).where(RunEpisode.submission_id == run_id)).scalars(),
                key=lambda e: e.index,
            )
            assert len(pair) == 2 and pair[0].seed == pair[1].seed and pair[0].endpoint != pair[1].endpoint
            for episode in pair:  # what the worker recorded, as the episode lists it
                kept = (episode.result or {}).get("artifacts", [])
                assert any(a.endswith("replay.seqreplay") for a in kept), kept
                assert any(a.startswith("scenes/") and a.endswith(".glb") for a in kept), kept
            indices = [e.index for e in pair]
        yield harness, view["replay"]["url"], indices


def test_the_run_page_links_replays_and_the_blind_pair_plays_side_by_side(
    blind: tuple[Harness, str, list[int]], page: Any
) -> None:
    harness, url, (one, other) = blind
    page.goto(url)
    links = page.locator("#episodes .replay3d a")
    assert links.count() == 4  # each of the two: alone, and beside the other policy's
    page.locator(f'#episodes tr[data-index="{one}"] .replay3d a.pair').click()
    page.wait_for_function(
        "() => window.yardstickReplay?.ready || window.yardstickReplay?.failed", timeout=DEADLINE_MS
    )
    assert page.evaluate("() => window.yardstickReplay.failed || null") is None
    assert page.url.endswith(f"replay?episode={one}&episode={other}")
    stages = page.locator(".stage")
    assert page.locator(".stage canvas").count() == 2
    before = [stages.nth(i).screenshot() for i in range(2)]
    assert all(drawn(shot) > 0.2 for shot in before), "a pane is not drawn"
    page.click("#play")
    page.wait_for_function("() => window.yardstickReplay.state().clock > 0.4", timeout=DEADLINE_MS)
    page.evaluate("() => window.yardstickReplay.player.pause()")
    assert all(stages.nth(i).screenshot() != before[i] for i in range(2)), "a pane does not move"
    assert "reward" in page.locator(".readout").first.inner_text()
    page.screenshot(path=str(SHOTS / "platform-side-by-side.png"))
    # Nothing came from elsewhere: three.js and the viewer from the platform's static files.
    assert httpx.get(f"{harness.url}/static/three/LICENSE").text.startswith("The MIT License")
    assert httpx.get(f"{harness.url}/static/../pyproject.toml").status_code == 404
    assert httpx.get(f"{url}replay?episode=999").status_code == 404
