"""`make test-quick` (`-m "not browser and not multiprocess and not faults"`) starts no
Chromium: every test that uses the `browser` fixture is marked `browser`, by its module or, if
its module forgets, by `tests/conftest.py`."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import TESTS


def test_deselecting_browser_leaves_no_test_that_starts_chromium() -> None:
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-n", "0",
         "-m", "not browser", "--fixtures-per-test", str(TESTS / "browser"),
         str(TESTS / "security")],
        capture_output=True, text=True, check=False, cwd=TESTS.parent, timeout=300,
    )  # fmt: skip
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "security/test_" in collected.stdout  # the control: the rest is still collected
    assert "\nbrowser -- " not in collected.stdout
