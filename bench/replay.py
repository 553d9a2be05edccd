"""What a 3D replay costs against video: MT10, the scripted expert, the same episodes three ways in one run.

  none     state only, nothing recorded (the floor)
  replay   `--record replay`: each step the moving bodies' poses; each episode a .seqreplay, each model a .glb
  video    `--record video` with the demo's camera (corner, 128², reflections off): a frame rendered and
           encoded each step
Each way is the engine in this process (`--in-process`), `--rounds` times interleaved so that a change in the
machine's load falls on all three; each way's best round counts. Prints, per step: the wall and CPU time of
each way (the whole eval: its benchmark's build too, a large share of a short eval's) and the episodes' own
time (their wall time alone), the extra a replay costs over none (target <= 3%) and what the video costs
beside it; the replay's own recording time a step (on the episode's clock: the poses and the files), and
the scenes apart (ten models here, each built anew by each round's fresh benchmark, found on a thread of
their own while the episode plays: the CPU they take shows in the CPU column, not the wall's); and the
files: a replay's bytes an episode against the same episode's 128² video (target <= 10%), and a scene's
bytes (once a model, shared by its episodes). The scenes' disk cache (replay3d.scene_cache) starts empty in
a folder of the bench's own: the first round's replay is cold (each model exported), the later rounds' warm
(each read back, as every eval after a machine's first is); both are printed.
Then `--pairs` pairs of none and replay alone, in turn (none first in one pair, replay first in the next): a
pair's two runs are minutes apart at most, so a change of the machine's speed falls on both, and the mean of
the pairs' ratios comes with its 95% interval (Student's t): the wall's cost of a replay as this machine's
noise lets it be told, where a best-of-rounds figure is one draw of that noise. Finer still, `--interleaved`
rounds play each episode both ways one run apart (`interleaved`: in one run the even episodes record and the
odd ones do not, in the next the other way round, at `--interleaved-trials` a task, 50 by default as in
MT10's own eval), paired by the episode: a change of the machine's speed then falls within a run's seconds
of both plays and on both halves of each run alike, and the extra wall time comes with its share spent in
the recorder and its share spent beside it (the simulation's and the policy's code running slower), for
all episodes and apart for each task's first two: a model's first recorded episode in a run has its scene
found on a thread beside its steps, whose share of the interpreter's lock the simulation's Python waits for
(~5 ms an episode; the others' simulation costs no more than the bare plays'). An episode's rounds
are averaged before the interval is taken, over the episodes: its rounds play the same steps, so they are
not independent draws. The same rounds again with neither half recording (a control, A/A) say what that
arithmetic finds where there is no difference at all: the floor under the figure on this machine.
Ten episodes a task by default (100 in all): MT10's own eval plays fifty (its 50 seeds), and what a replay
costs once a model a process (its scene found, ~20 ms from the cache) weighs 50/N times more in an eval of N
a task than in that one; `--trials 3` shows it at its heaviest.
Run with `make bench` or `python bench/replay.py [--trials N] [--rounds N] [--pairs N] [--interleaved N]`.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from machine import machine

os.environ.setdefault("MUJOCO_GL", "egl")
WAYS = ("none", "replay", "video")
CAMERA = {"cameras": ["corner"], "image_size": 128, "reflections": False}


def play(way: str, trials: int, folder: Path) -> dict[str, Any]:
    """One way's run: wall seconds, steps, the engine's recording seconds, export seconds, files' sizes."""
    from yardstick.engine import Component, RunRequest, Work, evaluate
    from yardstick.engine.recording import Recording
    from yardstick.replay3d import mujoco_scene

    recording = None
    params: dict[str, Any] = {}
    if way == "replay":
        recording = Recording(replay=True, folder=str(folder))
    elif way == "video":
        recording, params = Recording(video=True, folder=str(folder)), dict(CAMERA)
    exported = _timed_scenes(mujoco_scene)
    work = Work(Component("mt10", params), Component("expert"), recording=recording)
    started, cpu = time.perf_counter(), time.process_time()
    outcome = evaluate(RunRequest(work=work, trials=trials, workers=0))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert outcome.complete, [r.error for r in outcome.results if r.error]
    steps = sum(r.steps for r in outcome.results)
    replays = sorted(folder.rglob("*.seqreplay"))
    videos = sorted(folder.rglob("*.mp4"))
    scenes = sorted(folder.rglob("*.glb"))
    return {
        "wall": wall,
        "cpu": cpu,
        "steps": steps,
        "episodes": len(outcome.results),
        "played": sum(r.wall_seconds for r in outcome.results),  # the episodes alone: no build, no start-up
        "recording": sum(r.timing.recording for r in outcome.results),
        "rendering": sum(r.timing.rendering for r in outcome.results),
        "export": sum(exported),
        "replay_bytes": [p.stat().st_size for p in replays],
        "video_bytes": [p.stat().st_size for p in videos],
        "scene_bytes": [p.stat().st_size for p in scenes],
    }


