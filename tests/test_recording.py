"""Recording episodes: a video per camera (H.264 mp4, decoded back with PyAV) and the trajectory (gzip JSON
lines), in process and in a pool, from Python and from the CLI, and never at the cost of a result."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from typer.testing import CliRunner

import yardstick as ys
from conftest import toy
from yardstick.cli.main import app
from yardstick.engine import Component, EpisodeResult, RunRequest, Timing, Work, evaluate
from yardstick.engine import recording as recording_module
from yardstick.engine.recording import NO_IMAGES, Recording, episode_folder, jsonable

HERE = Path(__file__).resolve()
STEPS = {"short": 6, "long": 10}
HZ = 10


def ref(name: str) -> str:
    """A class of this file, by a reference a fresh worker process can load."""
    return f"{HERE}:{name}"


def picture(seed: int, t: int, height: int, width: int) -> np.ndarray:
    """A background the seed colours, with a red square that moves one pixel right and down a step."""
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[:] = (40 + 50 * seed, 160, 220 - 40 * seed)
    side = max(4, min(height, width) // 3)
    top, left = min(t, height - side), min(2 * t, width - side)
    image[top : top + side, left : left + side] = (230, 20, 20)
    return image


@ys.benchmark(
    tasks={"short": f"done after {STEPS['short']} steps", "long": f"done after {STEPS['long']} steps"},
    seeds=range(4),
    max_seconds=5.0,
)
class Squares:
    """Two cameras: `image.top` (64 wide, 48 high) and `image.side` (30×30) by default, a moving square
    in each; `state` too, which is not an image. `late` shows the side camera only from step 3 on;
    `grow` makes the top camera's frames larger from step 4 on."""

    def __init__(
        self,
        top: tuple[int, int] = (48, 64),
        side: tuple[int, int] = (30, 30),
        late: bool = False,
        grow: bool = False,
    ) -> None:
        self.top, self.side, self.late, self.grow = tuple(top), tuple(side), late, grow

    def observe(self) -> dict[str, Any]:
        top = (self.top[0] + 4, self.top[1] + 4) if self.grow and self.t >= 4 else self.top
        obs: dict[str, Any] = {
            "state": np.array([self.t, self.seed], dtype=np.float64),
            "image.top": picture(self.seed, self.t, *top),
            "image_mask": np.zeros((4, 4), dtype=np.uint8),  # under an image key, but not H×W×3
        }
        if not self.late or self.t >= 3:
            obs["image.side"] = picture(self.seed, self.t, *self.side)
        return obs

    @ys.reset
    def start(self, task: str, seed: int) -> dict[str, Any]:
        self.task, self.seed, self.t = task, seed, 0
        return self.observe()

    @ys.step
    def move(self, action: Any) -> tuple[dict[str, Any], bool, bool, dict[str, Any]]:
        self.t += 1
        done = self.t >= STEPS[self.task]
        metrics = {"t": float(self.t), "speed": np.float32(0.5), "obj": object()}
        return self.observe(), done, done and self.seed % 2 == 0, metrics


@ys.policy(hz=HZ)
class Steady:
    """Always the same action, as numpy."""

    @ys.infer
    def act(self, obs: Any) -> np.ndarray:
        return np.array([[0.25, -0.5]], dtype=np.float32)


def run(
    tmp_path: Path, recording: Recording | None, *, workers: int = 0, **params: Any
) -> list[EpisodeResult]:
    work = Work(Component(ref("Squares"), params), Component(ref("Steady")), recording=recording)
    outcome = evaluate(RunRequest(work=work, trials=2, workers=workers))
    assert outcome.complete, [r.error for r in outcome.results]
    return outcome.results


