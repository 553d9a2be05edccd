"""How quickly what the tests once timed is done: the run page's success chart for fifty tasks (the tests
check that it draws them all; how long it takes depends on the machine, so it is said here).

Run with `make bench` (or `.venv/bin/python bench/quickly.py`)."""

from __future__ import annotations

import statistics
import time

from yardstick.scoring import summarize
from yardstick.web import success_chart_svg

TASKS = 50
ROUNDS = 5


def chart_seconds() -> float:
    """The median seconds to draw the success chart of TASKS tasks, ten episodes each, once matplotlib is
    loaded (its first call pays for the import and the fonts)."""
    tasks = {f"task-{i:02d}-with-a-long-name-v3": f"task {i}" for i in range(TASKS)}
    rows = [
        {
            "task": task,
            "metrics": {"success": float((i + j) % 3 != 0)},
            "steps": 10,
            "robot_seconds": 1.0,
            "error": None,
        }
        for i, task in enumerate(tasks)
        for j in range(10)
    ]
    summary = summarize(rows, tasks, resamples=200)
    success_chart_svg(summary)
    times = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        success_chart_svg(summary)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    print(f"success chart, {TASKS} tasks: {chart_seconds():.3f} s (median of {ROUNDS})", flush=True)


if __name__ == "__main__":
    main()
