"""`yardstick eval run`: play a policy on a benchmark here, and report per task."""

from __future__ import annotations

import datetime as dt
import inspect
import json
import re
import shutil
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from yardstick.cli.compare_cmd import compare
from yardstick.cli.display import (
    console,
    fail,
    print_table,
    results_table,
    run_progress,
    stopping_line,
    timing_line,
)
from yardstick.cli.exits import Exit
from yardstick.cli.options import (
    ExecutorOption,
    RayAddressOption,
    no_cluster,
    parse_params,
    parse_seeds,
    run_cluster,
    split_list,
)
from yardstick.engine import BuildError, Component, Playback, RunRequest, Work, evaluate, prepare
from yardstick.engine.journal import JOURNAL, Journal, foreign_episodes, read_journal
from yardstick.engine.recording import NO_IMAGES, Recording
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.rounds import evaluate_until, planned_at_cap
from yardstick.engine.runtime import class_of
from yardstick.report import build_report
from yardstick.scoring import Gate, parse_gate
from yardstick.scoring.rates import DEFAULT_INTERVAL, INTERVALS
from yardstick.scoring.sequential import ALPHA, MAX_TRIALS, SequentialEval, Until, parse_until
from yardstick.sdk.errors import AuthoringError
from yardstick.web.run_folder import write_run_folder

eval_app = typer.Typer(help="Evaluations.", no_args_is_help=True)
eval_app.command("compare")(compare)


