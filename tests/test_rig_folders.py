"""Rig episodes written as the Positronic vocabulary's episode folders (`yardstick.rig.folders`), read back by
`positronic_evals`' own readers and by the operator's labeler, and a rig run scored by `positronic_evals`'
rule (`yardstick.positronic.operator_labels`).

Every episode below samples a robot at 10 Hz from world time 0 to its end, with two cameras; the wall clock
is a fixed epoch plus the world time, so every file is the same on every run.
"""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from eval_vocabulary.episode import (
    BENCHMARK_TASK,
    ENDED_BY,
    ENDED_BY_OPERATOR,
    ENDED_BY_POLICY,
    META_FILE,
    POLICY_END,
    SEED,
    SIGNAL_FILE_SUFFIX,
    STATIC_FILE,
    SUCCESS,
    TASK,
    TERMINATED,
    TIMESTAMP_COLUMN_PREFIX,
    UID,
    VALUE_COLUMN,
    PolicyEnd,
)
from eval_vocabulary.episode import INSTRUCTION as INSTRUCTION_SIGNAL
from eval_vocabulary.outcome import OUTCOME, SUCCESSFUL_ITEMS, TOTAL_ITEMS, Outcome
from eval_vocabulary.progress import STATE_SIGNAL
from eval_vocabulary.progress import Stage as Rung
from eval_vocabulary.timeline import (
    EMITTED_WALL,
    EMITTED_WORLD,
    HARNESS_WALL,
    HARNESS_WORLD,
    recording_timeline,
)
from positronic_evals.labels import (
    Fail,
    ItemsDelivered,
    Label,
    Safety,
    Stage,
    StageReached,
    Success,
    label,
    molmo_label,
    read_static,
    recorded_span,
    recorded_uid,
)
from positronic_evals.labels import Outcome as LabelOutcome
from positronic_evals.scoring import score

from yardstick.engine import mp4
from yardstick.positronic import operator_labels
from yardstick.positronic.operator_labels import (
    DEFAULT_RIG_SCORING,
    OPERATOR_LABELER,
    endpoint_outcome,
    operator_label,
    recorded_outcome,
    score_rig_run,
)
from yardstick.rig import folders
from yardstick.rig.folders import (
    ACTION,
    ROBOT_GRIPPER,
    ROBOT_JOINTS,
    EpisodeWriter,
    Verdict,
)

HZ = 10
EPOCH_NS = 1_760_000_000_000_000_000
CAMERAS = ("image.wrist", "image.scene")
INSTRUCTION = "put the cubes in the bowl"
TASK_ID = "cubes-to-bowl"
TOKEN = "ep-7f3a"  # an opaque endpoint token
SCENE = {"placement": "left", "clutter": ["mug"]}
WORLD = f"{TIMESTAMP_COLUMN_PREFIX}{EMITTED_WORLD}"
WALL = f"{TIMESTAMP_COLUMN_PREFIX}{EMITTED_WALL}"
HARNESS_WORLD_COLUMN = f"{TIMESTAMP_COLUMN_PREFIX}{HARNESS_WORLD}"
HARNESS_WALL_COLUMN = f"{TIMESTAMP_COLUMN_PREFIX}{HARNESS_WALL}"
SEED_OF_TRIAL = 20260511
OPERATOR_ONLY = {OPERATOR_LABELER: operator_label}


def wall(world_s: float) -> int:
    return EPOCH_NS + round(world_s * 1e9)


def picture(step: int, camera: int) -> np.ndarray:
    image = np.full((24, 32, 3), 60 + 90 * camera, dtype=np.uint8)
    image[4:12, step % 24 : step % 24 + 8] = (230, 20, 20)
    return image


