"""Headless Chromium for the viewer's browser tests: Debian's ``chromium`` package driven by the
``playwright`` package (the dev extra). Nothing downloads a browser: where either is missing,
the tests skip (``.ci/run`` installs both)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("JUDGE_ENGINE_CHROMIUM", "/usr/bin/chromium"))
"""Debian's; ``JUDGE_ENGINE_CHROMIUM`` points elsewhere (another distribution's Chromium)."""
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}


def launch() -> Iterator[Any]:
    """A Chromium browser for a test module, or a skip saying what is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Watched:
    """A page, and what it said: console errors, uncaught exceptions, dialogs."""

    page: Any
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def open(self, url: str, ready: str) -> Any:
        """Go to ``url`` and wait until ``ready`` (a selector) is on the page."""
        self.page.goto(url)
        self.page.wait_for_selector(ready)
        return self.page


def watched(browser: Any) -> Iterator[Watched]:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    seen = Watched(page)
    page.on("console", lambda message: seen.errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: seen.errors.append(str(error)))

    def dialog(d: Any) -> None:
        seen.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)
    try:
        yield seen
    finally:
        context.close()