@eval_app.command("run")
def run(
    benchmark: str = typer.Option(
        ..., "--benchmark", "-b", help="mt10, mt50, gym:<id>, or module:Class / file.py:Class."
    ),
    policies: list[str] = typer.Option(
        ..., "--policy", "-p", metavar="<str>", help="expert, random, or module:Class / file.py:Class."
    ),
    tasks: str | None = typer.Option(None, help="Comma-separated tasks (default: all)."),
    trials: int | None = typer.Option(
        None, min=1, help="Episodes per task; trial k runs seed k mod len(seeds). Default: one per seed."
    ),
    seeds: str | None = typer.Option(None, help="Seeds to use, among the benchmark's: 0,1,5 or 0..9."),
    workers: int | None = typer.Option(None, min=1, help="Worker processes (default: one per core)."),
    in_process: bool = typer.Option(False, "--in-process", help="Play everything in this process."),
    executor: str = ExecutorOption,
    ray_address: str | None = RayAddressOption,
    worlds: int | None = typer.Option(
        None, min=1, help="Worlds a vectorized benchmark builds (default: its most)."
    ),
    param: list[str] = typer.Option(
        [],
        "--param",
        help="benchmark.NAME=VALUE or policy.NAME=VALUE, laid over the "
        "constructor's arguments; VALUE is JSON or text. Repeatable.",
    ),
    charge_inference: bool = typer.Option(
        False,
        "--charge-inference",
        help="The robot moves on while the policy thinks (measured time, or --latency-ms).",
    ),
    latency_ms: float | None = typer.Option(
        None,
        min=0,
        help="A fixed inference latency charged to the robot's clock (implies --charge-inference).",
    ),
    call_timeout: float = typer.Option(
        60.0, min=0.01, help="Seconds a single policy or benchmark call may take."
    ),
    startup_timeout: float = typer.Option(
        60.0, min=0.1, help="Seconds to wait for a remote policy's server to come up and be ready."
    ),
    out: Path | None = typer.Option(None, help="The run folder (default: runs/<time>-<benchmark>-<policy>)."),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Go on with the run in --out: play only the episodes its episodes.jsonl lacks (a killed run).",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace the run in --out (it is refused otherwise)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
    record: list[str] = typer.Option(
        [],
        "--record",
        help="What to record of each episode into the run folder: video (an mp4 per camera), trajectory "
        "(gzip JSON lines), replay (the 3D replay: a .seqreplay of poses, drawn in the scene's .glb under "
        "scenes/), or none. Repeatable or a comma list: --record video,trajectory.",
    ),
    record_fps: float | None = typer.Option(
        None, min=0.001, help="Frames a second of the videos (default: one a step, the policy's rate)."
    ),
    gate: list[str] = typer.Option(
        [],
        "--gate",
        help='A condition the run must meet, e.g. "success>=0.9", '
        '"success.low>=0.8", "success[reach-v3]>0.5". Repeatable; exit 8 if not met.',
    ),
    interval: str = typer.Option(
        DEFAULT_INTERVAL,
        "--interval",
        help="The confidence interval of a success rate: clopper-pearson (exact: its coverage holds at every "
        "rate), jeffreys or wilson (narrower, below 95% near 0 and 1; see bench/coverage.py).",
    ),
    until: str | None = typer.Option(
        None,
        "--until",
        help='Play in rounds until "width<=W" (each task\'s interval at most W wide) or "decided" (every '
        "--gate decided either way), up to --max-trials a task. Intervals are then anytime-valid "
        "confidence sequences; exit 9 if a gate is still undecided at the cap.",
    ),
    max_trials: int | None = typer.Option(
        None, "--max-trials", min=1, help="With --until: the most episodes a task plays (default 200)."
    ),
    alpha: float = typer.Option(
        ALPHA, "--alpha", min=1e-6, max=0.5, help="With --until: the error the rule allows (0.05: 95%)."
    ),
) -> None:
    """Evaluate a policy on a benchmark: a progress bar, a table per task, and a run folder with
    report.json, episodes.csv and report.html."""
    if len(policies) != 1:  # click would keep the last and drop the others without a word
        raise typer.BadParameter(
            f"eval run plays one policy, not {len(policies)}; to play two on the same seeds and compare "
            "them: yardstick eval compare -b BENCHMARK -p A -p B",
            param_hint="--policy",
        )
    [policy] = policies
    ray_at = run_cluster(executor, ray_address, in_process)
    try:
        gates: list[Gate] = [parse_gate(text) for text in gate]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--gate") from None
    if interval not in INTERVALS:
        raise typer.BadParameter(
            f"{interval!r} is not one of {', '.join(INTERVALS)}", param_hint="--interval"
        )
    rule = _parse_until(until, trials, max_trials)
    if rule is None and alpha != ALPHA:
        raise typer.BadParameter(
            "--alpha is the error of a stopping rule: give --until too", param_hint="--alpha"
        )
    benchmark_params, policy_params = parse_params(param)
    recorded = _parse_record(record)
    folder = out or Path("runs") / f"{dt.datetime.now():%Y%m%d-%H%M%S}-{_slug(benchmark)}-{_slug(policy)}"
    _claim_folder(folder, resume=resume, overwrite=overwrite, out_given=out is not None, rule=rule)
    recording = (
        Recording(
            video="video" in recorded,
            trajectory="trajectory" in recorded,
            replay="replay" in recorded,
            folder=str(folder.resolve()),
            fps=record_fps,
        )
        if recorded
        else None
    )
    work = Work(
        benchmark=Component(benchmark, benchmark_params),
        policy=Component(policy, policy_params),
        playback=Playback(charge_inference or latency_ms is not None, latency_ms),
        call_timeout_s=call_timeout,
        startup_timeout_s=startup_timeout,
        worlds=worlds,
        recording=recording,
    )
    request = RunRequest(
        work=work,
        tasks=split_list(tasks),
        trials=trials,
        seeds=parse_seeds(seeds),
        workers=0 if in_process else workers,
        ray_address=ray_at,
    )
    cap = max_trials or MAX_TRIALS
    stopping: SequentialEval | None = None
    done = read_journal(folder) if resume else []
    try:
        if recording is not None and recording.video:
            _refuse_video_without_a_camera(work, benchmark, benchmark_params)
        if rule is None:
            _, _, planned = prepare(request)
        else:
            planned = planned_at_cap(request, cap)
            stopping = _sequential(planned, rule, gates, alpha)
        if foreign := foreign_episodes(done, planned):
            raise typer.BadParameter(
                f"{folder}/{JOURNAL} holds episodes {foreign[:5]} of another plan than this command's: "
                "resume with the command that started the run",
                param_hint="--resume",
            )
        landed = {result.index for result in done}
        remaining = [spec for spec in planned if spec.index not in landed]
        with Journal(folder) as journal, run_progress(len(remaining), quiet=False) as progress:

            def landing(result: EpisodeResult) -> None:
                journal.append(result)
                progress(result)

            if stopping is None:
                outcome = evaluate(request, on_result=landing, episodes=remaining)
            else:
                outcome = evaluate_until(request, stopping, cap, on_result=landing)
        if stopping is None:
            outcome.planned = planned
        outcome.results = sorted([*done, *outcome.results], key=lambda result: result.index)
    except (AuthoringError, BuildError) as exc:
        fail(Exit.CALLER, str(exc))
    except typer.BadParameter:
        raise
    except ConnectionError as exc:  # Ray's when no cluster answers at the address
        fail(Exit.CALLER, no_cluster(str(ray_at), exc))
    except Exception as exc:
        fail(Exit.PLATFORM, f"internal error: {type(exc).__name__}: {exc}")

    report = build_report(outcome, interval=interval, stopping=stopping)
    files = write_run_folder(folder, report, outcome.results)
    if stopping is not None and stopping.until.kind == "decided":
        verdicts = [_decided(g, stopping) for g in gates]
    else:
        verdicts = [g.check(report["summary"]) for g in gates]
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        print_table(results_table(report))
        if stopping is not None:
            console.print(stopping_line(report), soft_wrap=True)
        console.print(timing_line(report), style="dim")
    for error in report["errors"][:10]:
        console.print(
            f"[red]episode {error['index']} ({escape(str(error['task']))}, seed {error['seed']}):[/red] "
            f"{escape(error['error'])}"
        )
    if len(report["errors"]) > 10:
        console.print(
            f"[red]... and {len(report['errors']) - 10} more failed episodes (see report.json)[/red]"
        )
    _recording_warnings(report)
    for met, line in verdicts:
        shown = "[yellow]undecided" if met is None else "[green]met" if met else "[red]not met"
        console.print(f"gate {shown}[/]: {line}")
    # Where to look, last: a path to open, and a file:// link a terminal makes clickable.
    console.print(
        f"report: {files['html']}  (open {Path(files['html']).resolve().as_uri()} in a browser)",
        soft_wrap=True,
    )

    if outcome.interrupted:
        console.print("[yellow]interrupted: the report is incomplete[/yellow]")
        raise typer.Exit(Exit.INTERRUPTED)
    if report["errors"]:
        raise typer.Exit(Exit.CALLER)
    if any(met is False for met, _ in verdicts):
        raise typer.Exit(Exit.GATE)
    if any(met is None for met, _ in verdicts):
        raise typer.Exit(Exit.UNDECIDED)