def record(
    folder: Path,
    verdict: Verdict,
    marks: tuple[tuple[float, Rung], ...] = (),
    *,
    uid: str | None = None,
    late_camera_from: int = 0,
) -> list[Path]:
    """An episode sampled every 1/HZ s from 0 to `verdict.seconds_to_end`, marked as `marks` say.

    The scene camera shows from sample `late_camera_from` on and then skips every fifth sample."""
    writer = EpisodeWriter(
        folder,
        uid=uid or folder.name,
        task=INSTRUCTION,
        benchmark_task=TASK_ID,
        hz=HZ,
        started_wall_ns=wall(0.0),
        cameras=CAMERAS,
        endpoint_token=TOKEN,
        scene=SCENE,
        rig="franka-2",
        shape="franka",
        seed=SEED_OF_TRIAL,
    )
    pending = sorted(marks)
    steps = round(verdict.seconds_to_end * HZ)
    for step in range(steps + 1):
        world_s = step / HZ
        while pending and pending[0][0] <= world_s:
            at, rung = pending.pop(0)
            writer.mark(at, rung, wall_ns=wall(at))
        images = {"image.wrist": picture(step, 0)}
        if step >= late_camera_from and step % 5 != 4:
            images["image.scene"] = picture(step, 1)
        writer.sample(
            world_s,
            {ROBOT_JOINTS: np.full(7, step / 100), ROBOT_GRIPPER: np.float32(step % 2)},
            images,
            np.arange(8, dtype=np.float64) + step if step else None,
            wall_ns=wall(world_s),
        )
    return writer.close(verdict)


CLIMB = ((1.0, Rung.REACHING), (2.0, Rung.CONTACT), (3.0, Rung.CONTROL), (4.0, Rung.AT_TARGET))

# What each episode of the run records, and the label the operator's labeler must give it (None: no label).
EPISODES: dict[str, tuple[Verdict, tuple[tuple[float, Rung], ...], Label | None]] = {
    "success": (
        Verdict(outcome=Outcome.SUCCESS, seconds_to_end=5.0, ended_by=ENDED_BY_OPERATOR, notes="clean"),
        CLIMB,
        Label(
            uid="success",
            task=TASK_ID,
            annotator=OPERATOR_LABELER,
            seconds_to_end=5.0,
            notes="clean",
            events=(
                StageReached(seconds=1.0, stage=Stage.reaching),
                StageReached(seconds=2.0, stage=Stage.contact),
                StageReached(seconds=3.0, stage=Stage.control),
                StageReached(seconds=4.0, stage=Stage.at_target),
                Success(seconds=5.0),
            ),
        ),
    ),
    "fail-at-target": (
        # Marked between two samples, and marked lower after higher: the furthest stage stays at-target.
        Verdict(outcome=Outcome.FAIL, seconds_to_end=4.0, ended_by=ENDED_BY_OPERATOR),
        ((1.05, Rung.REACHING), (2.55, Rung.AT_TARGET), (3.0, Rung.REACHING)),
        Label(
            uid="fail-at-target",
            task=TASK_ID,
            annotator=OPERATOR_LABELER,
            seconds_to_end=4.0,
            events=(
                StageReached(seconds=1.05, stage=Stage.reaching),
                StageReached(seconds=2.55, stage=Stage.at_target),
                StageReached(seconds=3.0, stage=Stage.reaching),
                Fail(seconds=4.0),
            ),
        ),
    ),
    "safety": (
        Verdict(outcome=Outcome.SAFETY, seconds_to_end=2.0, ended_by=ENDED_BY_OPERATOR),
        ((0.5, Rung.REACHING), (1.5, Rung.CONTACT)),
        Label(
            uid="safety",
            task=TASK_ID,
            annotator=OPERATOR_LABELER,
            seconds_to_end=2.0,
            events=(
                StageReached(seconds=0.5, stage=Stage.reaching),
                StageReached(seconds=1.5, stage=Stage.contact),
                Safety(seconds=2.0),
            ),
        ),
    ),
    "out-of-time": (
        # It ran to its cap: nobody ended it, and the operator's verdict is that the time ran out.
        Verdict(outcome=Outcome.OUT_OF_TIME, seconds_to_end=6.0),
        ((2.0, Rung.REACHING),),
        Label(
            uid="out-of-time",
            task=TASK_ID,
            annotator=OPERATOR_LABELER,
            seconds_to_end=6.0,
            events=(StageReached(seconds=2.0, stage=Stage.reaching),),
        ),
    ),
    "items": (
        Verdict(
            outcome=Outcome.FAIL,
            seconds_to_end=3.5,
            ended_by=ENDED_BY_POLICY,
            policy_end=PolicyEnd.GIVE_UP,
            successful_items=2,
            total_items=3,
        ),
        ((1.0, Rung.REACHING), (2.0, Rung.CONTACT), (3.0, Rung.CONTROL)),
        Label(
            uid="items",
            task=TASK_ID,
            annotator=OPERATOR_LABELER,
            seconds_to_end=3.5,
            total_items=3,
            events=(
                StageReached(seconds=1.0, stage=Stage.reaching),
                StageReached(seconds=2.0, stage=Stage.contact),
                StageReached(seconds=3.0, stage=Stage.control),
                ItemsDelivered(seconds=3.5, delivered=2),
                Fail(seconds=3.5),
            ),
        ),
    ),
    "unscored": (
        Verdict(outcome=Outcome.UNSCORED, seconds_to_end=1.0, ended_by=ENDED_BY_OPERATOR),
        CLIMB[:1],
        None,
    ),
    "system": (Verdict(outcome=Outcome.SYSTEM, seconds_to_end=1.5, ended_by=ENDED_BY_OPERATOR), (), None),
    "discarded": (
        Verdict(outcome=Outcome.DISCARDED, seconds_to_end=1.0, ended_by=ENDED_BY_OPERATOR),
        (),
        None,
    ),
}

