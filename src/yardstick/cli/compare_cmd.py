"""`yardstick eval compare`: two policies on one benchmark's same trials, and which is better.

With `--until decided` the trials grow in rounds until the paired sequential test (scoring/sequential.py)
decides, at any look with its error at α; without, both play a fixed number of trials and the same test
reads the result once.

Beside the pooled verdict, each task is tested on its own (McNemar's exact test) and the tasks' p-values are
adjusted as one family (`--adjust`, Holm by default: scoring/multiplicity.py), so a board of many tasks does
not report chance wins as differences.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from yardstick.cli.display import console, fail, print_table, results_table, run_progress
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
from yardstick.engine import BuildError, Component, RunOutcome, RunRequest, Work, prepare
from yardstick.engine.rounds import compare_until
from yardstick.report import build_report
from yardstick.scoring.compare import PAIRED_PRIOR, PairedTest, fixed_n_for_power, sequential_power
from yardstick.scoring.multiplicity import (
    DEFAULT_ADJUSTMENT,
    METHOD,
    Adjustment,
    family_error,
    parse_adjustment,
    task_tests,
)
from yardstick.scoring.sequential import ALPHA, MAX_TRIALS, checkpoints
from yardstick.sdk.errors import AuthoringError
from yardstick.web.run_folder import write_run_folder

# Below this power a comparison's cap is called too small to decide, and the pairs for this power are named.
USEFUL_POWER = 0.8


def compare(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="The benchmark both policies play."),
    policies: list[str] = typer.Option(
        ..., "--policy", "-p", help="A policy; give exactly two: -p A -p B (as for eval run)."
    ),
    tasks: str | None = typer.Option(None, help="Comma-separated tasks (default: all)."),
    seeds: str | None = typer.Option(None, help="Seeds to use, among the benchmark's: 0,1,5 or 0..9."),
    until: str | None = typer.Option(
        None, "--until", help='"decided": play in rounds until one policy is better at --alpha, or the cap.'
    ),
    max_trials: int | None = typer.Option(
        None,
        "--max-trials",
        min=1,
        help="Trials a task plays: the cap with --until decided (default 200), else all of them "
        "(default: one per seed).",
    ),
    alpha: float = typer.Option(ALPHA, "--alpha", min=1e-6, max=0.5, help="The test's error (0.05)."),
    adjust: str = typer.Option(
        DEFAULT_ADJUSTMENT,
        "--adjust",
        help="The per-task tests as one family: holm (family-wise error at --alpha), bh (Benjamini–Hochberg: "
        "false discovery rate at --alpha) or none.",
    ),
    workers: int | None = typer.Option(None, min=1, help="Worker processes (default: one per core)."),
    in_process: bool = typer.Option(False, "--in-process", help="Play everything in this process."),
    executor: str = ExecutorOption,
    ray_address: str | None = RayAddressOption,
    param: list[str] = typer.Option(
        [], "--param", help="benchmark.NAME=VALUE or policy.NAME=VALUE, laid over both policies' own."
    ),
    call_timeout: float = typer.Option(60.0, min=0.01, help="Seconds a single call may take."),
    out: Path | None = typer.Option(
        None,
        help="A folder for both run folders (a/ and b/) and comparison.json (default: runs/<time>-compare).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print both reports and the comparison as JSON."),
) -> None:
    """Compare two policies on the same trials: their success, the pairs where only one succeeded, and
    whether one is better (exit 0 if decided, 9 if undecided at the cap)."""
    if len(policies) != 2:
        raise typer.BadParameter(
            f"give exactly two policies (-p A -p B), not {len(policies)}", param_hint="--policy"
        )
    if until is not None and until.strip() != "decided":
        raise typer.BadParameter(
            f"{until!r}: eval compare stops only when decided (--until decided); a width is eval run's",
            param_hint="--until",
        )
    try:
        adjustment = parse_adjustment(adjust)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--adjust") from None
    benchmark_params, policy_params = parse_params(param)
    ray_at = run_cluster(executor, ray_address, in_process)
    requests = [
        RunRequest(
            work=Work(
                benchmark=Component(benchmark, benchmark_params),
                policy=Component(policy, policy_params),
                call_timeout_s=call_timeout,
            ),
            tasks=split_list(tasks),
            seeds=parse_seeds(seeds),
            workers=0 if in_process else workers,
            ray_address=ray_at,
        )
        for policy in policies
    ]
    sequential = until is not None
    folder = out or Path("runs") / f"{dt.datetime.now():%Y%m%d-%H%M%S}-compare"
    test = PairedTest(alpha=alpha)
    try:
        trials = (max_trials or MAX_TRIALS) if sequential else max_trials
        plan = prepare(dataclasses.replace(requests[0], trials=trials))[2]
        cap = max(e.trial for e in plan) + 1
        with run_progress(2 * len(plan), quiet=False) as progress:
            compared = compare_until(
                requests[0], requests[1], test, cap, until_decided=sequential, on_result=progress
            )
    except (AuthoringError, BuildError) as exc:
        fail(Exit.CALLER, str(exc))
    except ConnectionError as exc:  # Ray's when no cluster answers at the address
        fail(Exit.CALLER, no_cluster(str(ray_at), exc))
    except Exception as exc:
        fail(Exit.PLATFORM, f"internal error: {type(exc).__name__}: {exc}")

    reports = [build_report(outcome) for outcome in (compared.a, compared.b)]
    task_count = len({e.task for e in plan})
    comparison = _comparison(policies, test, sequential, cap, task_count)
    comparison["tasks"] = _tasks(policies, compared.a, compared.b, test.alpha, adjustment)
    folder.mkdir(parents=True, exist_ok=True)
    for name, report, outcome in zip(("a", "b"), reports, (compared.a, compared.b), strict=True):
        write_run_folder(folder / name, report, outcome.results)
    (folder / "comparison.json").write_text(json.dumps(comparison, indent=2))
    if as_json:
        print(json.dumps({"a": reports[0], "b": reports[1], "comparison": comparison}, indent=2))
    else:
        for report in reports:
            print_table(results_table(report))
        print_table(_tasks_table(comparison))
        for line in _lines(comparison):
            console.print(line, soft_wrap=True)
        console.print(
            f"run folders: {folder / 'a'} and {folder / 'b'}; {folder / 'comparison.json'}", soft_wrap=True
        )
    errors = [e for report in reports for e in report["errors"]]
    if any(o.interrupted for o in (compared.a, compared.b)):
        raise typer.Exit(Exit.INTERRUPTED)
    if errors:
        for error in errors[:10]:
            console.print(
                f"[red]episode {error['index']} ({error['task']}, seed {error['seed']}):[/red] "
                f"{error['error']}"
            )
        raise typer.Exit(Exit.CALLER)
    if not test.decided:
        raise typer.Exit(Exit.UNDECIDED)


def _comparison(
    policies: list[str], test: PairedTest, sequential: bool, cap: int, tasks: int
) -> dict[str, Any]:
    pairs = test.pairs
    out: dict[str, Any] = {
        "a": policies[0],
        "b": policies[1],
        "rule": "until decided" if sequential else "fixed",
        "alpha": test.alpha,
        "method": "paired sequential test on the discordant pairs "
        "(beta-binomial mixture against a fair coin)",
        "prior": list(PAIRED_PRIOR),
        "pairs": pairs,
        "a_only": test.a_only,
        "b_only": test.b_only,
        # The bettor's wealth against "no difference": it decides once past 1/alpha.
        "evidence": math.exp(min(test.log_evidence, 700.0)),
        "threshold": 1.0 / test.alpha,
        "decided": test.decided,
        "better": None if test.winner is None else policies[0 if test.winner == "a" else 1],
        "decided_at": test.decided_at,
        "max_pairs": cap * tasks,
    }
    if pairs and test.a_only + test.b_only:
        a_only, b_only = test.a_only / pairs, test.b_only / pairs
        looks = [c * tasks for c in checkpoints(cap)] if sequential else [cap * tasks]
        power, used = sequential_power(a_only, b_only, looks, test.alpha)
        # A fixed-n test reaches a power of 1 only in the limit: past 0.99 it is matched at 0.99. A cap too
        # small to decide anything is set beside the pairs a useful power (0.8) would need instead.
        matched = min(power, 0.99) if power >= USEFUL_POWER else USEFUL_POWER
        out["planning"] = {
            "a_only_rate": a_only,
            "b_only_rate": b_only,
            "power": power,
            "mean_pairs": used,
            "fixed_n_power": matched,
            "fixed_n_pairs": fixed_n_for_power(matched, a_only, b_only, test.alpha),
        }
    return out


def _tasks(
    policies: list[str], a: RunOutcome, b: RunOutcome, alpha: float, adjustment: Adjustment
) -> dict[str, Any]:
    """Each task's exact paired test and its p-value adjusted for the family of tasks."""
    success = [{(r.task, r.trial): r.success for r in o.results if r.finished} for o in (a, b)]
    tests = task_tests(success[0], success[1], alpha, adjustment)
    return {
        "adjust": adjustment,
        "method": f"McNemar's exact test per task; p-values adjusted by {METHOD[adjustment]} over the "
        f"{len(tests)} tasks",
        "alpha": alpha,
        "family": len(tests),
        "error": family_error(adjustment, alpha, len(tests)),
        "rows": [
            {
                "task": t.task,
                "pairs": t.pairs,
                "a_only": t.a_only,
                "b_only": t.b_only,
                "p": t.p,
                "p_adjusted": t.p_adjusted,
                "differs": t.differs,
                "better": None if t.better is None else policies[0 if t.better == "a" else 1],
            }
            for t in tests
        ],
    }


