"""What the terminal shows: the progress of a run, and its results as tables."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from yardstick.cli.exits import Exit
from yardstick.engine.results import EpisodeResult

# Progress and tables go to stderr, so `--json` leaves stdout to the report alone.
console = Console(stderr=True)


def print_error(message: str) -> None:
    """`error: message` in red, the message as written: a refusal's text holds brackets
    (`pip install 'yardstick-robotics[sim]'`, `cameras: ['top']`) that rich would otherwise read as markup."""
    console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)


def fail(status: Exit, message: str) -> NoReturn:
    """Print `error: message` and end the command with `status` (whose fault it was)."""
    print_error(message)
    raise typer.Exit(status)


class RunProgress:
    """Episodes done of total, the running success rate and failures, and the time left."""

    def __init__(self, progress: Progress, total: int) -> None:
        self._progress = progress
        self._task = progress.add_task("episodes", total=total, success="", failed="")
        self._done = self._succeeded = self._failed = 0

    def __call__(self, result: EpisodeResult) -> None:
        self._done += 1
        self._succeeded += result.success
        self._failed += not result.finished
        finished = self._done - self._failed
        rate = f"success {100 * self._succeeded / finished:5.1f}%" if finished else "success   -  "
        failed = f"[red]{self._failed} failed[/red]" if self._failed else ""
        self._progress.update(self._task, advance=1, success=rate, failed=failed)


@contextmanager
def run_progress(total: int, *, quiet: bool) -> Iterator[RunProgress]:
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[success]}"),
        TextColumn("{task.fields[failed]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=False,
    )
    with progress:
        yield RunProgress(progress, total)


def print_table(table: Table) -> None:
    """`table` on the console; or, on a terminal too narrow to show its unwrapped cells whole (which rich
    would cut short, ids and keys included), each row as a block: its first cell, then the others by their
    column's name."""
    if _fits(table):
        console.print(table)
        return
    if table.title:
        console.print(table.title, soft_wrap=True)
    names = [_plain(column.header).replace("\n", " ") for column in table.columns[1:]]
    for first, *rest in zip(*(column.cells for column in table.columns), strict=True):
        console.print(f"  {_plain(first)}", soft_wrap=True, highlight=False)
        pairs = [f"{name} {_plain(cell)}" for name, cell in zip(names, rest, strict=True) if _plain(cell)]
        console.print("      " + ", ".join(pairs), soft_wrap=True, highlight=False)
    if table.caption:
        console.print(table.caption, soft_wrap=True)


def _fits(table: Table) -> bool:
    """Whether `table` shows on the console with no cell of an unwrapped column cut: those columns at their
    widest, the others at their narrowest (rich wraps those first, then cuts every column alike). Read with
    rich's own measures of a column and of the borders."""
    unbounded = console.options.update_width(2**16)
    needed = table._extra_width
    for column in table.columns:
        measured = table._measure_column(console, unbounded, column)
        needed += measured.maximum if column.no_wrap else measured.minimum
    return needed <= console.width


def _plain(cell: Any) -> str:
    """A cell's text without its markup."""
    return cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain


def _pct(estimate: dict[str, Any] | None) -> tuple[str, str]:
    if not estimate or estimate.get("value") is None:
        return "-", "-"
    return (f"{100 * estimate['value']:.1f}", f"{100 * estimate['low']:.1f}-{100 * estimate['high']:.1f}")


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def results_table(report: dict[str, Any]) -> Table:
    summary = report["summary"]
    table = Table(
        title=f"{report['policy']['name']} on {report['benchmark']['name']}",
        title_justify="left",
        caption="overall: the mean of task means; pooled: all episodes as one",
        caption_justify="left",
    )
    table.add_column("task", no_wrap=True)
    # Numbers never wrap; headers do, so the table fits an 80-column terminal with MT50's long names.
    stopping = report.get("stopping")
    level = f"{1 - stopping['alpha']:.0%}\nanytime" if stopping else "95%\ninterval"
    for header in ("episodes", "success\n%", level, "mean\nsteps", "mean\nrobot s"):
        table.add_column(header, justify="right", no_wrap=True)
    for name, task in summary["tasks"].items():
        value, interval = _pct(task["metrics"].get("success"))
        episodes = str(task["episodes"]) + (
            f" [red](+{task['errors']} failed)[/red]" if task["errors"] else ""
        )
        table.add_row(
            name, episodes, value, interval, _num(task["mean_steps"]), _num(task["mean_robot_seconds"], 2)
        )
    overall = summary["overall"]
    table.add_section()
    for key, label in (("success", "overall"), ("success_pooled", "pooled")):
        if key == "success_pooled" and key not in overall and report.get("stopping"):
            continue  # a run that stopped by a rule has no sound pooled interval (report._anytime)
        value, interval = _pct(overall.get(key))
        n = overall.get(key, {}).get("n", 0) if overall.get(key) else 0
        table.add_row(f"[bold]{label}[/bold]", str(n), f"[bold]{value}[/bold]", interval, "", "")
    return table


def stopping_line(report: dict[str, Any]) -> str:
    """Where each task of a run that stopped by a rule stopped, and why."""
    stopping = report["stopping"]
    parts = []
    for name, task in stopping["tasks"].items():
        where = "at the cap" if task["stopped_at"] is None else "rule met"
        parts.append(f"{name} {task['episodes']} ({where})")
    return f"until {stopping['until']} (alpha {stopping['alpha']:g}): " + ", ".join(parts)


def timing_line(report: dict[str, Any]) -> str:
    timing = report["timing"]
    per = timing["per_step_ms"]
    parts = [
        f"{timing['steps']} steps in {timing['wall_s']:.1f} s ({timing['steps_per_s'] or 0:.0f}/s)",
        f"cold start {_num(timing['cold_start_s'], 2)} s",
    ]
    if per["simulation"] is not None:
        # The parts in the report's order; it lists recording only for a run that recorded.
        parts.append("per step: " + ", ".join(f"{name} {ms:.3f} ms" for name, ms in per.items()))
    return "; ".join(parts)