# Under DEFAULT_RIG_SCORING: a success 1; at-target .6; a safety stop 0 whatever it reached; reaching .1;
# control .4 against 2 of 3 items delivered, the larger counting.
EXPECTED_SCORES = {"success": 1.0, "fail-at-target": 0.6, "safety": 0.0, "out-of-time": 0.1, "items": 2 / 3}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rig-run")
    written = {}
    for name, (verdict, marks, _) in EPISODES.items():
        record(root / name, verdict, marks, late_camera_from=3 if name == "success" else 0)
        written[name] = root / name
    return written


# --- the folder, as the vocabulary names its parts


def test_a_folder_holds_the_files_the_vocabulary_names(run: dict[str, Path]) -> None:
    names = {path.name for path in run["success"].iterdir()}
    recorded = (ROBOT_JOINTS, ROBOT_GRIPPER, ACTION, STATE_SIGNAL, INSTRUCTION_SIGNAL)
    signals = {f"{name}{SIGNAL_FILE_SUFFIX}" for name in recorded}
    videos = {f"{camera}{suffix}" for camera in CAMERAS for suffix in (".mp4", folders.FRAMES_SUFFIX)}
    assert names == {STATIC_FILE, META_FILE} | signals | videos
    # An episode without marks records no ladder signal.
    assert not (run["system"] / f"{STATE_SIGNAL}{SIGNAL_FILE_SUFFIX}").exists()


def test_every_signal_and_frame_index_names_the_harness_timelines_a_reader_picks(
    run: dict[str, Path],
) -> None:
    """Vocabulary 0.6.0: a reader takes a recording's times from `recording_timeline` of its columns, which
    picks the harness's world clock; the emitter's columns stay, for the labelers that read them."""
    folder = run["fail-at-target"]
    tables = [pq.read_table(path) for path in sorted(folder.glob(f"*{SIGNAL_FILE_SUFFIX}"))]
    assert len(tables) == len(CAMERAS) + 5
    for table in tables:
        timelines = {name.removeprefix(TIMESTAMP_COLUMN_PREFIX) for name in table.column_names}
        assert recording_timeline(timelines) == HARNESS_WORLD
        assert table.column(HARNESS_WORLD_COLUMN).to_pylist() == table.column(WORLD).to_pylist()
        assert table.column(HARNESS_WALL_COLUMN).to_pylist() == table.column(WALL).to_pylist()


def test_the_instruction_is_a_signal_sampled_once_at_the_first_observation(run: dict[str, Path]) -> None:
    instruction = pq.read_table(run["success"] / f"{INSTRUCTION_SIGNAL}{SIGNAL_FILE_SUFFIX}")
    assert instruction.column(VALUE_COLUMN).to_pylist() == [INSTRUCTION]
    assert instruction.column(HARNESS_WORLD_COLUMN).to_pylist() == [0]
    assert instruction.column(HARNESS_WALL_COLUMN).to_pylist() == [wall(0.0)]


def test_the_operators_label_reads_marks_recorded_on_the_harness_timeline_only(tmp_path: Path) -> None:
    """A ladder signal that names only the harness's timelines (as a 0.6.0 harness records one) still
    gives the operator's label its marks, at the times that timeline says."""
    folder = tmp_path / "harness-only"
    record(folder, Verdict(outcome=Outcome.FAIL, seconds_to_end=5.0, ended_by=ENDED_BY_OPERATOR), CLIMB[:2])
    ladder = folder / f"{STATE_SIGNAL}{SIGNAL_FILE_SUFFIX}"
    pq.write_table(pq.read_table(ladder).drop_columns([WORLD, WALL]), ladder)

    given = operator_label(folder)

    assert given is not None
    assert [event for event in given.events if isinstance(event, StageReached)] == [
        StageReached(seconds=1.0, stage=Stage.reaching),
        StageReached(seconds=2.0, stage=Stage.contact),
    ]