def decode(path: Path) -> tuple[list[np.ndarray], list[float], float]:
    """The frames of an mp4, their times in seconds, and the stream's duration in seconds."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames, times = [], []
        for frame in container.decode(stream):
            frames.append(frame.to_ndarray(format="rgb24"))
            times.append(float(frame.time or 0.0))
        assert stream.duration is not None and stream.time_base is not None
        return frames, times, float(stream.duration * stream.time_base)


def close_to(decoded: np.ndarray, expected: np.ndarray) -> bool:
    """H.264 is lossy: the same picture within a few levels on average."""
    height, width = expected.shape[:2]
    return float(np.abs(decoded[:height, :width].astype(int) - expected.astype(int)).mean()) < 8


def trajectory(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "pool"])
def test_every_episode_gets_a_video_per_camera_and_its_trajectory(tmp_path: Path, workers: int) -> None:
    plain = run(tmp_path, None, workers=workers)
    recorded = run(
        tmp_path, Recording(video=True, trajectory=True, folder=str(tmp_path / "rec")), workers=workers
    )
    # Recording changes nothing of what happened.
    assert [r.outcome() for r in recorded] == [r.outcome() for r in plain]
    assert all(r.timing.recording == 0 and not r.artifacts for r in plain)
    for result in recorded:
        assert result.recording_error is None and result.timing.recording > 0
        folder = episode_folder(tmp_path / "rec", result.index)
        name = f"episodes/{result.index:06d}"
        assert sorted(result.artifacts) == [
            f"{name}/image.side.mp4",
            f"{name}/image.top.mp4",
            f"{name}/trajectory.jsonl.gz",
        ]
        assert sorted(p.name for p in folder.iterdir()) == [
            "image.side.mp4",
            "image.top.mp4",
            "trajectory.jsonl.gz",
        ]
        durations = []
        for camera, (height, width) in (("top", (48, 64)), ("side", (30, 30))):
            frames, times, duration = decode(folder / f"image.{camera}.mp4")
            assert len(frames) == result.steps + 1
            assert frames[0].shape == (height, width, 3)
            assert close_to(frames[0], picture(result.seed, 0, height, width))
            assert close_to(frames[-1], picture(result.seed, result.steps, height, width))
            # Stamped on the robot's clock: a frame a step, the first at the reset.
            assert times == pytest.approx([step / HZ for step in range(result.steps + 1)])
            durations.append(duration)
        assert durations[0] == pytest.approx(durations[1])
        lines = trajectory(folder / "trajectory.jsonl.gz")
        assert [line["step"] for line in lines] == list(range(result.steps))
        assert [line["robot_time"] for line in lines] == pytest.approx([s / HZ for s in range(result.steps)])
        assert all(line["action"] == [0.25, -0.5] for line in lines)
        assert [line["done"] for line in lines] == [False] * (result.steps - 1) + [True]
        assert lines[-1]["success"] is result.success
        # numpy numbers become numbers, and what JSON cannot hold is left out.
        assert lines[-1]["metrics"] == {"t": float(result.steps), "speed": 0.5}


def test_a_lower_frame_rate_keeps_every_nth_step_and_the_last(tmp_path: Path) -> None:
    # 10 Hz recorded at 3 fps: a frame every round(10 / 3) = 3 steps, and always the episode's last.
    results = run(tmp_path, Recording(video=True, trajectory=True, folder=str(tmp_path), fps=3))
    for result in results:
        folder = episode_folder(tmp_path, result.index)
        kept = sorted({*range(0, result.steps + 1, 3), result.steps})
        for camera in ("top", "side"):
            frames, times, _ = decode(folder / f"image.{camera}.mp4")
            assert times == pytest.approx([step / HZ for step in kept])
            size = (48, 64) if camera == "top" else (30, 30)
            assert all(close_to(f, picture(result.seed, s, *size)) for f, s in zip(frames, kept, strict=True))
        assert len(trajectory(folder / "trajectory.jsonl.gz")) == result.steps  # every step still


def test_odd_sizes_are_padded_to_even(tmp_path: Path) -> None:
    results = run(tmp_path, Recording(video=True, folder=str(tmp_path)), top=(17, 31), side=(9, 10))
    folder = episode_folder(tmp_path, results[0].index)
    top, _, _ = decode(folder / "image.top.mp4")
    side, _, _ = decode(folder / "image.side.mp4")
    assert top[0].shape == (18, 32, 3) and side[0].shape == (10, 10, 3)
    assert close_to(top[0], picture(results[0].seed, 0, 17, 31))
    assert not (folder / "trajectory.jsonl.gz").exists()


def test_a_camera_seen_late_still_starts_at_the_first_frame(tmp_path: Path) -> None:
    results = run(tmp_path, Recording(video=True, folder=str(tmp_path)), late=True)
    for result in results:
        folder = episode_folder(tmp_path, result.index)
        side, side_times, side_duration = decode(folder / "image.side.mp4")
        _, _, top_duration = decode(folder / "image.top.mp4")
        assert side_times[0] == 0 and side_duration == pytest.approx(top_duration)
        assert side[0].max() < 40  # black until the camera shows up
        assert close_to(side[1], picture(result.seed, 3, 30, 30))


def test_frames_that_change_size_are_fitted_and_said(tmp_path: Path) -> None:
    results = run(tmp_path, Recording(video=True, folder=str(tmp_path)), grow=True)
    for result in results:
        assert result.finished and result.recording_error is not None
        assert "image.top" in result.recording_error and "cropped or padded" in result.recording_error
        frames, _, _ = decode(episode_folder(tmp_path, result.index) / "image.top.mp4")
        assert len(frames) == result.steps + 1 and {f.shape for f in frames} == {(48, 64, 3)}


def test_a_recording_that_fails_never_fails_its_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the episode folders should go")
    plain = run(tmp_path, None)
    results = run(tmp_path, Recording(video=True, trajectory=True, folder=str(blocked)))
    assert [r.outcome() for r in results] == [r.outcome() for r in plain]
    for result in results:
        assert result.artifacts == [] and result.recording_error
        assert result.recording_error.startswith("recording: ")

    # The disk fills in the middle of an episode: its videos go, the note stays, the trajectory is kept.
    written = 0
    encode = recording_module._Video._encode

    def full_disk(video: Any, frame: Any, pts: int) -> None:
        nonlocal written
        written += 1
        if written > 4:
            raise OSError(28, "No space left on device")
        encode(video, frame, pts)

    monkeypatch.setattr(recording_module._Video, "_encode", full_disk)
    results = run(tmp_path, Recording(video=True, trajectory=True, folder=str(tmp_path / "full")))
    assert [r.outcome() for r in results] == [r.outcome() for r in plain]
    first = results[0]
    assert first.recording_error == "video: OSError: [Errno 28] No space left on device"
    assert first.artifacts == [f"episodes/{first.index:06d}/trajectory.jsonl.gz"]
    assert sorted(p.name for p in episode_folder(tmp_path / "full", first.index).iterdir()) == [
        "trajectory.jsonl.gz"
    ]


def test_a_benchmark_without_images_records_no_video_and_says_so(tmp_path: Path) -> None:
    work = Work(
        Component(toy("Tally")), Component(toy("Rows")), recording=Recording(video=True, folder=str(tmp_path))
    )
    outcome = evaluate(RunRequest(work=work, trials=1, workers=0))
    assert outcome.complete
    assert all(r.recording_error == NO_IMAGES and r.artifacts == [] for r in outcome.results)
    assert not list(tmp_path.rglob("*.mp4"))


def test_results_keep_their_artifacts_through_a_dict() -> None:
    result = EpisodeResult(
        index=3,
        task="short",
        trial=0,
        seed=1,
        repeat=False,
        timing=Timing(simulation=0.5, recording=0.25),
        artifacts=["episodes/000003/image.top.mp4"],
        recording_error="video: something",
    )
    again = EpisodeResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    assert "artifacts" not in result.outcome() and "recording_error" not in result.outcome()
    assert (
        EpisodeResult.from_dict({k: v for k, v in result.to_dict().items() if k != "artifacts"}).artifacts
        == []
    )


def test_recording_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match=r"^fps: "):
        Recording(video=True, folder="x", fps=0)
    with pytest.raises(ValueError, match=r"^folder: "):
        Recording(trajectory=True)
    assert not Recording().active and Recording(video=True, folder="x", fps=30).every(80) == 3
    assert Recording(video=True, folder="x", fps=120).every(80) == 1
    assert jsonable({"a": np.arange(3), "b": {1, 2}, 2: (np.float64(np.inf), "s", float("nan"))}) == {
        "a": [0, 1, 2],
        "2": [None, "s", None],
    }


# --- the CLI --------------------------------------------------------------------------------------------

runner = CliRunner()


def cli(tmp_path: Path, *extra: str, benchmark: str = "", policy: str = "") -> tuple[int, str]:
    result = runner.invoke(
        app,
        [
            "eval",
            "run",
            "--benchmark",
            benchmark or ref("Squares"),
            "--policy",
            policy or ref("Steady"),
            "--in-process",
            "--out",
            str(tmp_path / "run"),
            "--overwrite",  # a test may run twice into one folder
            *extra,
        ],
    )
    return result.exit_code, result.output


def test_the_cli_records_videos_the_report_plays(tmp_path: Path) -> None:
    code, output = cli(tmp_path, "--record", "video", "--trials", "2")
    assert code == 0, output
    folder = tmp_path / "run"
    html = (folder / "report.html").read_text()
    # A media fragment (#t=…) has the browser show the first frame before play; the file is the rest.
    sources = [src.split("#")[0] for src in re.findall(r'<video [^>]*src="([^"]+)"', html)]
    assert len(sources) == 2 * 4  # two cameras, four episodes
    assert all((folder / src).is_file() for src in sources)
    assert {Path(src).name for src in sources} == {"image.top.mp4", "image.side.mp4"}
    assert 'preload="metadata"' in html and "together" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing from elsewhere: it plays offline
    assert not list(folder.rglob("*.jsonl.gz")) and not list(folder.rglob("*.partial"))
    report = json.loads((folder / "report.json").read_text())
    assert report["recording"]["videos"] == 8 and report["recording"]["problems"] == []
    assert report["timing"]["per_step_ms"]["recording"] > 0
    assert "recording" in output  # the timing line lists it


def test_the_cli_records_trajectories_at_a_lower_rate(tmp_path: Path) -> None:
    code, output = cli(
        tmp_path, "--record", "video", "--record", "trajectory", "--record-fps", "5", "--tasks", "long"
    )
    assert code == 0, output
    episode = tmp_path / "run" / "episodes" / "000000"
    assert len(trajectory(episode / "trajectory.jsonl.gz")) == STEPS["long"]
    _, times, _ = decode(episode / "image.top.mp4")
    assert times == pytest.approx([s / HZ for s in range(0, STEPS["long"] + 1, 2)])
    html = (tmp_path / "run" / "report.html").read_text()
    assert 'href="episodes/000000/trajectory.jsonl.gz"' in html


def test_the_cli_records_nothing_unless_asked(tmp_path: Path) -> None:
    for extra in ((), ("--record", "none")):
        code, output = cli(tmp_path, *extra)
        assert code == 0, output
        assert not (tmp_path / "run" / "episodes").exists()
        assert "<video" not in (tmp_path / "run" / "report.html").read_text()
        assert "<script" not in (tmp_path / "run" / "report.html").read_text()
    code, output = cli(tmp_path, "--record", "video,sound")
    assert code == 2 and "--record" in output and "sound" in output
    code, output = cli(tmp_path, "--record", "none,video")
    assert code == 2 and "none" in output


def test_the_cli_warns_once_when_there_are_no_images_to_record(tmp_path: Path) -> None:
    code, output = cli(
        tmp_path, "--record", "video", "--trials", "4", benchmark=toy("Tally"), policy=toy("Rows")
    )
    assert code == 0, output
    assert output.count("warning:") == 1 and "no images" in output and "12 episodes" in output
    assert not list((tmp_path / "run").rglob("*.mp4"))


def test_video_of_a_benchmark_with_no_camera_asked_is_refused_before_anything_plays(tmp_path: Path) -> None:
    code, output = cli(
        tmp_path, "--record", "video", "--tasks", "reach-v3", benchmark="mt10", policy="expert"
    )
    said = " ".join(output.replace("│", " ").split())
    assert code == 2, output
    assert "mt10 renders no camera unless asked, so no video would be written" in said, said
    assert """add --param 'benchmark.cameras=["corner"]'""" in said and "behindGripper" in said, said
    assert not (tmp_path / "run").exists()  # nothing played


@pytest.mark.slow
def test_a_metaworld_episode_records_its_camera(tmp_path: Path) -> None:
    code, output = cli(
        tmp_path,
        "--record",
        "video",
        "--param",
        'benchmark.cameras=["corner"]',
        "--tasks",
        "reach-v3",
        "--trials",
        "1",
        benchmark="mt10",
        policy="expert",
    )
    assert code == 0, output
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    steps = report["timing"]["steps"]
    video = tmp_path / "run" / "episodes" / "000000" / "image.corner.mp4"
    frames, _, _ = decode(video)
    assert len(frames) == steps + 1 and frames[0].shape == (224, 224, 3)
    assert frames[0].std() > 10  # a scene, not a blank
    assert "episodes/000000/image.corner.mp4" in (tmp_path / "run" / "report.html").read_text()


def test_a_browser_plays_an_episodes_cameras_together(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    code, output = cli(tmp_path, "--record", "video", "--tasks", "long", "--trials", "1")
    assert code == 0, output
    page_url = (tmp_path / "run" / "report.html").as_uri()
    with sync_api.sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(
                executable_path=browser_path, args=["--autoplay-policy=no-user-gesture-required"]
            )
        except Exception as exc:  # no browser on this machine
            pytest.skip(f"no Chromium to play the videos in: {str(exc).splitlines()[0]}")
        try:
            page = browser.new_page()
            failures: list[str] = []
            page.on("pageerror", lambda error: failures.append(str(error)))
            page.goto(page_url)
            videos = "Array.from(document.querySelectorAll('video'))"
            page.wait_for_function(f"{videos}.every(v => v.readyState >= 1)", timeout=10_000)
            sizes = page.evaluate(f"{videos}.map(v => [v.videoWidth, v.videoHeight, v.duration])")
            assert sorted(tuple(s[:2]) for s in sizes) == [(30, 30), (64, 48)]
            assert sizes[0][2] == pytest.approx(sizes[1][2])
            page.click("button.together")
            page.wait_for_function(f"{videos}.every(v => v.currentTime > 0.2)", timeout=10_000)
            page.click("button.together")
            times = page.evaluate(f"{videos}.map(v => [v.paused, v.currentTime])")
            assert all(paused for paused, _ in times)
            assert abs(times[0][1] - times[1][1]) < 0.1  # in step
            assert not failures
        finally:
            browser.close()
