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


@contextmanager
def checked_page(browser: Any, width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A page in a context of its own, closed after; the test fails if a script on the page threw."""
    context = browser.new_context(viewport={"width": width, "height": height})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert not errors, f"the page threw: {errors}"