def test_a_state_signal_may_not_take_the_instructions_name(tmp_path: Path) -> None:
    writer = EpisodeWriter(
        tmp_path / "e", uid="u", task=INSTRUCTION, benchmark_task=TASK_ID, hz=HZ, started_wall_ns=0
    )
    with pytest.raises(ValueError, match=r"eval\.instruction"):
        writer.sample(0.0, {INSTRUCTION_SIGNAL: 1.0}, {}, None, wall_ns=0)


def test_close_returns_the_files_it_wrote_the_statics_last(tmp_path: Path) -> None:
    written = record(tmp_path / "one", EPISODES["success"][0], CLIMB)
    assert written[-1].name == STATIC_FILE
    assert sorted(path.name for path in written) == sorted(path.name for path in (tmp_path / "one").iterdir())


def test_each_signal_has_a_value_and_its_times_on_the_world_and_the_wall_clocks(run: dict[str, Path]) -> None:
    folder = run["success"]
    joints = pq.read_table(folder / f"{ROBOT_JOINTS}{SIGNAL_FILE_SUFFIX}")
    assert set(joints.column_names) == {VALUE_COLUMN, WORLD, WALL, HARNESS_WORLD_COLUMN, HARNESS_WALL_COLUMN}
    assert joints.schema.field(WORLD).type == pa.int64() and joints.schema.field(WALL).type == pa.int64()
    world = joints.column(WORLD).to_pylist()
    assert world == [round(step / HZ * 1e9) for step in range(51)]
    assert joints.column(WALL).to_pylist() == [EPOCH_NS + time for time in world]
    assert joints.column(VALUE_COLUMN).to_pylist()[10] == pytest.approx([0.1] * 7)
    gripper = pq.read_table(folder / f"{ROBOT_GRIPPER}{SIGNAL_FILE_SUFFIX}").column(VALUE_COLUMN)
    assert gripper.to_pylist()[:3] == [0.0, 1.0, 0.0]
    # The policy's first row arrives at the second sample.
    action = pq.read_table(folder / f"{ACTION}{SIGNAL_FILE_SUFFIX}")
    assert action.column(WORLD).to_pylist()[0] == round(0.1 * 1e9)
    assert action.column(VALUE_COLUMN).to_pylist()[0] == list(np.arange(8.0) + 1)
    ladder = pq.read_table(run["fail-at-target"] / f"{STATE_SIGNAL}{SIGNAL_FILE_SUFFIX}")
    assert ladder.column(VALUE_COLUMN).to_pylist() == ["reaching", "at-target", "reaching"]
    assert ladder.column(WORLD).to_pylist() == [1_050_000_000, 2_550_000_000, 3_000_000_000]


def test_the_statics_say_what_the_episode_was_and_how_it_ended(run: dict[str, Path]) -> None:
    assert read_static(run["success"]) == {
        TASK: INSTRUCTION,
        BENCHMARK_TASK: TASK_ID,
        OUTCOME: "Success",
        ENDED_BY: ENDED_BY_OPERATOR,
        TERMINATED: True,
        SUCCESS: True,
        folders.ENDPOINT_TOKEN: TOKEN,
        folders.SCENE: SCENE,
        folders.NOTES: "clean",
        folders.SECONDS_TO_END: 5.0,
        SEED: SEED_OF_TRIAL,
    }
    items = read_static(run["items"])
    assert items is not None
    assert (items[ENDED_BY], items[POLICY_END], items[SUCCESS], items[TERMINATED]) == (
        ENDED_BY_POLICY,
        "give_up",
        False,
        True,
    )
    assert (items[SUCCESSFUL_ITEMS], items[TOTAL_ITEMS]) == (2, 3)
    # Run to its cap: nobody ended it, and it did not terminate.
    capped = read_static(run["out-of-time"])
    assert capped is not None
    assert ENDED_BY not in capped and capped[TERMINATED] is False and capped[SUCCESS] is False
    # Judged or not: `eval.success` only where there is a verdict.
    for name in ("unscored", "discarded"):
        static = read_static(run[name])
        assert static is not None and SUCCESS not in static
    assert (read_static(run["unscored"]) or {})[OUTCOME] == "UNSCORED"
    assert (read_static(run["system"]) or {})[SUCCESS] is False
    # No policy's name anywhere: the endpoint is a token.
    assert "policy" not in json.dumps(read_static(run["success"]))


