"""The simulators a built-in benchmark needs, and the refusal that names the extra to install.

Each simulator comes with an extra of Yardstick's (`pip install 'yardstick[libero]'`), so a user installs
only what they play. A benchmark's declarations (tasks, seeds, limits) are read without its simulator; the
check runs when one is built.
"""

from __future__ import annotations

import importlib.util


class MissingSimulator(ImportError):
    """A built-in benchmark was built where its simulator is not installed."""


def require(extra: str, module: str, benchmark: str) -> None:
    """Refuse, naming the extra, when `module` (the simulator `benchmark` runs on) cannot be imported."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingSimulator(
            f"{benchmark} needs its simulator, which is not installed here (no module named {module!r}): "
            f"pip install 'yardstick[{extra}]'"
        )
