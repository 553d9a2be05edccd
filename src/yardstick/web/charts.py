"""Charts for the pages, drawn by matplotlib and returned as inline SVG (a page must work offline)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from yardstick.scoring import Summary, parse_gate

_INCHES_PER_TASK = 0.26
_WIDTH_INCHES = 7.0
_INCHES_PER_CHAR = 0.068  # an 8-point DejaVu Sans character, on average
_BAR = "#4c72b0"
_MEAN = "#c44e52"
_BASELINE = "#dd8452"


def _as_mapping(summary: Summary | Mapping[str, Any]) -> Mapping[str, Any]:
    return summary.to_dict() if isinstance(summary, Summary) else summary


def _percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def success_chart_svg(summary: Summary | Mapping[str, Any]) -> str:
    """Success per task as horizontal bars with their intervals, and the overall mean of task means as a
    vertical line over its interval band. Tasks read top to bottom in the summary's order."""
    data = _as_mapping(summary)
    tasks: Mapping[str, Any] = data.get("tasks") or {}
    names = list(tasks)
    rates = [(tasks[name].get("metrics") or {}).get("success") for name in names]
    fig, ax = _figure(names, base_inches=1.0, widest=0.55, top_inches=0.4)
    positions = list(range(len(names)))
    drawn = [(y, rate) for y, rate in zip(positions, rates, strict=True) if rate is not None]
    if drawn:
        ys = [y for y, _ in drawn]
        values = [float(rate["value"]) for _, rate in drawn]
        below = [max(0.0, v - float(rate["low"])) for v, (_, rate) in zip(values, drawn, strict=True)]
        above = [max(0.0, float(rate["high"]) - v) for v, (_, rate) in zip(values, drawn, strict=True)]
        ax.barh(ys, values, height=0.7, color=_BAR, alpha=0.85)
        ax.errorbar(values, ys, xerr=[below, above], fmt="none", ecolor="#222222", elinewidth=1, capsize=2.5)
    for y, rate in zip(positions, rates, strict=True):
        if rate is None:
            ax.text(
                0.01, y, "no finished episodes", va="center", fontsize=8, color="#777777", parse_math=False
            )
    overall = (data.get("overall") or {}).get("success")
    if overall is not None and overall.get("value") is not None:
        mean = float(overall["value"])
        # Behind the bars (zorder), so the band tints the background rather than veiling the bars.
        ax.axvspan(
            float(overall["low"]),
            float(overall["high"]),
            color=_MEAN,
            alpha=0.12,
            linewidth=0,
            zorder=0.5,
            label=f"overall, {overall.get('interval', 'interval')}",
        )
        ax.axvline(mean, color=_MEAN, linewidth=1.5, label=f"mean of task means {_percent(mean)}")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, fontsize=8, frameon=False)
    if not names:
        ax.text(0.5, 0.5, "no tasks", ha="center", va="center", transform=ax.transAxes, color="#777777")

    _rate_axes(ax, names)
    ax.set_xlabel("success rate", fontsize=9)
    # The rate as text at the right edge, so a reader need not gauge bar lengths.
    edge = ax.get_yaxis_transform()
    for y, rate in zip(positions, rates, strict=True):
        if rate is not None:
            ax.text(1.01, y, _percent(float(rate["value"])), transform=edge, va="center", fontsize=8)

    return _svg(fig)


def _figure(
    labels: Sequence[str], *, base_inches: float, widest: float, top_inches: float
) -> tuple[Any, Any]:
    """A figure and its axes for one horizontal bar a label: as tall as the labels are many, its left
    margin as wide as the longest (at most `widest` of the width), `top_inches` above for a legend."""
    # Imported here: matplotlib takes a good part of a second to import, and most users of yardstick.web
    # (the gateway's pages) never draw a chart.
    from matplotlib.figure import Figure

    height = base_inches + _INCHES_PER_TASK * max(len(labels), 1)
    # Margins set by hand from the label lengths: constrained layout measures every tick label and would
    # double the drawing time for 50 tasks.
    longest = max((len(label) for label in labels), default=0)
    left = min(widest, (0.2 + _INCHES_PER_CHAR * longest) / _WIDTH_INCHES)
    fig = Figure(figsize=(_WIDTH_INCHES, height))
    fig.subplots_adjust(
        left=left, right=1.0 - 0.55 / _WIDTH_INCHES, bottom=0.55 / height, top=1.0 - top_inches / height
    )
    return fig, fig.add_subplot()


def _rate_axes(ax: Any, labels: Sequence[str]) -> None:
    """Rates from 0 to 100% across, a row a label with the first on top, a light grid behind."""
    from matplotlib.ticker import PercentFormatter

    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first label on top
    # Labels are user text: no mathtext, or "a$b$" would be typeset (or fail to parse).
    ax.set_yticks(range(len(labels)), labels=labels, fontsize=8, parse_math=False)
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _svg(fig: Any) -> str:
    import matplotlib

    buffer = io.BytesIO()
    # Text stays text (smaller, selectable, searchable), and ids are salted so the same data draws the
    # same bytes. rc_context restores the global settings on exit.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "yardstick"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue().decode("utf-8")
    return svg[svg.index("<svg") :]


