"""Time a benchmark spends on something the engine should report apart from simulation (rendering).

The engine times each benchmark call as a whole; a benchmark that renders inside `step` wraps that part in
`with timed("rendering"):` and the engine moves it from simulation to rendering in the run's timing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

# Seconds per label, per process. The engine drains it after each benchmark call.
_spent: dict[str, float] = {}


@contextmanager
def timed(label: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        _spent[label] = _spent.get(label, 0.0) + time.perf_counter() - start


def drain(label: str) -> float:
    """The seconds spent under `label` since the last drain, and reset it."""
    return _spent.pop(label, 0.0)
