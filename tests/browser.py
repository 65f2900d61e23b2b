"""Debian's chromium driven by Playwright, for the browser tests (Playwright's own browser download cannot
work here: only the apt, pip and npm registries are reachable)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


@contextmanager
def chromium() -> Iterator[Any]:
    """A browser for one module's tests. Sync Playwright runs an event loop in this thread until it closes, so
    its fixtures are module-scoped, not session-scoped (a later test calling ``asyncio.run()`` needs the thread)."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} not found: run .ci/system-deps.sh (Debian's chromium package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
