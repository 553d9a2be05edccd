"""The name this project is installed by, and the install line every hint prints.

`yardstick` on the public index is an unrelated project: a hint naming it would install a stranger's code.
`yardstick-robotics` is not taken there (checked with `pip download yardstick-robotics`: no such
distribution); a user installs from a clone or a wheel of ours, and a hint naming our name can only ever
find ours.
"""

from __future__ import annotations

DISTRIBUTION = "yardstick-robotics"


def install_hint(extra: str) -> str:
    """The command that adds an extra of ours to this install."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
