"""3D replays a benchmark declares through `seq.Replay` and hands over itself: `seq.Replay(...)` as the
engine records it (MuJoCo read through `state`, "own" frames handed, SAPIEN and Isaac kept as declared), the
receiver that takes `seq.replay.scene` / `seq.replay.frame` in a run (a bad frame ends the replay, never the
episode), and a boxed episode's replay and scene arriving on the box's channel (`worker.boxes.inbound`)."""

from __future__ import annotations

import base64
import hashlib
import sys
from pathlib import Path
from typing import Any

import pytest

from yardstick.engine import Component, RunRequest, Work, evaluate
from yardstick.engine.recording import Recording
from yardstick.replay3d import format as replay_format
from yardstick.sdk.decorators import benchmark_spec
from yardstick.sdk.specs import ReplaySpec
from yardstick.worker.boxes.inbound import Inbound

EXAMPLES = Path(__file__).parent / "seq_examples"
SHIM = Path(__file__).parent.parent / "src" / "yardstick" / "hosted" / "shim"
POLICY = Component(f"{EXAMPLES}/reach-policy/policy.py:ReachPolicy")


@pytest.fixture(scope="module")
def seq() -> Any:
    sys.path.insert(0, str(SHIM))
    import seq as module

    return module


def bench(seq: Any, **kwargs: Any) -> type:
    @seq.benchmark(tasks={"t": ""}, seeds=[0], max_seconds=1.0, **kwargs)
    class Bench:
        def sim(self) -> Any: ...

        @seq.reset
        def reset(self, task: str, seed: int) -> Any: ...

        @seq.step
        def step(self, action: Any) -> Any: ...

    return Bench


def test_seq_replay_is_recorded_as_the_engine_reads_it(seq: Any) -> None:
    def read(**kwargs: Any) -> ReplaySpec | None:
        return benchmark_spec(bench(seq, **kwargs)).replay

    mujoco = ReplaySpec(engine="mujoco", state="sim", looks=None)
    assert read(replay=seq.Replay(engine="mujoco", state="sim")) == mujoco
    assert read(replay=seq.Replay(state="sim")) == mujoco  # the one simulation Yardstick reads
    assert (
        read(engine="robosuite", replay=seq.Replay(state="sim")) == mujoco
    )  # read as MuJoCo, as the SDK says
    assert read(replay=seq.Replay(engine="own")) == ReplaySpec(engine="own", state=None, looks=None)
    # SAPIEN and Isaac kept as declared (ManiSkill read as SAPIEN): an eval asked to record one is refused.
    sapien = ReplaySpec(engine="sapien", state="sim", looks=None)
    assert read(replay=seq.Replay(engine="sapien", state="sim")) == sapien
    assert read(engine="mani_skill", replay=seq.Replay(state="sim")) == sapien
    assert read(replay=seq.Replay(engine="isaac", state="sim")) == ReplaySpec(engine="isaac", state="sim")
    assert read(replay=seq.Replay(engine="mujoco", state="sim", looks="sim")) == ReplaySpec(
        engine="mujoco", state="sim", looks="sim"
    )
    assert read() is None
    for engine in ("mujoco", "sapien", "isaac"):
        with pytest.raises(seq.BenchmarkDefinitionError, match=rf"replay\.state.*engine=\"{engine}\""):
            bench(seq, replay=seq.Replay(engine=engine))


def test_frames_handed_over_are_the_episodes_replay_in_a_run(tmp_path: Path) -> None:
    work = Work(
        Component(f"{EXAMPLES}/own-bench/benchmark.py:OwnBench"),
        POLICY,
        recording=Recording(replay=True, folder=str(tmp_path)),
    )
    outcome = evaluate(RunRequest(work=work, trials=1, workers=0))
    assert outcome.complete and all(r.recording_error is None for r in outcome.results)
    for result in outcome.results:
        replay = replay_format.read(tmp_path / result.artifacts[0])
        scene = tmp_path / result.artifacts[1]
        assert replay.scene_sha256 == hashlib.sha256(scene.read_bytes()).hexdigest() == scene.stem
        assert replay.frames == result.steps + 1  # the reset's frame, then one a step