def _claim_folder(
    folder: Path, *, resume: bool, overwrite: bool, out_given: bool, rule: Until | None
) -> None:
    """Refuse to write a run over another unless asked: `--resume` goes on with it, `--overwrite` replaces
    it (its old videos with it)."""
    if resume and overwrite:
        raise typer.BadParameter(
            "--resume goes on with a run and --overwrite replaces it: give one", param_hint="--resume"
        )
    if resume and not out_given:
        raise typer.BadParameter("--resume goes on with the run in --out: name it", param_hint="--resume")
    if resume and rule is not None:
        raise typer.BadParameter(
            "--resume is not offered with --until: a stopping rule's rounds decide from every episode "
            "in the order played, which a resumed run does not keep",
            param_hint="--resume",
        )
    held = folder.is_dir() and any(folder.iterdir())
    if resume and not (folder / JOURNAL).exists():
        raise typer.BadParameter(f"{folder} holds no {JOURNAL}: nothing to resume", param_hint="--resume")
    if held and not resume:
        if not overwrite:
            raise typer.BadParameter(
                f"{folder} holds a run already: --resume plays what it lacks, --overwrite replaces it",
                param_hint="--out",
            )
        shutil.rmtree(folder)


def _parse_until(until: str | None, trials: int | None, max_trials: int | None) -> Until | None:
    if until is None:
        if max_trials is not None:
            raise typer.BadParameter(
                "--max-trials caps a stopping rule: give --until too", param_hint="--max-trials"
            )
        return None
    if trials is not None:
        raise typer.BadParameter(
            "--trials fixes the episodes a task plays; --until grows them up to --max-trials",
            param_hint="--trials",
        )
    try:
        return parse_until(until)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--until") from None


