"""Search's full-text path passes on PostgreSQL: tests/chatapp/conversations/
test_search_postgresql.py, run in a pytest subprocess on the private cluster (the database is
chosen when settings load), in a test database of its own beside the suite's (`suite.py`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .servers import ROOT

pytestmark = pytest.mark.multiprocess

CASES = "tests/chatapp/conversations/test_search_postgresql.py"


def test_full_text_search_passes_on_postgresql(postgres_url: str) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    # Another database name, so its test database ("test_search") is not the suite's.
    env["DATABASE_URL"] = postgres_url.rsplit("/", 1)[0] + "/search"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", CASES],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    summary = re.search(r"^(\d+) passed\b.* in [\d.]+s", output, re.MULTILINE)
    assert summary is not None, output[-2000:]
    assert int(summary[1]) >= 6
    assert "skipped" not in output  # it really ran on PostgreSQL