class Mistaken:
    """Hands a frame whose nodes change mid-episode: its replay ends saying why, its episodes play on."""

    def __init__(self) -> None:
        self.x = 0.0

    def reset(self, task: str, seed: int) -> Any:
        from yardstick.sdk import replay

        self.x = 0.0
        replay.frame(0, 0.0, ["a"], [[0, 0, 0]], [[1, 0, 0, 0]])
        return {"x": self.x, "target": 0.3}

    def step(self, action: Any) -> Any:
        from yardstick.sdk import replay

        self.x += float(action[0])
        replay.frame(0, 0.1, ["b"], [[self.x, 0, 0]], [[1, 0, 0, 0]])
        return {"x": self.x, "target": 0.3}, self.x >= 0.25, self.x >= 0.25


def test_a_bad_frame_ends_the_replay_not_the_episode(tmp_path: Path) -> None:
    import yardstick.sdk.decorators as ys

    ys.reset(Mistaken.reset)
    ys.step(Mistaken.step)
    ys.benchmark(tasks={"t": ""}, seeds=[0], max_seconds=1.0, replay={"engine": "own"})(Mistaken)
    work = Work(
        Component(f"{__name__}:Mistaken"), POLICY, recording=Recording(replay=True, folder=str(tmp_path))
    )
    result = evaluate(RunRequest(work=work, trials=1, workers=0)).results[0]
    assert result.success and result.error is None and result.artifacts == []
    assert result.recording_error is not None and "the same names every frame" in result.recording_error


class Lit:
    """Hands its frames with a look of its own at the reset and names a looks method beside them, which says
    the pointer turns from red to green once it passes 0.15 (a `bad` instance answers a list instead). Its
    frame after step `blue_at` turns the pointer blue itself; it hands a frame after every step (the odd
    ones only where `odd_only`) and the reset's."""

    bad = False
    odd_only = False
    blue_at: int | None = 3

    def __init__(self) -> None:
        self.x, self.steps = 0.0, 0

    def reset(self, task: str, seed: int) -> Any:
        from yardstick.sdk import replay

        self.x, self.steps = 0.0, 0
        replay.frame(0, 0.0, ["pointer"], [[0, 0, 0]], [[1, 0, 0, 0]], looks={"pointer": {"visible": True}})
        return {"x": self.x, "target": 0.3}

    def step(self, action: Any) -> Any:
        from yardstick.sdk import replay

        self.x += float(action[0])
        self.steps += 1
        if not self.odd_only or self.steps % 2 == 1:
            blue = {"pointer": {"rgba": [0, 0, 1, 1]}} if self.steps == self.blue_at else None
            replay.frame(0, self.steps / 10, ["pointer"], [[self.x, 0, 0]], [[1, 0, 0, 0]], self.steps, blue)
        return {"x": self.x, "target": 0.3}, self.x >= 0.25, self.x >= 0.25

    def colour(self) -> Any:
        if self.bad:
            return ["pointer"]
        colour = [0, 1, 0, 1] if self.x > 0.15 else [1, 0, 0, 1]
        return {"pointer": {"rgba": colour}, "tote": {"visible": True}}


class Sparse(Lit):
    """Hands a frame after the odd steps only (x 0.1, then 0.3): the pointer turns green at step 2, which
    shows first in step 3's frame."""

    odd_only = True
    blue_at = None


class BadlyLit(Lit):
    bad = True


