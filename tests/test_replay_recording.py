"""Recording 3D replays in a run: `yardstick eval run --record replay` writes each episode's `.seqreplay` and
the scene it is drawn in, for the MuJoCo benchmarks shipped; a seed's replay is the same when rerun, in a
pool or in this process; a replayed frame covers the pixels MuJoCo draws of that step; a benchmark that
declares no replay loses nothing but the replay, and is told why."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import yardstick as ys
from silhouettes import free_camera, iou, mujoco_mask, replay_mask
from yardstick.cli.main import app
from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.engine.recording import Recording, episode_folder
from yardstick.replay3d import format as replay_format
from yardstick.sdk import SpecError

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve()
TASKS = "reach-v3,push-v3"


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MT10's expert on two tasks, two trials each, recorded by the CLI on two worker processes."""
    folder = tmp_path_factory.mktemp("pooled") / "run"
    result = CliRunner().invoke(
        app,
        [
            *("eval", "run", "-b", "mt10", "-p", "expert", "--tasks", TASKS, "--trials", "2"),
            *("--workers", "2", "--record", "replay", "--out", str(folder)),
        ],
    )
    assert result.exit_code == 0, result.output
    return folder


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same run again, in this process."""
    folder = tmp_path_factory.mktemp("in-process") / "run"
    work = Work(Component("mt10"), Component("expert"), recording=Recording(replay=True, folder=str(folder)))
    outcome = evaluate(RunRequest(work=work, tasks=TASKS.split(","), trials=2, workers=0))
    assert outcome.complete and all(r.recording_error is None for r in outcome.results)
    return folder


def episodes(folder: Path) -> list[dict[str, str]]:
    with (folder / "episodes.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_every_episode_has_its_replay_and_the_scene_it_is_drawn_in(pooled: Path) -> None:
    recording = json.loads((pooled / "report.json").read_text())["recording"]
    assert recording["replay"] and recording["replays"] == 4 and recording["problems"] == []
    for episode in episodes(pooled):
        replay = replay_format.read(episode_folder(pooled, int(episode["index"])) / "replay.seqreplay")
        # A frame after the reset and one a step, stamped with the robot's clock (80 Hz).
        steps = int(episode["steps"])
        assert replay.frames == steps + 1
        assert replay.step.tolist() == list(range(replay.frames))
        assert replay.t[-1] == pytest.approx(steps / 80)
        assert replay.engine == "mujoco" and replay.meta == {"hz": 80.0}
        assert {"right_l6", "rightclaw", "leftclaw", "obj"} <= set(replay.nodes)
        scene = pooled / "scenes" / f"{replay.scene_sha256}.glb"
        assert hashlib.sha256(scene.read_bytes()).hexdigest() == replay.scene_sha256
        assert scene.read_bytes()[:4] == b"glTF"
        # The hand moves during an episode; the replay says so.
        hand = replay.nodes.index("right_l6")
        assert np.linalg.norm(replay.pos[-1, hand] - replay.pos[0, hand]) > 0.01
    assert not list(pooled.rglob("*.partial"))


def test_a_seed_replays_the_same_rerun_in_a_pool_or_in_process(pooled: Path, in_process: Path) -> None:
    for index in range(4):
        name = Path("episodes") / f"{index:06d}" / "replay.seqreplay"
        assert (pooled / name).read_bytes() == (in_process / name).read_bytes()
    assert sorted(p.name for p in (pooled / "scenes").iterdir()) == sorted(
        p.name for p in (in_process / "scenes").iterdir()
    )


def test_a_replayed_frame_covers_what_mujoco_draws_of_that_step(pooled: Path) -> None:
    import mujoco
    from metaworld.policies import ENV_POLICY_MAP

    from yardstick.catalog.metaworld import MT10

    episode = next(e for e in episodes(pooled) if e["task"] == "push-v3")
    replay = replay_format.read(episode_folder(pooled, int(episode["index"])) / "replay.seqreplay")
    scene = (pooled / "scenes" / f"{replay.scene_sha256}.glb").read_bytes()
    # The episode played again here, to the middle of it: the state MuJoCo draws.
    bench, expert = MT10(), ENV_POLICY_MAP["push-v3"]()
    obs = bench.reset("push-v3", int(episode["seed"]))
    middle = replay.frames // 2
    for _ in range(middle):
        obs, *_ = bench.step(expert.get_action(obs["state"]))
    env = bench.replay_state()
    height = width = 96
    renderer = mujoco.Renderer(env.model, height, width)
    try:
        from yardstick.replay3d.mujoco_scene import scene_of

        camera = free_camera((0.0, 0.6, 0.2), 1.6, 120, -30)
        recorded = scene_of(env.model).recorded_bodies
        model = env.model
        moved = np.asarray([b for b in recorded if model.body_jntnum[b] > 0 or model.body_mocapid[b] >= 0])
        truth, view = mujoco_mask(renderer, model, env.data, camera, recorded)
        truth_moved, _ = mujoco_mask(renderer, model, env.data, camera, moved)
        moved_names = {replay.nodes[i] for i, b in enumerate(recorded) if b in moved}
    finally:
        renderer.close()
        bench.close()

    def drawn(frame: int, only: set[str] | None = None) -> np.ndarray:
        poses = {
            n: (replay.pos[frame, i], replay.quat[frame, i])
            for i, n in enumerate(replay.nodes)
            if only is None or n in only
        }
        return replay_mask(scene, poses, view, height, width)

    assert truth.sum() > truth_moved.sum() > 500  # the table, the wall, the robot's base: fixtures drawn too
    assert iou(truth, drawn(middle)) > 0.95
    assert iou(truth_moved, drawn(middle, moved_names)) > 0.95
    # Another frame is told apart by what moves.
    assert iou(truth_moved, drawn(0, moved_names)) < iou(truth_moved, drawn(middle, moved_names)) - 0.1


def test_a_fixture_placed_anew_each_seed_stands_in_its_replay_where_that_seed_put_it(tmp_path: Path) -> None:
    """Meta-World places door-open's door by its body's position, another place each seed: the door is a node
    of its own that each episode's replay places, in one scene for every seed (not drawn where the
    process's first episode had it)."""
    import mujoco

    from yardstick.catalog.metaworld import MT10
    from yardstick.engine.recording import EpisodeRecorder

    bench = MT10()
    recording = Recording(replay=True, folder=str(tmp_path))
    scenes, places = set(), []
    try:
        for index, seed in enumerate((0, 1)):
            bench.reset("door-open-v3", seed)
            recorder = EpisodeRecorder.open(recording, index, bench.hz, state=bench.replay_state)
            recorder.frame(0, 0.0, None)
            for step in range(1, 4):
                bench.step(np.zeros(4))
                recorder.frame(step, step / bench.hz, None)
            assert recorder.close() and recorder.error is None
            replay = replay_format.read(episode_folder(tmp_path, index) / "replay.seqreplay")
            env = bench.replay_state()
            door = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, "door")
            place = replay.pos[-1, replay.nodes.index("door")]
            assert np.abs(place - env.data.xpos[door]).max() < 1e-3
            scenes.add(replay.scene_sha256)
            places.append(place)
    finally:
        bench.close()
    assert np.linalg.norm(places[0] - places[1]) > 0.01  # the seeds put the door in two places
    assert len(scenes) == 1 and (tmp_path / "scenes" / f"{scenes.pop()}.glb").is_file()