def test_the_meta_holds_the_uid_that_positronic_evals_reads(run: dict[str, Path]) -> None:
    assert recorded_uid(run["success"]) == "success"
    meta = json.loads((run["success"] / META_FILE).read_text())
    assert meta == {
        UID: "success",
        folders.HZ: 10.0,
        folders.STARTED_WALL_NS: EPOCH_NS,
        folders.CAMERAS: list(CAMERAS),
        folders.RIG: "franka-2",
        folders.SHAPE: "franka",
    }


def test_the_span_runs_from_world_time_0_to_the_episode_end(run: dict[str, Path]) -> None:
    assert recorded_span(run["success"]) == (0, 5_000_000_000)
    assert recorded_span(run["items"]) == (0, 3_500_000_000)


# --- the videos


def test_each_camera_is_an_h264_video_with_a_frame_per_sample(run: dict[str, Path]) -> None:
    for camera in CAMERAS:
        video = run["success"] / f"{camera}.mp4"
        info = mp4.inspect(video)
        assert (info.width, info.height, info.codec) == (32, 24, "avc1")
        assert info.duration_s == pytest.approx(5.1, abs=0.05)
        with av.open(str(video)) as container:
            frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
        # 51 samples: the scene camera, first seen at sample 3, starts black and holds its last image where a
        # sample has none, so frame i of each camera is sample i.
        assert len(frames) == 51
        index = pq.read_table(run["success"] / f"{camera}{folders.FRAMES_SUFFIX}")
        assert index.column(WORLD).to_pylist() == [round(step / HZ * 1e9) for step in range(51)]
    with av.open(str(run["success"] / "image.scene.mp4")) as container:
        scene = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    assert scene[0].mean() < 20 and scene[3].mean() > 100


# --- labels, read by positronic_evals' own entry point


@pytest.mark.parametrize("name", list(EPISODES))
def test_the_operators_labeler_gives_each_episode_the_label_it_recorded(
    run: dict[str, Path], name: str
) -> None:
    expected = EPISODES[name][2]
    given = label(run[name], (OPERATOR_LABELER,), OPERATOR_ONLY)
    if expected is None:
        assert given is None
        return
    assert given == (OPERATOR_LABELER, expected)


def test_the_labels_views_read_what_the_operator_marked(run: dict[str, Path]) -> None:
    def operator(name: str) -> Label:
        given = label(run[name], (OPERATOR_LABELER,), OPERATOR_ONLY)
        assert given is not None
        return given[1]

    success = operator("success")
    assert success.outcome is LabelOutcome.success and success.seconds_to_success == 5.0
    assert success.stage_seconds == {
        Stage.reaching: 1.0,
        Stage.contact: 2.0,
        Stage.control: 3.0,
        Stage.at_target: 4.0,
    }
    assert success.notes == "clean"
    fail = operator("fail-at-target")
    assert (fail.outcome, fail.furthest_stage) == (LabelOutcome.fail, Stage.at_target)
    assert fail.stage_seconds == {Stage.reaching: 1.05, Stage.at_target: 2.55}
    assert operator("safety").outcome is LabelOutcome.safety
    capped = operator("out-of-time")
    assert (capped.outcome, capped.seconds_to_outcome, capped.furthest_stage) == (
        LabelOutcome.out_of_time,
        None,
        Stage.reaching,
    )
    items = operator("items")
    assert (items.delivered, items.total_items, items.furthest_stage) == (2, 3, Stage.control)


def test_a_ladder_code_that_is_no_stage_is_ignored(tmp_path: Path) -> None:
    folder = tmp_path / "longer-ladder"
    record(folder, EPISODES["fail-at-target"][0], ((1.0, Rung.REACHING),))
    signal = folder / f"{STATE_SIGNAL}{SIGNAL_FILE_SUFFIX}"
    # A recording against a longer ladder: a rung this one does not know, after reaching.
    pq.write_table(
        pa.table({VALUE_COLUMN: ["reaching", "lifted"], WORLD: [1_000_000_000, 2_000_000_000], WALL: [1, 2]}),
        signal,
    )
    given = operator_label(folder)
    assert given is not None
    assert given.events == (StageReached(seconds=1.0, stage=Stage.reaching), Fail(seconds=4.0))


