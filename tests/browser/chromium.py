"""One headless Chromium per test process, shared by every browser test it runs.

Starting Playwright and Chromium costs about 3.5 s of CPU on this kind of machine; a browser per
module cost that once per module and worker (about 50 times in a run of three workers). The
sync API holds an event loop on the main thread while it is started, which breaks the async tests
that run after it in the same process, so the browser is closed before any test that does not
ask for it (`tests/conftest.py`) and before the test databases are torn down (`chromium_closer`
in `tests/browser/conftest.py`), and the browser tests are ordered after the others, so that each
worker launches it about once.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

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

_running: tuple[AbstractContextManager[Any], Any] | None = None


def shared_browser() -> Any:
    """The process's Chromium, launched on first use."""
    global _running
    if _running is None:
        from playwright.sync_api import sync_playwright

        manager = sync_playwright()
        playwright = manager.__enter__()
        try:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        except BaseException:
            manager.__exit__(None, None, None)
            raise
        _running = (manager, chromium)
    return _running[1]


def close_shared_browser() -> None:
    """Close the process's Chromium and stop Playwright, if they run."""
    global _running
    if _running is None:
        return
    manager, chromium = _running
    _running = None
    try:
        chromium.close()
    finally:
        manager.__exit__(None, None, None)