def paired(trials: int, pairs: int, scratch: Path) -> list[float]:
    """Replay's wall time over none's, a pair of runs each, the order turned each pair."""
    ratios = []
    for pair in range(pairs):
        order = ("none", "replay") if pair % 2 == 0 else ("replay", "none")
        walls = {way: play(way, trials, scratch / f"pair-{pair}-{way}")["wall"] for way in order}
        ratios.append(walls["replay"] / walls["none"])
    return ratios


class Play(NamedTuple):
    """One play of an episode: its wall seconds and what its engine's clock gave each part (`Timing`)."""

    wall: float
    recording: float
    simulation: float
    policy: float
    overhead: float


def interleaved(
    trials: int, rounds: int, scratch: Path, *, control: bool = False
) -> dict[int, list[tuple[Play, Play]]]:
    """Each episode played both ways one run apart: in one run of replay the even episodes record their
    replay and the odd ones record nothing, in the next the other way round, `rounds` times; an episode's
    two plays are paired by its index (same task, same seed, same steps). Per episode, a pair a round: the
    recorded play and the bare one. A play that records nothing keeps a recorder that does nothing (the
    loop's two calls to it a step, ~0.1% of a step) where an eval without recording has none. `control`:
    neither half records (an A/A run): what the same arithmetic says of no difference at all, this machine's
    floor for the figure."""
    from yardstick.engine import Component, RunRequest, Work, evaluate, loop
    from yardstick.engine.recording import EpisodeRecorder, Recording

    nothing = Recording()

    class Half(EpisodeRecorder):
        """A recorder as the run's recording says for the episodes of one parity, one of nothing else."""

        parity = 0

        @classmethod
        def open(
            cls, recording: Recording, index: int, hz: float, *args: Any, **kwargs: Any
        ) -> EpisodeRecorder:
            if index % 2 != cls.parity:
                recording, args, kwargs = nothing, (), {}
            return super().open(recording, index, hz, *args, **kwargs)

    plays: dict[int, dict[bool, list[Play]]] = {}
    setattr(loop, "EpisodeRecorder", Half)  # noqa: B010 - the name loop.py looks up; not exported
    try:
        for round_ in range(rounds):
            for turn in range(2):
                Half.parity = (round_ + turn) % 2
                folder = scratch / f"interleaved-{round_}-{turn}"
                work = Work(
                    Component("mt10"),
                    Component("expert"),
                    recording=nothing if control else Recording(replay=True, folder=str(folder)),
                )
                outcome = evaluate(RunRequest(work=work, trials=trials, workers=0))
                assert outcome.complete, [r.error for r in outcome.results if r.error]
                for result in outcome.results:
                    recorded = result.index % 2 == Half.parity
                    timing = result.timing
                    play = Play(
                        result.wall_seconds,
                        timing.recording,
                        timing.simulation + timing.rendering,
                        timing.policy,
                        timing.overhead,
                    )
                    plays.setdefault(result.index, {True: [], False: []})[recorded].append(play)
    finally:
        setattr(loop, "EpisodeRecorder", EpisodeRecorder)  # noqa: B010
    return {index: list(zip(both[True], both[False], strict=True)) for index, both in plays.items()}


def t95(count: int) -> float:
    """Student's t two-sided 95% point for `count` values."""
    from yardstick.scoring.rates import beta_ppf

    # Through the beta distribution: P(|T| > t) = I_x(df/2, 1/2), x = df/(df + t^2).
    df = count - 1
    x = beta_ppf(0.05, df / 2, 0.5)
    return math.sqrt(df * (1 - x) / x)