def _sequential(planned: list[EpisodeSpec], rule: Until, gates: list[Gate], alpha: float) -> SequentialEval:
    tasks = list(dict.fromkeys(e.task for e in planned))
    try:
        return SequentialEval(tasks, rule, gates, alpha)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--gate") from None


def _decided(gate: Gate, stopping: SequentialEval) -> tuple[bool | None, str]:
    """A gate's verdict from the confidence sequence: met, missed, or None while its interval straddles
    the threshold."""
    low, high = stopping.bounds(gate)
    scope = "the mean of task rates" if gate.task is None else f"task {gate.task!r}'s rate"
    decision = stopping.verdict(gate)
    bounds = f"{scope} lies in [{low:.3f}, {high:.3f}] (at {1 - stopping.alpha:.0%}, anytime-valid)"
    if decision is None:
        return None, f"{gate}: {bounds}: undecided at the cap"
    return decision == "met", f"{gate}: {bounds}: {'met' if decision == 'met' else 'not met'}"


RECORDABLE = ("video", "trajectory", "replay")


def _refuse_video_without_a_camera(work: Work, benchmark: str, params: dict[str, Any]) -> None:
    """`--record video` on a benchmark that renders no camera unless asked (a `cameras` parameter empty by
    default, as Meta-World's is): refused before anything plays, naming the parameter that turns one on."""
    if "cameras" in params:
        return
    cls = class_of(work, "benchmark")
    try:
        default = inspect.signature(cls).parameters["cameras"].default
    except (KeyError, TypeError, ValueError):  # no such parameter: its images are its own to give
        return
    if default not in ((), [], None, ""):
        return
    # A catalog module names its scenes' cameras beside the class (Meta-World's CAMERAS).
    known = [str(c) for c in getattr(inspect.getmodule(cls), "CAMERAS", ())]
    example = "corner" if "corner" in known else known[0] if known else "NAME"
    raise typer.BadParameter(
        f"{benchmark} renders no camera unless asked, so no video would be written: add --param "
        f"'benchmark.cameras=[\"{example}\"]'" + (f" (its cameras: {', '.join(known)})" if known else ""),
        param_hint="--record video",
    )


def _parse_record(values: list[str]) -> set[str]:
    """`--record` values (each a comma list) as the set of things to record; `none` alone records nothing."""
    chosen = {part.strip() for value in values for part in value.split(",") if part.strip()}
    unknown = sorted(chosen - {*RECORDABLE, "none"})
    if unknown:
        raise typer.BadParameter(
            f"{', '.join(unknown)}: --record takes video, trajectory, replay or none (a comma list or "
            "repeated)",
            param_hint="--record",
        )
    if "none" in chosen and len(chosen) > 1:
        raise typer.BadParameter(
            "none records nothing: it cannot be asked for with video, trajectory or replay",
            param_hint="--record",
        )
    return chosen - {"none"}


def _recording_warnings(report: dict[str, Any]) -> None:
    """Each distinct recording problem once, however many episodes it touched."""
    for problem in report.get("recording", {}).get("problems", []):
        count = len(problem["episodes"])
        text = problem["problem"]
        if text == NO_IMAGES:
            text = (
                "video: the benchmark's observations hold no images (a uint8 H×W×3 array under a key "
                "starting with 'image', e.g. image.<camera>: Meta-World's come with "
                "--param 'benchmark.cameras=[\"corner\"]'); no video was written"
            )
        episodes = f"{count} episode{'s' if count != 1 else ''}"
        console.print(
            f"[yellow]warning:[/yellow] recording: {escape(text)} ({episodes})", soft_wrap=True, markup=True
        )


def _slug(ref: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", ref.rsplit(":", 1)[-1].rsplit("/", 1)[-1]).strip("-")[:40] or "run"
