"""3D replays through the Sequences door with the real `seq` CLI: an uploaded MuJoCo benchmark
(`seq.Replay(engine="mujoco", state=...)`) records a `.seqreplay` per episode in its box by default, and
`seq eval report --replays DIR` saves them with the `.glb` scene they are drawn in; a benchmark that hands
its frames itself (`seq.Replay(engine="own")`, `seq.replay.scene` / `seq.replay.frame`) gets them back as it
gave them; `--replay none` records none. Files read back with our own reader (`replay3d.format`)."""

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

from conftest import fresh_database
from hosted_helpers import eval_id_of, seq_cli
from platform_harness import Harness, running_platform
from yardstick.replay3d import format as replay_format

EXAMPLES = Path(__file__).parent / "seq_examples"
TARGETS = {"left": -0.5, "right": 0.5}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """One platform a store, the two benchmarks and the policy deployed on it."""
    folder = tmp_path_factory.mktemp(request.param)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, per_day=200) as harness:
        harness.wait_for_workers(60)
        for name in ("mujoco-bench", "own-bench", "reach-policy"):
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
