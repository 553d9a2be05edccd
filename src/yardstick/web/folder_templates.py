"""The templates of the pages a run folder holds (report.html, replay.html): strict and escaped, one
environment for both; and how the folder's pages and files are written (whole, `write_whole`)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined


@lru_cache(maxsize=1)
def folder_templates() -> Environment:
    return Environment(
        loader=PackageLoader("yardstick.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def write_whole(path: Path, text: str) -> None:
    """`text` at `path` (its folder made), under a `.partial` name first: a page or a watcher may read the
    folder while a run still writes it, so only complete files are swapped in."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8", newline="")
    os.replace(partial, path)
