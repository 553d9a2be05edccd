"""Debian's Chromium driven by Playwright, as the pages' and the console's tests launch it (no browser
download: `make test` installs Chromium)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--autoplay-policy=no-user-gesture-required",
]


@contextmanager
def launched(what: str) -> Iterator[Any]:
    """A headless Chromium for `what`'s tests, closed after; a failure naming how to install it if absent."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.fail(
            f"{what}'s tests need Debian's chromium: `make test` installs it (apt-get install chromium)"
        )
    with sync_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
