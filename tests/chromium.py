"""One headless Chromium for the whole run (per xdist worker), and Playwright's event loop set
aside while the other tests run.

Starting Playwright's driver and Chromium cost each browser module a few seconds of CPU (about
0.8 s idle, seconds of wall time on a loaded machine of two cores, 34 times a run); each test
still gets a fresh browser context, so nothing carries from one test to the next but the process.

The price of keeping it: Playwright's sync API runs its event loop in a greenlet and marks that
loop as the main thread's running loop between its calls, for as long as it is started. Other
tests then cannot run: pytest-asyncio refuses to start a loop inside a running one, and Django's
`async_unsafe` refuses database work. So `tests/conftest.py` calls `set_aside` before every test
that does not drive Chromium and `take_back` before every one that does (asyncio's own
`_set_running_loop`, which Playwright itself uses for this).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

_loop: asyncio.AbstractEventLoop | None = None  # Playwright's, while it is started


def launched() -> Iterator[Any]:
    """Chromium under a started Playwright, until the generator is closed (the session-scoped
    `browser` fixture of `tests/conftest.py`)."""
    global _loop
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (make chromium)")
    with sync_playwright() as playwright:
        _loop = asyncio.get_running_loop()
        try:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            take_back()  # the last test may have been of another kind
            chromium.close()
        finally:
            take_back()
            _loop = None


def set_aside() -> None:
    """No running loop on this thread, for a test that does not drive Chromium."""
    if _loop is not None and asyncio._get_running_loop() is _loop:
        asyncio._set_running_loop(None)


def take_back() -> None:
    """Playwright's loop running again, as its next call expects."""
    if _loop is not None and not _loop.is_closed():
        asyncio._set_running_loop(_loop)