def played(cls: type, folder: Path) -> Any:
    """The one episode of `cls`, an own-replay benchmark naming `colour` as its looks method, recorded."""
    import yardstick.sdk.decorators as ys

    ys.reset(cls.reset)  # type: ignore[attr-defined]
    ys.step(cls.step)  # type: ignore[attr-defined]
    replay = {"engine": "own", "looks": "colour"}
    ys.benchmark(tasks={"t": ""}, seeds=[0], max_seconds=1.0, replay=replay)(cls)
    work = Work(
        Component(f"{__name__}:{cls.__name__}"), POLICY, recording=Recording(replay=True, folder=str(folder))
    )
    return evaluate(RunRequest(work=work, trials=1, workers=0)).results[0]


def test_a_looks_method_beside_handed_frames_is_asked_at_every_frame(tmp_path: Path) -> None:
    result = played(Lit, tmp_path)
    assert result.success and result.recording_error is None, result.recording_error
    replay = replay_format.read(tmp_path / result.artifacts[0])
    # The reset's own look first, then the method's at the same frame; then its one change, once; then the
    # frame's own blue, which the method's answer (green all along) overrides again at that frame.
    assert replay.looks == [
        (0, "pointer", {"visible": True}),
        (0, "pointer", {"rgba": [1, 0, 0, 1]}),
        (0, "tote", {"visible": True}),
        (2, "pointer", {"rgba": [0, 1, 0, 1]}),  # x 0.1, 0.2: past 0.15 at the second step's frame
        (3, "pointer", {"rgba": [0, 0, 1, 1]}),
        (3, "pointer", {"rgba": [0, 1, 0, 1]}),
    ]
    # Frames after some steps only: a change is said at the frame that first shows it, not the one before.
    result = played(Sparse, tmp_path / "sparse")
    replay = replay_format.read(tmp_path / "sparse" / result.artifacts[0])
    assert list(replay.step) == [0, 1, 3]
    assert replay.looks[-1] == (2, "pointer", {"rgba": [0, 1, 0, 1]}), replay.looks
    result = played(BadlyLit, tmp_path / "bad")
    assert result.success and result.artifacts == []  # the replay ends, the episode plays on
    assert result.recording_error is not None and "the looks method answers" in result.recording_error


def _send(inbound: Inbound, name: str, data: bytes, playing: set[int]) -> None:
    inbound.chunk(name, base64.b64encode(data).decode(), False, playing)
    inbound.chunk(name, None, True, playing)


def test_a_boxed_replay_and_its_scene_arrive_once_checked(tmp_path: Path) -> None:
    writer = replay_format.ReplayWriter(["a"], engine="own")
    writer.frame(0.0, 0, [[0, 0, 0]], [[1, 0, 0, 0]])
    glb = b"glTF" + bytes(16)
    sha = hashlib.sha256(glb).hexdigest()
    inbound = Inbound(tmp_path)
    _send(inbound, "episodes/000001/replay.seqreplay", writer.to_bytes(), {1, 2})
    _send(inbound, f"scenes/{sha}.glb", glb, {1, 2})
    kept, problems = inbound.take(1, ["episodes/000001/replay.seqreplay", f"scenes/{sha}.glb"])
    assert problems == [] and kept == ["episodes/000001/replay.seqreplay", f"scenes/{sha}.glb"]
    assert (tmp_path / "scenes" / f"{sha}.glb").read_bytes() == glb
    assert [p.name for p in (tmp_path / "scenes").iterdir()] == [f"{sha}.glb"]  # nothing left arriving

    # The box sends a scene once: a later episode names it, and it is kept from before.
    _send(inbound, "episodes/000002/replay.seqreplay", b"not a replay", {2})
    wrong = hashlib.sha256(b"other").hexdigest()
    _send(inbound, f"scenes/{wrong}.glb", glb, {2})
    names = ["episodes/000002/replay.seqreplay", f"scenes/{sha}.glb", f"scenes/{wrong}.glb"]
    kept, problems = inbound.take(2, names)
    assert kept == [f"scenes/{sha}.glb"]
    assert "not a 3D replay" in problems[0] and "its sha256 is not its name" in problems[1]
    assert not (tmp_path / "scenes" / f"{wrong}.glb").exists()