def _tasks_table(comparison: dict[str, Any]) -> Table:
    tasks = comparison["tasks"]
    method = METHOD[tasks["adjust"]]
    table = Table(
        title=f"per task: a = {comparison['a']}, b = {comparison['b']}",
        title_justify="left",
        caption=f"p: McNemar's exact test; adjusted: {method} over {tasks['family']} tasks; {tasks['error']}",
        caption_justify="left",
    )
    table.add_column("task", no_wrap=True)
    adjusted = "p\nunadjusted" if tasks["adjust"] == "none" else f"p\n{tasks['adjust']}"
    for header in ("pairs", "only\na", "only\nb", "p\nraw", adjusted):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("differs", no_wrap=True)
    for row in tasks["rows"]:
        verdict = f"[green]{row['better']} better[/green]" if row["differs"] else "-"
        table.add_row(
            row["task"],
            str(row["pairs"]),
            str(row["a_only"]),
            str(row["b_only"]),
            f"{row['p']:.3g}",
            f"{row['p_adjusted']:.3g}",
            verdict,
        )
    return table


def _lines(comparison: dict[str, Any]) -> list[str]:
    a, b = comparison["a"], comparison["b"]
    head = (
        f"{comparison['pairs']} pairs: {comparison['a_only']} where only {a} succeeded, "
        f"{comparison['b_only']} where only {b} did; evidence {comparison['evidence']:g} "
        f"(decides at {comparison['threshold']:g})"
    )
    if comparison["decided"]:
        verdict = (
            f"[green]{comparison['better']} is better[/green] (alpha {comparison['alpha']:g}), decided "
            f"after {comparison['decided_at']} pairs (its round played {comparison['pairs']})"
        )
    else:
        verdict = (
            f"[yellow]undecided[/yellow] after {comparison['pairs']} pairs (alpha {comparison['alpha']:g})"
        )
    lines = [head, verdict]
    planning = comparison.get("planning")
    if planning:
        fixed = planning["fixed_n_pairs"]
        needed = f"{fixed} pairs" if fixed is not None else "more than 5000 pairs"
        if planning["power"] < USEFUL_POWER:
            lines.append(
                f"at the rates seen ({planning['a_only_rate']:.2f} a pair only {a}, "
                f"{planning['b_only_rate']:.2f} only {b}) {comparison['max_pairs']} pairs give this test "
                f"power {planning['power']:.2f}: too few to decide; a fixed-n exact paired test needs "
                f"{needed} for power {planning['fixed_n_power']:.2f}"
            )
            return lines
        lines.append(
            f"at the rates seen ({planning['a_only_rate']:.2f} a pair only {a}, "
            f"{planning['b_only_rate']:.2f} only {b}) this test decides with power "
            f"{planning['power']:.2f} in {planning['mean_pairs']:.0f} "
            f"pairs on average; a fixed-n exact paired test needs {needed} for power "
            f"{planning['fixed_n_power']:.2f}"
        )
    return lines
