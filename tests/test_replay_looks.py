"""A MuJoCo replay's looks, recorded in a local run (`yardstick eval run --record replay`): the benchmark's
`replay` looks method is asked at every frame (`looks()`, or `looks(world)` for a vectorized benchmark) and
the replay keeps what changed since the frame before; a looks method gone wrong costs the replay, saying why,
never the episode. And a benchmark declaring a SAPIEN replay, which Yardstick does not read, plays on and
is told so by name in each episode's recording error. The benchmarks are `looks_bench.py`'s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import yardstick as ys
from looks_bench import BLUE, GREEN, RED, STEPS
from yardstick.cli.main import app
from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.engine.recording import Recording
from yardstick.engine.results import EpisodeResult
from yardstick.replay3d import format as replay_format
from yardstick.sdk import SpecError

BENCH = Path(__file__).resolve().parent / "looks_bench.py"
POLICY = f"{BENCH}:Push"


def run(benchmark: str, folder: Path, trials: int = 1) -> list[EpisodeResult]:
    """`trials` episodes of `benchmark` (on its first seeds) in this process, its replays and trajectories
    recorded."""
    recording = Recording(replay=True, trajectory=True, folder=str(folder))
    work = Work(Component(f"{BENCH}:{benchmark}"), Component(POLICY), recording=recording)
    outcome = evaluate(RunRequest(work=work, trials=trials, workers=0))
    assert outcome.complete
    return sorted(outcome.results, key=lambda r: r.index)


def test_the_looks_are_in_the_replay_at_the_frames_they_change(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    ran = CliRunner().invoke(
        app,
        [
            *("eval", "run", "-b", f"{BENCH}:LooksBench", "-p", POLICY, "--trials", "2", "--in-process"),
            *("--record", "replay", "--out", str(folder)),
        ],
    )
    assert ran.exit_code == 0, ran.output
    recording = json.loads((folder / "report.json").read_text())["recording"]
    assert recording["replays"] == 2 and recording["problems"] == []
    for index in range(2):
        replay = replay_format.read(folder / "episodes" / f"{index:06d}" / "replay.seqreplay")
        assert replay.frames == STEPS + 1 and replay.step.tolist() == list(range(STEPS + 1))
        # Said whole at every frame; kept where it changed: everything at the reset's frame, the cart red
        # from step 2, the ball hidden from step 3, nothing after.
        assert replay.looks == [
            (0, "cart", {"rgba": BLUE}),
            (0, "ball", {"visible": True}),
            (2, "cart", {"rgba": RED}),
            (3, "ball", {"visible": False}),
        ]


def test_a_vectorized_benchmarks_looks_are_each_worlds_own(tmp_path: Path) -> None:
    results = run("ManyCarts", tmp_path, trials=4)
    assert [r.seed for r in results] == [0, 1, 2, 3]
    for result in results:
        assert result.success and result.recording_error is None
        replay = replay_format.read(tmp_path / next(a for a in result.artifacts if a.endswith(".seqreplay")))
        assert replay.frames == STEPS + 1
        assert replay.looks == [(0, "cart", {"rgba": GREEN if result.seed % 2 else BLUE})]


@pytest.mark.parametrize(
    ("benchmark", "reason"),
    [
        ("RaisingLooks", "replay: LooksFailed: the looks method raised RuntimeError: the paint ran out"),
        ("ListedLooks", "replay: LooksFailed: the looks method answers {node: {'rgba': [r, g, b, a]}}"),
        ("ThreeColours", "looks['cart'].rgba: four numbers in [0, 1], not [1.0, 0.0, 0.0]"),
    ],
)
def test_a_looks_method_gone_wrong_drops_the_replay_saying_why_and_the_episode_plays_on(
    tmp_path: Path, benchmark: str, reason: str
) -> None:
    (result,) = run(benchmark, tmp_path)
    assert result.success and result.error is None and result.steps == STEPS
    assert result.artifacts == ["episodes/000000/trajectory.jsonl.gz"]  # no replay, no scene
    assert result.recording_error is not None and reason in result.recording_error, result.recording_error
    assert not list(tmp_path.rglob("*.seqreplay")) and not list(tmp_path.rglob("*.glb"))


def test_a_sapien_replay_plays_on_and_each_episode_says_yardstick_does_not_read_it(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    ran = CliRunner().invoke(
        app,
        [
            *("eval", "run", "-b", f"{BENCH}:SapienDeclared", "-p", POLICY, "--trials", "2", "--in-process"),
            *("--record", "replay,trajectory", "--out", str(folder)),
        ],
    )
    assert ran.exit_code == 0, ran.output
    recording = json.loads((folder / "report.json").read_text())["recording"]
    assert recording["replays"] == 0 and recording["files"] == 2  # the two trajectories
    (problem,) = recording["problems"]
    assert problem["episodes"] == [0, 1]
    assert problem["problem"].startswith(
        "replay: NoReplay: benchmark SapienDeclared declares replay engine 'sapien': Yardstick reads MuJoCo "
        "and hands-over ('own') replays only"
    ), problem
    assert not list(folder.rglob("*.seqreplay"))


def test_a_looks_names_a_method_the_class_has() -> None:
    with pytest.raises(SpecError, match=r"replay\.looks.*has no colours"):

        @ys.benchmark(
            tasks={"t": "t"},
            seeds=[0],
            max_seconds=1.0,
            replay={"engine": "mujoco", "state": "sim", "looks": "colours"},
        )
        class Missing:
            def sim(self) -> None: ...

            @ys.reset
            def reset(self, task: str, seed: int) -> None: ...

            @ys.step
            def step(self, action: object) -> None: ...