@dataclass(frozen=True)
class Entry:
    """One bar of a board's chart: a ranked run or a baseline, its score and interval (None: unscored)."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    baseline: bool = False


def board_chart_svg(entries: Sequence[Entry]) -> str:
    """A board's entries in its order as horizontal bars with their intervals; baselines drawn apart (hatched,
    in another colour) so a reader sees at a glance which runs beat the reference models."""
    from matplotlib.patches import Patch

    labels = [e.label for e in entries]
    fig, ax = _figure(labels, base_inches=0.9, widest=0.5, top_inches=0.3)
    for y, entry in enumerate(entries):
        if entry.value is None:
            ax.text(0.01, y, "no score", va="center", fontsize=8, color="#777777", parse_math=False)
            continue
        colour = _BASELINE if entry.baseline else _BAR
        ax.barh(
            [y], [entry.value], height=0.7, color=colour, alpha=0.85, hatch="//" if entry.baseline else None
        )
        if entry.low is not None and entry.high is not None:
            below, above = max(0.0, entry.value - entry.low), max(0.0, entry.high - entry.value)
            ax.errorbar(
                [entry.value], [y], xerr=[[below], [above]], fmt="none", ecolor="#222222", capsize=2.5
            )
        ax.text(1.01, y, _percent(entry.value), transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    if any(e.baseline for e in entries):
        ax.legend(
            handles=[
                Patch(color=_BAR, label="ranked"),
                Patch(facecolor=_BASELINE, edgecolor="#222222", hatch="//", label="baseline"),
            ],
            loc="lower center",
            bbox_to_anchor=(0.5, 1.0),
            ncols=2,
            fontsize=8,
            frameon=False,
        )
    _rate_axes(ax, labels)
    return _svg(fig)


def stopping_chart_svg(stopping: Mapping[str, Any]) -> str:
    """A sequential eval's trace: each task's anytime-valid interval against the episodes played (a band that
    only narrows), the rate seen, and a marker where the rule stopped the task; the gates' thresholds as
    dashed lines."""
    from matplotlib.figure import Figure

    tasks: Mapping[str, Any] = stopping.get("tasks") or {}
    fig = Figure(figsize=(_WIDTH_INCHES, 3.2))
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.16, top=0.86)
    ax = fig.add_subplot()
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
    for number, (name, task) in enumerate(tasks.items()):
        looks = task.get("looks") or []
        if not looks:
            continue
        colour = colours[number % len(colours)]
        n = [look[0] for look in looks]
        ax.fill_between(
            n, [look[1] for look in looks], [look[2] for look in looks], color=colour, alpha=0.18, linewidth=0
        )
        ax.plot(n, [look[1] for look in looks], color=colour, linewidth=1, label=name)
        ax.plot(n, [look[2] for look in looks], color=colour, linewidth=1)
        if task.get("stopped_at"):
            ax.axvline(task["stopped_at"], color=colour, linestyle=":", linewidth=1)
            ax.plot([task["stopped_at"]], [task["rate"]], marker="o", color=colour, markersize=5)
    for gate in stopping.get("gates") or []:
        threshold = parse_gate(gate["gate"]).threshold  # written by the rule itself, so it reads back
        ax.axhline(threshold, color="#222222", linestyle="--", linewidth=1)
        ax.text(
            0.995,
            threshold,
            f" {gate['gate']}: {gate.get('decision') or 'undecided'}",
            transform=ax.get_yaxis_transform(),
            ha="right",
            va="bottom",
            fontsize=8,
            parse_math=False,
        )
    _rate_up(ax, "episodes played (a task's)", top=1.0)
    if tasks:
        ax.legend(
            loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=min(len(tasks), 6), fontsize=8, frameon=False
        )
    return _svg(fig)


@dataclass(frozen=True)
class CurvePoint:
    """One checkpoint of a policy's curve: its success with the interval, and whether it regressed."""

    label: str
    value: float | None
    low: float | None
    high: float | None
    regressed: bool = False


def checkpoint_chart_svg(points: Sequence[CurvePoint]) -> str:
    """Success against checkpoint, in the curve's order: a line through the rates, each with its interval;
    a regressed checkpoint drawn red and marked."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(_WIDTH_INCHES, 2.8))
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.2, top=0.92)
    ax = fig.add_subplot()
    shown = [(x, p, p.value) for x, p in enumerate(points) if p.value is not None]
    if shown:
        ax.plot([x for x, _, _ in shown], [value for _, _, value in shown], color=_BAR, linewidth=1.2)
    for x, point, value in shown:
        colour = _MEAN if point.regressed else _BAR
        if point.low is not None and point.high is not None:
            below, above = max(0.0, value - point.low), max(0.0, point.high - value)
            ax.errorbar([x], [value], yerr=[[below], [above]], fmt="o", color=colour, capsize=3, markersize=4)
        if point.regressed:
            ax.annotate(
                "regressed",
                (x, value),
                textcoords="offset points",
                xytext=(0, -14),
                ha="center",
                fontsize=8,
                color=_MEAN,
            )
    ax.set_xticks(range(len(points)), labels=[p.label for p in points], fontsize=8, parse_math=False)
    ax.set_xlim(-0.5, max(len(points) - 0.5, 0.5))
    _rate_up(ax, "checkpoint", top=1.05)
    return _svg(fig)


def _rate_up(ax: Any, across: str, *, top: float) -> None:
    """A success rate up the side (0 to 100%), `across` along the bottom, a light grid behind: the line
    charts' axes, as `_rate_axes` is the bar charts'."""
    from matplotlib.ticker import PercentFormatter

    ax.set_ylim(0.0, top)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    ax.set_xlabel(across, fontsize=9)
    ax.set_ylabel("success rate", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(color="#eeeeee", linewidth=0.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