def test_the_notes_key_is_one_key_on_both_sides_of_the_layers() -> None:
    assert operator_labels.NOTES == folders.NOTES


def test_a_damaged_record_is_no_label_and_no_error(tmp_path: Path) -> None:
    folder = tmp_path / "damaged"
    record(folder, EPISODES["items"][0], ())
    static = json.loads((folder / STATIC_FILE).read_text())
    (folder / STATIC_FILE).write_text(json.dumps({**static, SUCCESSFUL_ITEMS: "two"}))
    assert operator_label(folder) is None
    (folder / STATIC_FILE).write_text(json.dumps({**static, OUTCOME: "Great"}))
    assert operator_label(folder) is None and recorded_outcome(folder) is None


def test_molmos_labeler_skips_an_episode_an_operator_ended(run: dict[str, Path]) -> None:
    assert molmo_label(run["success"]) is None
    assert molmo_label(run["fail-at-target"]) is None
    # Not ended by an operator: the sim labeler reads the vocabulary's keys, and they say the time ran out.
    capped = molmo_label(run["out-of-time"])
    assert capped is not None and capped.outcome is LabelOutcome.out_of_time and capped.task == INSTRUCTION


# --- scoring a run


def test_a_rig_run_scores_as_positronic_evals_scores_its_labels(run: dict[str, Path]) -> None:
    scores = score_rig_run(list(run.values()))
    # Discarded is left out; unscored and system stay, as episodes no labeler labelled.
    by_hand = [EPISODES[name][2] for name in EPISODES if name != "discarded"]
    assert scores == score(DEFAULT_RIG_SCORING, by_hand)
    assert (scores.episodes, scores.unscored) == (7, 2)
    assert scores.primary == pytest.approx(sum(EXPECTED_SCORES.values()) / len(EXPECTED_SCORES))
    # Partial stages count: not the naive success rate of the labelled episodes (1 of 5).
    assert scores.primary != pytest.approx(0.2)
    assert scores.primary == pytest.approx(0.47333, abs=1e-4)


def test_discarded_is_left_out_not_counted_unscored(run: dict[str, Path]) -> None:
    with_discard = score_rig_run([run["success"], run["discarded"]])
    assert (with_discard.episodes, with_discard.unscored, with_discard.primary) == (1, 0, 1.0)
    with_system = score_rig_run([run["success"], run["system"]])
    assert (with_system.episodes, with_system.unscored, with_system.primary) == (2, 1, 1.0)


def test_the_plan_outcome_counts_per_endpoint_in_the_plans_order(run: dict[str, Path]) -> None:
    recorded = {name: recorded_outcome(folder) for name, folder in run.items()}
    outcome = endpoint_outcome(
        {
            "b-endpoint": [recorded[name] for name in ("success", "fail-at-target", "discarded", "unscored")],
            "a-endpoint": [
                recorded[name] for name in ("system", "out-of-time", "items", "safety", "success")
            ],
            "c-endpoint": [None, Outcome.DISCARDED],
        }
    )
    assert [entry.model_dump() for entry in outcome.endpoints] == [
        {"endpoint": "b-endpoint", "kept": 3, "judged": 2, "succeeded": 1},
        {"endpoint": "a-endpoint", "kept": 5, "judged": 5, "succeeded": 1},
        {"endpoint": "c-endpoint", "kept": 1, "judged": 0, "succeeded": 0},
    ]
    assert (outcome.kept, outcome.judged, outcome.succeeded) == (9, 7, 2)


# --- what the writer refuses


def writer(folder: Path) -> EpisodeWriter:
    return EpisodeWriter(
        folder, uid="u", task=INSTRUCTION, benchmark_task=TASK_ID, hz=HZ, started_wall_ns=0, cameras=CAMERAS
    )


