"""A real browser for the console tests: Playwright driving Debian's chromium, headless.

``scripts/check`` installs chromium with apt-get when it is missing; Playwright's own browser
downloads are never used (the machine has no network beyond the package registries). Each test
gets a fresh profile directory, so no cookie or cache crosses tests.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, Playwright, sync_playwright

CHROMIUM = os.environ.get("TABULAE_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def playwright() -> Iterator[Playwright]:
    """Per test: the sync API runs an event loop in this thread while it is open, and any later
    test's ``asyncio.run`` would find it running."""
    if not shutil.which(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: scripts/check installs Debian's chromium")
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium")
    with sync_playwright() as driver:
        yield driver


@pytest.fixture
def browser(playwright: Playwright, tmp_path: Path) -> Iterator[BrowserContext]:
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path / "profile"),
        executable_path=CHROMIUM,
        headless=True,
        args=ARGS,
        viewport={"width": 1280, "height": 800},
    )
    context.set_default_timeout(15_000)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def page(browser: BrowserContext) -> Page:
    return browser.pages[0] if browser.pages else browser.new_page()


def screenshot_dir() -> Path | None:
    """Where the walkthrough saves its screenshots: ``TABULAE_SCREENSHOTS`` (the README's come
    from ``TABULAE_SCREENSHOTS=docs/console pytest tests/console/browser``), else nowhere."""
    target = os.environ.get("TABULAE_SCREENSHOTS")
    return Path(target) if target else None