def interval(ratios: list[float]) -> tuple[float, float]:
    """The mean of `ratios` and the half-width of its 95% interval (Student's t)."""
    count = len(ratios)
    return statistics.mean(ratios), t95(count) * statistics.stdev(ratios) / math.sqrt(count)


def _timed_scenes(module: Any) -> list[float]:
    """Seconds each scene of this run takes, exported or read from the disk cache (wrapped while it plays)."""
    seconds: list[float] = []
    original = module.__dict__.setdefault("_untimed_scene", module._kept_or_exported)

    def export(model: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(model)
        finally:
            seconds.append(time.perf_counter() - started)

    module._kept_or_exported = export
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--trials", type=int, default=10, help="episodes a task (MT10 has ten tasks; its own eval plays 50)"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=6, help="pairs of none and replay for the interval")
    parser.add_argument(
        "--interleaved",
        type=int,
        default=4,
        help="rounds of episodes played both ways, one run apart (even: each way first as often)",
    )
    parser.add_argument(
        "--interleaved-trials",
        type=int,
        default=50,
        help="episodes a task in those rounds (50: MT10's own eval, its 50 seeds)",
    )
    args = parser.parse_args()
    print(machine())
    best: dict[str, dict[str, Any]] = {}
    cold: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["YARDSTICK_SCENE_CACHE"] = str(Path(scratch) / "scenes-cache")
        for round_ in range(args.rounds):
            for way in WAYS:
                measured = play(way, args.trials, Path(scratch) / f"{way}-{round_}")
                if way == "replay" and round_ == 0:
                    cold = measured  # the cache empty: every scene exported
                elif way not in best or measured["wall"] < best[way]["wall"]:
                    best[way] = measured
        ratios = paired(args.trials, args.pairs, Path(scratch))
        episodes = interleaved(args.interleaved_trials, args.interleaved, Path(scratch))
        control = interleaved(args.interleaved_trials, args.interleaved, Path(scratch) / "aa", control=True)
    best.setdefault("replay", cold)
    none, replay, video = (best[w] for w in WAYS)
    steps = none["steps"]
    assert replay["steps"] == video["steps"] == steps, "the three ways played different episodes"
    per_step = {w: best[w]["wall"] / steps * 1e3 for w in WAYS}
    cpu_step = {w: best[w]["cpu"] / steps * 1e3 for w in WAYS}
    print(
        f"MT10 expert, {none['episodes']} episodes ({args.trials} a task), {steps} steps a way, best of "
        f"{args.rounds} rounds"
    )
    played = {w: best[w]["played"] / steps * 1e3 for w in WAYS}
    for way in WAYS:
        print(
            f"  {way:<7} {per_step[way]:7.3f} ms a step, CPU {cpu_step[way]:7.3f} ms; "
            f"{played[way]:7.3f} ms a step played (the episodes alone, the benchmark's build left out)"
        )
    warm = "warm" if args.rounds > 1 else "cold (one round: no warm cache)"
    print(
        f"replay ({warm}) costs {per_step['replay'] / per_step['none'] - 1:+.1%} of a step over none "
        f"(target <= +3%; CPU {cpu_step['replay'] / cpu_step['none'] - 1:+.1%}); cold "
        f"{cold['wall'] / steps * 1e3 / per_step['none'] - 1:+.1%}; video "
        f"{per_step['video'] / per_step['none'] - 1:+.1%}"
    )
    print(
        f"played alone, replay costs {played['replay'] / played['none'] - 1:+.1%} of a step over none; "
        f"its recording on the episode's clock is {replay['recording'] / none['played']:.1%} of none's step"
    )
    if len(ratios) > 1:
        mean, half = interval(ratios)
        print(
            f"paired, {len(ratios)} pairs of none and replay in turn: replay costs {mean - 1:+.1%} "
            f"(95% interval {mean - half - 1:+.1%} to {mean + half - 1:+.1%}) of the eval's wall time; "
            f"the pairs' ratios {min(ratios) - 1:+.1%} to {max(ratios) - 1:+.1%}"
        )
    if len(episodes) > 1:
        say_interleaved(episodes, trials=args.interleaved_trials)
        say_interleaved(control, "control: neither half records", trials=args.interleaved_trials)
    for label, measured in (("cold", cold), (warm.split()[0], replay)):
        ms = {key: measured[key] / steps * 1e3 for key in ("recording", "export")}
        how = "exported" if measured is cold else "read from the disk cache"
        each = measured["export"] / 10 * 1e3
        print(
            f"replay's recording, {label}: {ms['recording']:.3f} ms a step on the episode's clock "
            f"({ms['recording'] / per_step['none']:.1%} of one): the poses and the files; the scenes beside "
            f"it on their thread {ms['export']:.3f} ms a step (ten models, {each:.0f} ms each, once a model "
            f"a process, {how})"
        )
    print(
        f"video: rendering {video['rendering'] / steps * 1e3:.3f} ms and encoding "
        f"{video['recording'] / steps * 1e3:.3f} ms a step"
    )
    replay_kib = statistics.mean(replay["replay_bytes"]) / 1024
    video_kib = statistics.mean(video["video_bytes"]) / 1024
    scene_mib = statistics.mean(replay["scene_bytes"]) / 2**20
    print(
        f"an episode's replay: {replay_kib:.1f} KiB against its 128² video's {video_kib:.1f} KiB "
        f"({replay_kib / video_kib:.0%}; target <= 10%); a scene: {scene_mib:.2f} MiB, once a model "
        f"({len(replay['scene_bytes'])} here)"
    )


def say_interleaved(
    episodes: dict[int, list[tuple[Play, Play]]], label: str = "replay", *, trials: int = 0
) -> None:
    """The episode pairs' figures: the extra wall time of a recorded play over its bare twin, as a share of
    the bare plays' (the differences' mean over the bare mean; its interval from the spread of the episodes'
    own mean differences), and where the engine's clock puts it: the recording's own time, and what the
    simulation, the policy and the engine itself took more beside it. With `trials` (episodes a task, the
    runs' order task by task), the same apart for each task's first two episodes, one of which is its
    model's first recorded episode in each run (its scene found on a thread beside its steps, once a model
    a process), and for the others."""
    differences: dict[int, Play] = {}
    bares: list[float] = []
    for index, pairs in episodes.items():
        mean = [statistics.mean(part[i] - bare[i] for part, bare in pairs) for i in range(len(Play._fields))]
        differences[index] = Play(*mean)
        bares.append(statistics.mean(bare.wall for _, bare in pairs))
    bare = statistics.mean(bares)
    walls = [difference.wall for difference in differences.values()]
    half = t95(len(walls)) * statistics.stdev(walls) / math.sqrt(len(walls))
    extra = statistics.mean(walls)
    rounds = sum(len(pairs) for pairs in episodes.values()) // len(episodes)
    print(
        f"interleaved, {len(episodes)} episodes played both ways {rounds} times each, one run apart; "
        f"{label}: costs {extra / bare:+.1%} (95% interval {(extra - half) / bare:+.1%} to "
        f"{(extra + half) / bare:+.1%}) of an episode's wall time (target <= +3%): "
        + _split(list(differences.values()), bare)
    )
    if trials > 2:
        firsts = [d for index, d in differences.items() if index % trials < 2]
        others = [d for index, d in differences.items() if index % trials >= 2]
        wall = statistics.mean(d.wall for d in firsts) * 1e3
        print(
            f"  each task's first two episodes (a model's first recorded one in a run, its scene found "
            f"beside it): {wall:+.1f} ms each, {_split(firsts, bare)}; the {len(others)} others "
            f"{statistics.mean(d.wall for d in others) / bare:+.1%}: {_split(others, bare)}"
        )


def _split(differences: list[Play], bare: float) -> str:
    """Where the engine's clock puts the mean extra time of `differences`, as shares of `bare` seconds."""
    share = {name: statistics.mean(getattr(d, name) for d in differences) / bare for name in Play._fields}
    return (
        f"its recording {share['recording']:+.1%}, the simulation {share['simulation']:+.1%}, the policy "
        f"{share['policy']:+.1%}, the engine's own {share['overhead']:+.1%}"
    )


if __name__ == "__main__":
    main()
