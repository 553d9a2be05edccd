""" "Did you mean": the closest known names to a mistyped one, for refusals that list what is known."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the names of `known` close to `word`, or "" when none is close."""
    names = list(known)
    by_lower = {name.lower(): name for name in names}
    close = [by_lower[c] for c in difflib.get_close_matches(word.lower(), list(by_lower), n=2, cutoff=0.6)]
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
