"""The pages in a real browser: headless Chromium (Debian's) driven by Playwright against a running platform
(real gateway, real workers recording real videos). Screenshots land in `test-output/pages/`."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_client.eval_plan import EvalPlan

import chromium
from conftest import free_port
from platform_harness import TOYS, Harness, running_platform
from yardstick.core import admin

playwright_sync = pytest.importorskip("playwright.sync_api")

SHOTS = Path(__file__).resolve().parent.parent / "test-output" / "pages"


@dataclass
class Site:
    harness: Harness
    compared: dict[str, Any]  # a private run of two endpoints on the same tasks and seeds
    ranked: dict[str, Any]  # a competition run, ranked on the public board
    baseline: dict[str, Any]  # a competition run by another user, made a baseline
    blind: dict[str, Any]  # a blind sample of three endpoints: on no board, on the pairwise ranking
    checkpoints: dict[str, Any]  # two checkpoints of one policy on toys.curves, the later one worse


def canvas_plan(
    key: str,
    endpoints: list[tuple[str, str]],
    *,
    competition: bool,
    sample: dict[str, int] | None = None,
    eval_slug: str = "toys.canvas",
    episodes: int = 4,
) -> EvalPlan:
    request = {"type": "nebius_competition"} if competition else {"type": "private_eval", "org": "acme"}
    return EvalPlan.model_validate(
        {
            "request_type": request,
            "eval": eval_slug,
            "endpoints": [
                {"name": name, "kind": "served", "wire": "websocket", "spec": spec}
                for name, spec in endpoints
            ],
            **({"sample": sample} if sample else {"episodes_per_endpoint": episodes}),
            "transaction_key": key,
        }
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    # Competitions of several served policies: a lab's own, opened (the contract's take one image).
    with running_platform(
        tmp_path_factory.mktemp("site"), None, workers=1, open_competitions=True
    ) as harness:
        with harness.platform.db.writing() as session:
            # Canvas at 8 trials a task (each seed twice): enough paired trials for a regression to show.
            admin.create_eval(
                session,
                "toys.curves",
                f"{TOYS}:Canvas",
                title="Curves",
                choice=admin.EvalTasks(["left", "right"], trials=8),
            )
        alice = harness.client("alice")
        gina = harness.client("gina")
        runs = [
            alice.create_submission(
                canvas_plan("compare", [("rows", "rows"), ("sampler", "sampler")], competition=False)
            ),
            alice.create_submission(canvas_plan("ranked", [("policy", "sampler")], competition=True)),
            gina.create_submission(canvas_plan("reference", [("policy", "rows")], competition=True)),
            alice.create_submission(
                canvas_plan(
                    "blind",
                    [("rows", "rows"), ("sampler", "sampler"), ("slow", "slow")],
                    competition=True,
                    sample={"percent": 100, "seed": 1},
                )
            ),
            alice.create_submission(
                canvas_plan(
                    "checkpoints",
                    [("pol@1000", "rows"), ("pol@2000", "sampler")],
                    competition=True,
                    eval_slug="toys.curves",
                    episodes=16,
                )
            ),
        ]
        finished = []
        for created, client in zip(runs, (alice, alice, gina, alice, alice), strict=True):
            view = harness.wait(client, created.submission_id)
            assert view.status.name == "finished", view
            finished.append(view.model_dump(mode="json"))
        with harness.platform.db.writing() as session:
            admin.add_baseline(
                session, "toys.canvas", int(finished[2]["id"], 16), publisher="Physical Labs", name="pi-zero"
            )
        yield Site(harness, *finished)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium.launched("the pages") as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert not errors, f"the page threw: {errors}"


def plays(page: Any, selector: str) -> float:
    """Start the video and wait until its clock moves; return where it got to."""
    page.eval_on_selector(selector, "v => { v.muted = true; return v.play(); }")
    page.wait_for_function(
        "s => { const v = document.querySelector(s); return v && v.currentTime > 0.2; }",
        arg=selector,
        timeout=15_000,
    )
    return float(page.eval_on_selector(selector, "v => v.currentTime"))


def visible_rows(page: Any) -> list[dict[str, str]]:
    return list(
        page.eval_on_selector_all(
            "#episodes tbody tr",
            "rows => rows.filter(r => r.style.display !== 'none').map(r => ({...r.dataset}))",
        )
    )


def test_a_finished_run_links_its_replay_page_and_the_page_shows_chart_table_and_videos(
    site: Site, page: Any
) -> None:
    url = site.compared["replay"]["url"]
    assert url.startswith(site.harness.url + "/v/")
    page.goto(url)  # no key: the link is the credential
    assert page.locator("#status").inner_text() == "finished"
    # Two endpoints: a chart and a score each, never the two pooled into one.
    charts = page.locator(".chart[data-endpoint] svg")
    assert charts.count() == 2
    assert all(
        "left" in charts.nth(i).inner_html() and "right" in charts.nth(i).inner_html() for i in range(2)
    )
    cards = {
        page.locator(".score").nth(i).get_attribute("data-endpoint"): page.locator(".score .big")
        .nth(i)
        .inner_text()
        for i in range(page.locator(".score").count())
    }
    assert cards == {"rows": "100.0%", "sampler": "50.0%"}
    rows = visible_rows(page)
    assert len(rows) == 16  # two endpoints × two tasks × four trials
    assert {r["outcome"] for r in rows} == {"Success", "Failure"}
    videos = page.locator("#episodes video")
    assert videos.count() == 32  # two cameras an episode
    assert plays(page, "#episodes tbody tr:first-child video") > 0.2
    page.screenshot(path=str(SHOTS / "run.png"), full_page=True)


def test_a_run_of_one_endpoint_has_one_chart_and_one_score(site: Site, page: Any) -> None:
    page.goto(site.ranked["replay"]["url"])
    assert page.locator(".chart svg").count() == 1 and page.locator("#comparison").count() == 0
    assert page.locator(".score .big").inner_text() == "50.0%"


def test_the_episode_table_filters_by_task_and_outcome_and_sorts(site: Site, page: Any) -> None:
    page.goto(site.compared["replay"]["url"])
    page.select_option("#filter-task", "left")
    rows = visible_rows(page)
    assert len(rows) == 8 and {r["task"] for r in rows} == {"left"}
    page.select_option("#filter-outcome", "Failure")
    rows = visible_rows(page)
    # Rows pushes past 1000 and succeeds everywhere; the sampler fails on odd seeds.
    assert rows and all(
        r["task"] == "left" and r["outcome"] == "Failure" and int(r["seed"]) % 2 for r in rows
    )
    assert page.locator("#shown").inner_text() == f"{len(rows)} of 16 episodes"
    page.select_option("#filter-task", "")
    page.select_option("#filter-outcome", "")
    page.click("[data-sort=seed]")
    seeds = [int(r["seed"]) for r in visible_rows(page)]
    assert seeds == sorted(seeds) and len(seeds) == 16


def test_two_endpoints_are_compared_on_the_same_tasks_and_seeds(site: Site, page: Any) -> None:
    page.goto(site.compared["replay"]["url"])
    table = page.locator("#comparison")
    assert table.count() == 1
    text = table.inner_text()
    # rows 100% on every task, the sampler 50%: a paired difference of -50 points with its interval.
    assert "sampler − rows" in text and "-50.0 pts" in text
    page.locator("#comparison").screenshot(path=str(SHOTS / "comparison.png"))


def test_the_board_orders_rows_marks_baselines_and_links_replays(site: Site, page: Any) -> None:
    page.goto(f"{site.harness.url}/boards/toys.canvas")
    rows = page.eval_on_selector_all(
        "#board tbody tr",
        "rows => rows.map(r => ({cls: r.className, rank: r.querySelector('.rank').innerText,"
        " score: r.dataset.score, entry: r.cells[1].innerText, replay: !!r.querySelector('a.replay')}))",
    )
    assert len(rows) == 2
    baseline, ranked = rows  # the reference scores 100%, alice's sampler 50%: ordered by score
    assert baseline["cls"] == "baseline" and baseline["rank"] == "—" and "Physical Labs" in baseline["entry"]
    assert ranked["cls"] == "ranked" and ranked["rank"] == "1"
    assert float(baseline["score"]) > float(ranked["score"])
    assert all(r["replay"] for r in rows)
    page.screenshot(path=str(SHOTS / "board.png"), full_page=True)
    page.click("#board tbody tr.ranked a.replay")
    page.wait_for_url("**/v/*/")
    assert page.locator("#episodes tbody tr").count() == 8


def test_the_home_page_lists_boards_and_recent_runs(site: Site, page: Any) -> None:
    page.goto(site.harness.url + "/")
    text = page.inner_text("body")
    assert "Canvas" in text and "metaworld.mt10" in text
    page.click("text=Canvas")
    page.wait_for_url("**/boards/toys.canvas")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: the table scrolls, the page does not
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390 + 1
    page.screenshot(path=str(SHOTS / "board-phone.png"), full_page=True)
    page.goto(site.compared["replay"]["url"])
    assert page.evaluate("document.documentElement.scrollWidth") <= 390 + 1
    page.screenshot(path=str(SHOTS / "run-phone.png"))


def test_a_page_on_another_origin_reads_the_replay_data_videos_and_rankings(
    site: Site, page: Any, tmp_path: Path
) -> None:
    link = site.ranked["replay"]["url"]
    board = httpx.get(f"{site.harness.url}/v1/rankings.get", params={"board": "toys.canvas"}).json()
    data_url = next(r["replay"]["data_url"] for r in board["rankings"] if r["baseline"] is None)
    assert data_url == link + "data.json"
    (tmp_path / "index.html").write_text(
        """<!doctype html><meta charset="utf-8"><body><div id="out">loading</div><script>
        (async () => {
          const q = new URLSearchParams(location.search);
          const data = await (await fetch(q.get('data'))).json();
          const board = await (await fetch(q.get('api') + '/v1/rankings.get?board=toys.canvas')).json();
          const boards = await (await fetch(q.get('api') + '/v1/rankings.list')).json();
          const first = data.episodes[0].videos[0];
          const video = document.createElement('video');
          video.crossOrigin = 'anonymous'; video.muted = true; video.id = 'clip';
          video.src = new URL(first.src, data.url).href;
          document.body.appendChild(video);
          document.getElementById('out').textContent = JSON.stringify(
            {title: data.title, episodes: data.episodes.length,
             rows: board.rankings.length, boards: boards.boards.length});
        })().catch(e => { document.getElementById('out').textContent = 'failed: ' + e; });
        </script>"""
    )
    port = free_port()
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{port}/index.html?data={data_url}&api={site.harness.url}")
        page.wait_for_function("document.getElementById('out').textContent !== 'loading'", timeout=15_000)
        shown = page.inner_text("#out")
        assert not shown.startswith("failed"), shown
        loaded = json.loads(shown)
        assert loaded["episodes"] == 8 and loaded["rows"] == 2 and loaded["boards"] >= 1
        assert "Canvas" in loaded["title"]
        assert plays(page, "#clip") > 0.2  # a CORS video: it would refuse to load without the header
    finally:
        server.shutdown()


def test_replay_data_has_the_documented_shape(site: Site) -> None:
    data = httpx.get(site.ranked["replay"]["url"] + "data.json").json()
    assert set(data) >= {"title", "url", "about", "columns", "episodes"}
    assert all(set(item) == {"key", "label", "value"} for item in data["about"])
    keys = [c["key"] for c in data["columns"]]
    episode = data["episodes"][0]
    assert set(episode) >= {"index", "values", "duration_s", "videos"} and set(episode["values"]) <= set(keys)
    video = episode["videos"][0]
    assert {video["camera"] for video in episode["videos"]} == {"top", "side"}
    assert video["url"] == data["url"] + video["src"] and not video["src"].startswith("/")
    top = next(v for v in episode["videos"] if v["camera"] == "top")
    assert (top["width"], top["height"]) == (64, 48) and top["duration_s"] == pytest.approx(1.2, abs=0.15)
    fetched = httpx.get(video["url"])
    assert fetched.status_code == 200 and fetched.headers["content-type"] == "video/mp4"
    assert fetched.headers["access-control-allow-origin"] == "*"
    missing = httpx.get(data["url"] + "episodes/0/nope.mp4")
    assert missing.status_code == 404
    assert httpx.get(site.harness.url + "/v/not-a-token/data.json").status_code == 404


def test_recorded_files_are_listed_as_artifacts(site: Site) -> None:
    client = site.harness.client("alice")
    keys = [
        entry.key
        for entry in client.list_artifacts(site.ranked["id"], prefix="attempts/1/episodes/000000/").artifacts
    ]
    assert "attempts/1/episodes/000000/image.top.mp4" in keys
    assert "attempts/1/episodes/000000/trajectory.jsonl.gz" in keys


def test_report_html_plays_a_recorded_run_offline(page: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    ran = subprocess.run(
        [
            str(Path(sys.executable).parent / "yardstick"),
            "eval",
            "run",
            "--benchmark",
            f"{TOYS}:Canvas",
            "--policy",
            f"{TOYS}:Rows",
            "--trials",
            "1",
            "--record",
            "video",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stderr
    page.goto((out / "report.html").as_uri())
    assert page.locator("video").count() == 4  # two tasks × one trial × two cameras
    assert plays(page, "video") > 0.2
    page.screenshot(path=str(SHOTS / "report.png"), full_page=True)


def test_the_pairwise_ranking_ranks_the_blind_samples_policies_from_their_head_to_head_trials(
    site: Site, page: Any
) -> None:
    """The blind sample's three endpoints on the same four trials: rows and slow (Rows, thinking slowly)
    succeed everywhere, the sampler on even seeds only, so each beats it on the odd ones and ties the rest."""
    page.goto(f"{site.harness.url}/boards/toys.canvas")
    page.click("#pairwise-link")
    page.wait_for_selector("#pairwise tbody tr[data-policy]")
    rows = page.eval_on_selector_all("#pairwise tbody tr", "rows => rows.map(r => ({...r.dataset}))")
    names = [r["policy"].split(" (")[0] for r in rows]
    assert sorted(names[:2]) == ["rows", "slow"] and names[2] == "sampler"
    assert all(r["policy"].endswith("(alice#" + r["policy"].rsplit("#", 1)[1]) for r in rows)
    assert float(rows[2]["score"]) < float(rows[1]["score"]) == pytest.approx(float(rows[0]["score"]))
    table = {
        (r["a"].split(" (")[0], r["b"].split(" (")[0]): r
        for r in page.eval_on_selector_all(
            "#head-to-head tbody tr",
            "rows => rows.map(r => ({...r.dataset, cells: [...r.cells].map(c => c.innerText)}))",
        )
    }
    # (a, b, wins, ties, losses) from the first named: two odd-seed trials won over the sampler.
    assert table[("rows", "sampler")]["cells"][2:] == ["2", "2", "0"]
    assert table[("rows", "slow")]["cells"][2:] == ["0", "4", "0"]
    assert table[("sampler", "slow")]["cells"][2:] == ["0", "2", "2"]
    # rows and slow cannot be told apart: theirs is the pair to play next, and they share ranks 1-2.
    assert "rows" in page.locator("#next-pairs li").first.inner_text()
    assert "slow" in page.locator("#next-pairs li").first.inner_text()
    assert page.locator("#chart svg").count() == 1
    page.screenshot(path=str(SHOTS / "pairwise.png"), full_page=True)
    data = httpx.get(f"{site.harness.url}/boards/toys.canvas/pairwise.json", timeout=30).json()
    assert [s["policy"] for s in data["standings"]] == [r["policy"] for r in rows]
    assert data["games"] == 12 and data["runs"] == 1
    # Four trials decide little: a resample of the even seeds alone ties all three, so every rank is in doubt.
    assert all(s["rank_low"] <= s["rank"] <= s["rank_high"] for s in data["standings"])
    assert data["standings"][0]["rank_low"] == 1 and data["standings"][0]["rank_high"] >= 2


def test_a_blind_sample_ranks_on_no_board(site: Site, page: Any) -> None:
    page.goto(f"{site.harness.url}/boards/toys.canvas")
    ids = page.eval_on_selector_all("#board tbody tr", "rows => rows.length")
    assert site.blind["status"] == "finished" and ids == 2  # the ranked run and the baseline only


def test_a_policys_checkpoint_curve_flags_the_checkpoint_that_regressed(site: Site, page: Any) -> None:
    """pol@1000 is Rows (every trial), pol@2000 the sampler (even seeds only): of the 32 trials both played
    (16 a task, each seed four times), the 16 on odd seeds went to the earlier alone and none to the later,
    an exact paired p of 2/2^16."""
    page.goto(f"{site.harness.url}/boards/toys.curves")
    page.click("#curves-link")
    section = page.locator("section.curve")
    assert section.count() == 1 and section.get_attribute("data-policy").startswith("pol (alice#")
    rows = page.eval_on_selector_all(
        "section.curve tbody tr",
        "rows => rows.map(r => ({...r.dataset, cells: [...r.cells].map(c => c.innerText)}))",
    )
    assert [(r["checkpoint"], r["regressed"]) for r in rows] == [("1000", "no"), ("2000", "yes")]
    assert rows[0]["cells"][1] == "100.0%" and rows[1]["cells"][1] == "50.0%"
    assert "regressed against 1000" in rows[1]["cells"][4] and "p = 3.05e-05" in rows[1]["cells"][4]
    assert "regressed" in section.locator(".chart svg").inner_html()
    page.screenshot(path=str(SHOTS / "curves.png"), full_page=True)
    data = httpx.get(f"{site.harness.url}/boards/toys.curves/curves.json", timeout=30).json()
    points = data["curves"][0]["points"]
    assert points[1]["regression"] == {
        "against": "1000",
        "earlier_only": 16,
        "this_only": 0,
        "pairs": 32,
        "p_value": 2 / 2**16,
    }


def test_eval_status_json_says_where_a_run_stands_on_its_checkpoint_curves(site: Site) -> None:
    from typer.testing import CliRunner

    from yardstick.cli.main import app

    env = {
        "YARDSTICK_PLATFORM_URL": site.harness.url,
        "YARDSTICK_API_KEY": site.harness.keys["alice"],
        "POSITRONIC_PLATFORM_URL": None,
        "POSITRONIC_PLATFORM_API_KEY": None,
        "COLUMNS": "200",
    }
    ran = CliRunner().invoke(app, ["eval", "status", site.checkpoints["id"], "--json"], env=env)
    assert ran.exit_code == 0, ran.output
    view = json.loads(ran.stdout)
    assert view["status"] == "finished" and view["id"] == site.checkpoints["id"]
    by_endpoint = {p["endpoint"]: p for p in view["yardstick"]["checkpoints"]}
    assert by_endpoint["pol@1000"]["regression"] is None
    assert by_endpoint["pol@2000"]["regression"]["against"] == "1000"
    human = CliRunner().invoke(app, ["eval", "status", site.checkpoints["id"]], env=env)
    assert "pol@2000" in human.output and "regressed against 1000" in " ".join(human.output.split())
    # A run naming no checkpoint stands on no curve.
    other = CliRunner().invoke(app, ["eval", "status", site.ranked["id"], "--json"], env=env)
    own = json.loads(other.stdout)["yardstick"]
    assert own["checkpoints"] == [] and own["stopping"] is None
    assert list(own["endpoints"]) == ["policy"]  # its one endpoint's success with its interval
    assert own["endpoints"]["policy"]["interval"].endswith("clopper-pearson 95%")


def test_a_member_reads_a_public_boards_pairwise_ranking_with_their_orgs_private_runs(site: Site) -> None:
    """alice's private comparison (rows against the sampler, acme's) stands on no public page, but her key
    reads it beside the public blind sample; gina (another org) reads only the public one."""

    def pairwise(key: str | None) -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        answer = httpx.get(
            f"{site.harness.url}/yardstick/v1/boards/pairwise",
            params={"board": "toys.canvas"},
            headers=headers,
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        return answer.json()

    public = pairwise(None)
    assert public["runs"] == 1 and public["games"] == 12
    assert pairwise(site.harness.keys["gina"]) == public
    member = pairwise(site.harness.keys["alice"])
    assert member["runs"] == 2 and member["games"] == 12 + 8  # the comparison: 2 tasks x 4 trials, one pair
    page = httpx.get(f"{site.harness.url}/boards/toys.canvas/pairwise.json", timeout=30).json()
    assert page["runs"] == 1