def test_a_sample_the_episode_cannot_take_is_refused_and_leaves_no_trace(tmp_path: Path) -> None:
    episode = writer(tmp_path / "e")
    state = {ROBOT_JOINTS: np.zeros(7)}
    episode.sample(0.0, state, {}, None, wall_ns=1)
    with pytest.raises(ValueError, match="not after the last sample"):
        episode.sample(0.0, state, {}, None, wall_ns=2)
    with pytest.raises(ValueError, match="shape"):
        episode.sample(0.1, {ROBOT_JOINTS: np.zeros(6)}, {}, None, wall_ns=2)
    with pytest.raises(ValueError, match="no camera"):
        episode.sample(0.1, state, {"image.top": picture(0, 0)}, None, wall_ns=2)
    with pytest.raises(ValueError, match="uint8"):
        episode.sample(0.1, state, {"image.wrist": np.zeros((4, 4))}, None, wall_ns=2)
    with pytest.raises(ValueError, match="records"):
        episode.sample(0.1, {ACTION: np.zeros(2)}, {}, None, wall_ns=2)
    with pytest.raises(ValueError, match="stage"):
        episode.mark(0.1, "lifted", wall_ns=2)  # type: ignore[arg-type]
    episode.sample(0.1, state, {}, np.zeros(2), wall_ns=2)
    # A verdict that ends before the last sample: nothing is written, and the episode is still open.
    with pytest.raises(ValueError, match="before the last sample"):
        episode.close(Verdict(outcome=Outcome.FAIL, seconds_to_end=0.05))
    assert list((tmp_path / "e").iterdir()) == []
    episode.close(Verdict(outcome=Outcome.FAIL, seconds_to_end=0.1))
    assert pq.read_table(tmp_path / "e" / f"{ROBOT_JOINTS}{SIGNAL_FILE_SUFFIX}").num_rows == 2
    with pytest.raises(RuntimeError, match="closed"):
        episode.sample(0.2, state, {}, None, wall_ns=3)


def test_two_marks_at_one_world_time_keep_their_order(tmp_path: Path) -> None:
    episode = writer(tmp_path / "e")
    episode.sample(0.0, {ROBOT_JOINTS: np.zeros(7)}, {}, None, wall_ns=1)
    episode.mark(0.05, Rung.REACHING, wall_ns=1)
    episode.mark(0.05, Rung.CONTACT, wall_ns=2)
    with pytest.raises(ValueError, match="before the last one"):
        episode.mark(0.0, Rung.CONTROL, wall_ns=3)
    episode.close(Verdict(outcome=Outcome.FAIL, seconds_to_end=0.1))
    ladder = pq.read_table(tmp_path / "e" / f"{STATE_SIGNAL}{SIGNAL_FILE_SUFFIX}")
    assert ladder.column(WORLD).to_pylist() == [50_000_000, 50_000_001]
    assert ladder.column(VALUE_COLUMN).to_pylist() == ["reaching", "contact"]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"ended_by": "robot"}, "ended_by"),
        ({"successful_items": 4, "total_items": 3}, "successful_items"),
        ({"successful_items": 1}, "successful_items"),
        ({"total_items": 0}, "total_items"),
        ({"policy_end": PolicyEnd.COMPLETE, "ended_by": ENDED_BY_OPERATOR}, "policy_end"),
        ({"seconds_to_end": -1.0}, "seconds_to_end"),
        ({"outcome": "Success"}, "outcome"),
    ],
)
def test_a_verdict_that_cannot_be_recorded_is_refused(fields: dict[str, object], problem: str) -> None:
    given: dict[str, object] = {"outcome": Outcome.FAIL, "seconds_to_end": 1.0, **fields}
    with pytest.raises(ValueError, match=problem):
        Verdict(**given)  # type: ignore[arg-type]


def test_an_episode_folder_is_written_once(tmp_path: Path) -> None:
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "left-over").write_text("x")
    with pytest.raises(FileExistsError):
        writer(tmp_path / "e")


def test_a_camera_whose_frames_change_size_is_kept_and_the_meta_says_so(tmp_path: Path) -> None:
    episode = writer(tmp_path / "e")
    for step, size in enumerate((24, 24, 30)):
        image = np.zeros((size, 32, 3), dtype=np.uint8)
        episode.sample(step / HZ, {ROBOT_JOINTS: np.zeros(7)}, {"image.wrist": image}, None, wall_ns=step)
    episode.close(Verdict(outcome=Outcome.UNSCORED, seconds_to_end=0.2))
    meta = json.loads((tmp_path / "e" / META_FILE).read_text())
    assert meta[folders.CAMERAS] == ["image.wrist"]
    assert meta[folders.PROBLEMS] == [
        "video image.wrist: frames of another size than its first (32×24) were cropped or padded to it"
    ]
    assert mp4.inspect(tmp_path / "e" / "image.wrist.mp4").height == 24
    assert not (tmp_path / "e" / "image.scene.mp4").exists()