@ys.benchmark(tasks={"drift": "drift for three steps"}, seeds=range(2), max_seconds=1.0)
class NoSimulator:
    def __init__(self) -> None:
        self.t = 0

    @ys.reset
    def start(self, task: str, seed: int) -> dict[str, Any]:
        self.t = 0
        return {"state": np.zeros(2)}

    @ys.step
    def move(self, action: Any) -> tuple[dict[str, Any], bool, bool]:
        self.t += 1
        return {"state": np.full(2, self.t)}, self.t >= 3, True


@ys.policy(hz=10)
class Still:
    @ys.infer
    def act(self, obs: Any) -> np.ndarray:
        return np.zeros((1, 2))


def test_a_benchmark_without_a_replay_declared_plays_on_and_says_how_to_declare_one(tmp_path: Path) -> None:
    work = Work(
        Component(f"{HERE}:NoSimulator"),
        Component(f"{HERE}:Still"),
        recording=Recording(replay=True, trajectory=True, folder=str(tmp_path)),
    )
    outcome = evaluate(RunRequest(work=work, trials=1, workers=0))
    result = outcome.results[0]
    assert result.success and result.error is None
    assert result.artifacts == ["episodes/000000/trajectory.jsonl.gz"]
    assert result.recording_error is not None
    assert "declares no replay state: @benchmark(..., replay=" in result.recording_error


def test_a_replay_state_names_a_method_the_class_has() -> None:
    with pytest.raises(SpecError, match=r"replay\.state.*has no simulation"):

        @ys.benchmark(tasks={"t": "t"}, seeds=[0], max_seconds=1.0, replay={"state": "simulation"})
        class Missing(NoSimulator):
            pass


def test_pusht_hands_its_flat_scene_and_the_shapes_poses_every_step(tmp_path: Path) -> None:
    """PushT (2D) records a replay of its own (engine "own"): `yardstick eval run --record replay` writes its
    scene (board, goal, the T and the agent laid flat) and a frame a step of the block's and agent's poses."""
    pytest.importorskip("gym_pusht")
    folder = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            *("eval", "run", "-b", "pusht", "-p", "heuristic", "--trials", "1", "--in-process"),
            *("--record", "replay", "--out", str(folder)),
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = episodes(folder)
    replay = replay_format.read(folder / "episodes" / "000000" / "replay.seqreplay")
    assert replay.engine == "own" and replay.nodes == ["block", "agent"]
    assert replay.frames == int(row["steps"]) + 1 and replay.step.tolist() == list(range(replay.frames))
    assert replay.t[1] == pytest.approx(0.1)  # PushT plays at 10 Hz
    scene = folder / "scenes" / f"{replay.scene_sha256}.glb"
    assert hashlib.sha256(scene.read_bytes()).hexdigest() == replay.scene_sha256
    # The heuristic pushes the T onto its goal (256, 256 px: 0.256 m a side on the board), flat on it.
    assert row["success"] in ("True", "true", "1")
    assert np.abs(replay.pos[-1, 0] - [0.256, 0.256, 0.0]).max() < 0.02
    assert not np.allclose(replay.pos[0], replay.pos[-1])
