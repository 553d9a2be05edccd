"""The templates of the pages a run folder holds (report.html, replay.html): strict and escaped, one
environment for both."""

from __future__ import annotations

from functools import lru_cache

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
