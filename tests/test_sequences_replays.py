"""3D replays through the Sequences door with the real `seq` CLI: an uploaded MuJoCo benchmark
(`seq.Replay(engine="mujoco", state=...)`) records a `.seqreplay` per episode in its box by default, and
`seq eval report --replays DIR` saves them with the `.glb` scene they are drawn in; its `looks=` method's
changes are in the replay at the frames they happen, and a looks method gone wrong costs the replay, saying
why, never the episode; a benchmark that hands its frames itself (`seq.Replay(engine="own")`,
`seq.replay.scene` / `seq.replay.frame`) gets them back as it gave them; `--replay none` records none; a
SAPIEN replay, which Yardstick does not read, is refused by name unless the eval says `--replay none`. Files
read back with our own reader (`replay3d.format`)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from sqlalchemy import select

from conftest import fresh_database, one_database
from hosted_helpers import eval_id_of, seq_cli
from platform_harness import Harness, running_platform
from yardstick.replay3d import format as replay_format
from yardstick.sequences.eval_report import run_id_of
from yardstick.store.models import RunEpisode

EXAMPLES = Path(__file__).parent / "seq_examples"
TARGETS = {"left": -0.5, "right": 0.5}
BLUE, RED = [0.2, 0.4, 0.8, 1.0], [1.0, 0.0, 0.0, 1.0]  # looks-bench's cart


@pytest.fixture(scope="module", params=one_database("postgresql"))
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """One platform a store, the two benchmarks and the policy deployed on it."""
    folder = tmp_path_factory.mktemp(request.param)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, per_day=200) as harness:
        harness.wait_for_workers(60)
        for name in ("mujoco-bench", "looks-bench", "own-bench", "sapien-bench", "reach-policy"):
            shutil.copytree(EXAMPLES / name, folder / name)
            ok(harness, "deploy", str(folder / name))
        yield harness


def ok(platform: Harness, *args: str) -> str:
    done: subprocess.CompletedProcess[str] = seq_cli(platform.url, platform.keys["alice"], *args)
    assert done.returncode == 0, f"seq {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def details(platform: Harness, eval_id: str) -> dict[str, object]:
    headers = {"Authorization": f"Bearer {platform.keys['alice']}"}
    answer = httpx.get(f"{platform.url}/v1/eval/{eval_id}/details", headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    found: dict[str, object] = answer.json()
    return found


def replay_errors(platform: Harness, eval_id: str) -> list[list[str]]:
    """Each episode's recording error's lines about its replay, as the platform keeps them with its result
    (these benchmarks show no camera, so each also says it wrote no video)."""
    run_id = run_id_of(eval_id)
    with platform.platform.db.reading() as session:
        found = session.execute(
            select(RunEpisode).where(RunEpisode.submission_id == run_id).order_by(RunEpisode.index)
        ).scalars()
        errors = [(episode.result or {}).get("recording_error") or "" for episode in found]
    return [[line for line in error.splitlines() if line.startswith("replay")] for error in errors]


def saved(folder: Path) -> tuple[list[Path], list[Path]]:
    return sorted(folder.glob("*.seqreplay")), sorted((folder / "scenes").glob("*.glb"))


def reached(seed: int, task: str) -> list[float]:
    """The pointer's x at each frame as own-bench plays reach-policy: from 0.01 × seed, steps of at most 0.1
    toward the target, until within 0.05 of it."""
    xs, target = [0.01 * seed], TARGETS[task]
    while abs(xs[-1] - target) >= 0.05:
        xs.append(xs[-1] + max(-0.1, min(0.1, target - xs[-1])))
    return xs


def test_a_mujoco_benchmark_records_a_replay_an_episode_by_default_and_the_cli_saves_them(
    platform: Harness, tmp_path: Path
) -> None:
    eval_id = eval_id_of(
        ok(platform, "eval", "run", "reach-policy", "--benchmark", "mujoco-bench", "--trials", "1")
    )
    episodes = details(platform, eval_id)["episodes"]
    assert isinstance(episodes, list) and len(episodes) == 2
    assert all(e["replay"] is True and re.fullmatch(r"[0-9a-f]{64}", e["scene_sha256"]) for e in episodes)

    out = ok(platform, "eval", "report", eval_id, "--replays", str(tmp_path))
    assert "saved 2 replays" in out, out
    replays, scenes = saved(tmp_path)
    assert [p.name for p in replays] == [f"eval-{eval_id[:8]}-{e['index']}.seqreplay" for e in episodes]
    assert len(scenes) == 1 and hashlib.sha256(scenes[0].read_bytes()).hexdigest() == scenes[0].stem
    assert scenes[0].read_bytes()[:4] == b"glTF"
    for path in replays:
        replay = replay_format.read(path)
        assert replay.engine == "mujoco" and replay.scene_sha256 == scenes[0].stem
        assert replay.nodes == ["cart", "ball"]
        # Frame 0 is the reset's, then one a step; the cart moves along x, the ball falls.
        assert replay.step.tolist() == list(range(replay.frames)) and replay.frames >= 2
        assert replay.pos[-1, 0, 0] != replay.pos[0, 0, 0]
        assert replay.pos[-1, 1, 2] < replay.pos[0, 1, 2]


def test_an_own_benchmarks_frames_come_back_as_it_gave_them(platform: Harness, tmp_path: Path) -> None:
    eval_id = eval_id_of(
        ok(platform, "eval", "run", "reach-policy", "--benchmark", "own-bench", "--trials", "1")
    )
    ok(platform, "eval", "report", eval_id, "--replays", str(tmp_path))
    replays, scenes = saved(tmp_path)
    assert len(replays) == 2 and len(scenes) == 1
    glb = scenes[0].read_bytes()
    (length,) = struct.unpack("<I", glb[12:16])
    assert [n["name"] for n in json.loads(glb[20 : 20 + length])["nodes"]] == ["seq_root", "pointer"]
    rows = {e["index"]: e for e in details(platform, eval_id)["episodes"]}  # type: ignore[union-attr]
    for path in replays:
        row = rows[int(path.stem.rsplit("-", 1)[1])]
        replay = replay_format.read(path)
        xs = reached(int(row["seed"]), str(row["task"]))
        assert (
            replay.engine == "own" and replay.nodes == ["pointer"] and replay.scene_sha256 == scenes[0].stem
        )
        assert replay.step.tolist() == list(range(len(xs))) and replay.t.tolist() == [
            s / 10 for s in range(len(xs))
        ]
        # As given, on the file's 0.05 mm grid: x as it went, y and z as they were, the orientation unturned.
        assert np.abs(replay.pos[:, 0, 0] - xs).max() <= replay_format.POS_UNIT
        assert np.allclose(replay.pos[:, 0, 1:], [0.0, 0.1], atol=replay_format.POS_UNIT)
        assert np.array_equal(replay.quat[:, 0], np.tile([1.0, 0.0, 0.0, 0.0], (len(xs), 1)))
        assert replay.looks == [(len(xs) - 1, "pointer", {"rgba": [0.0, 1.0, 0.0, 1.0]})]


def test_replay_none_records_none(platform: Harness, tmp_path: Path) -> None:
    run = ok(
        platform,
        "eval",
        "run",
        "reach-policy",
        "--benchmark",
        "mujoco-bench",
        "--trials",
        "1",
        "--replay",
        "none",
    )
    eval_id = eval_id_of(run)
    assert not any(e["replay"] for e in details(platform, eval_id)["episodes"])  # type: ignore[union-attr]
    out = ok(platform, "eval", "report", eval_id, "--replays", str(tmp_path))
    assert "no 3D replays" in out, out
    assert saved(tmp_path) == ([], [])
    # Asked for by path all the same, an episode without one is not found, saying so.
    headers = {"Authorization": f"Bearer {platform.keys['alice']}"}
    answer = httpx.get(f"{platform.url}/v1/eval/{eval_id}/replays/0", headers=headers, timeout=60)
    assert answer.status_code == 404 and "has no replay.seqreplay" in answer.text, answer.text


def test_a_benchmarks_looks_are_in_its_replays_at_the_frames_they_change(
    platform: Harness, tmp_path: Path
) -> None:
    eval_id = eval_id_of(
        ok(platform, "eval", "run", "reach-policy", "--benchmark", "looks-bench", "--trials", "1")
    )
    ok(platform, "eval", "report", eval_id, "--replays", str(tmp_path))
    replays, scenes = saved(tmp_path)
    assert len(replays) == 2 and len(scenes) == 1
    assert replay_errors(platform, eval_id) == [[], []]
    for path in replays:
        replay = replay_format.read(path)
        assert replay.engine == "mujoco" and replay.nodes == ["cart", "ball"]
        assert replay.step.tolist() == list(range(replay.frames)) and replay.frames >= 5
        # Its looks method says all of it at every frame; the replay keeps what changed: everything at the
        # reset's frame, the cart turned red at step 2, the ball hidden at step 3, nothing after.
        assert replay.looks == [
            (0, "cart", {"rgba": BLUE}),
            (0, "ball", {"visible": True}),
            (2, "cart", {"rgba": RED}),
            (3, "ball", {"visible": False}),
        ]


@pytest.mark.parametrize(
    ("mistake", "reason"),
    [
        ("raise", "replay: LooksFailed: the looks method raised RuntimeError: the paint ran out"),
        ("shape", "replay: LooksFailed: the looks method answers {node: {'rgba': [r, g, b, a]}}"),
    ],
)
def test_a_looks_method_gone_wrong_drops_the_replay_saying_why_and_the_episodes_are_scored(
    platform: Harness, mistake: str, reason: str
) -> None:
    run = ok(
        platform,
        *("eval", "run", "reach-policy", "--benchmark", "looks-bench", "--trials", "1"),
        *("--param", f"benchmark.mistake={mistake}"),
    )
    eval_id = eval_id_of(run)
    episodes = details(platform, eval_id)["episodes"]
    assert isinstance(episodes, list) and len(episodes) == 2
    assert all(e["replay"] is False and e["error"] is None and e["success"] is True for e in episodes)
    errors = replay_errors(platform, eval_id)
    assert len(errors) == 2 and all(len(lines) == 1 and reason in lines[0] for lines in errors), errors
    # Its owner reads why in the episodes' details and in `seq eval logs`, each episode's line.
    assert all(reason in str(e["recording_error"]) for e in episodes), episodes
    said = [line for line in ok(platform, "eval", "logs", eval_id).splitlines() if "its recording:" in line]
    assert len(said) == 2 and all(reason in line for line in said), said


def test_a_sapien_replay_is_refused_by_name_and_runs_with_replay_none(
    platform: Harness, tmp_path: Path
) -> None:
    asked = ("eval", "run", "reach-policy", "--benchmark", "sapien-bench", "--trials", "1")
    refused = seq_cli(platform.url, platform.keys["alice"], *asked)
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 1 and "error[dependency_missing]" in said, said
    assert (
        "replay: sapien-bench declares seq.Replay(engine='sapien'): Yardstick reads MuJoCo and hands-over "
        "(engine='own') replays only" in said
    ), said
    assert "--replay none runs it without one" in said, said

    eval_id = eval_id_of(ok(platform, *asked, "--replay", "none"))
    episodes = details(platform, eval_id)["episodes"]
    assert isinstance(episodes, list) and len(episodes) == 2
    assert all(e["replay"] is False and e["success"] is True for e in episodes)
    assert replay_errors(platform, eval_id) == [[], []]
    assert "no 3D replays" in ok(platform, "eval", "report", eval_id, "--replays", str(tmp_path))


def test_the_benchmark_listings_say_which_record_a_3d_replay(platform: Harness) -> None:
    """`replay` of `seq benchmark ls` rows and of `seq benchmark tasks` is "3d" where its evals record
    one here (a MuJoCo or hands-over replay, a catalogue benchmark declaring one), None where they do not (a
    SAPIEN replay, which Yardstick does not read; a catalogue eval whose benchmark declares none)."""
    rows = json.loads(ok(platform, "--json", "benchmark", "ls"))["benchmarks"]
    listed = {row["name"]: row["replay"] for row in rows}
    assert listed["mujoco-bench"] == listed["own-bench"] == listed["looks-bench"] == "3d", listed
    assert listed["sapien-bench"] is None, listed
    for name, said in (("mujoco-bench", "3d"), ("own-bench", "3d"), ("sapien-bench", None)):
        assert json.loads(ok(platform, "--json", "benchmark", "tasks", name))["replay"] == said, name
    assert "records its 3D replay" in ok(platform, "benchmark", "tasks", "mujoco-bench")
    assert "records its 3D replay" not in ok(platform, "benchmark", "tasks", "sapien-bench")
    # The catalogue: a toy that declares no replay, though its evals record video.
    assert json.loads(ok(platform, "--json", "benchmark", "tasks", "toys.canvas"))["replay"] is None
