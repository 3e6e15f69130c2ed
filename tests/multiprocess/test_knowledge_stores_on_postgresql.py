"""The cluster's knowledge stores pass on their real servers: tests/chatapp/knowledge/
test_cluster_stores.py, run in a pytest subprocess with the private cluster's PostgreSQL (the
database is chosen when settings load; a test database of its own beside the suite's) and a
private Chroma server, started as PostgreSQL and Redis are. Nothing there may skip."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .servers import ROOT

pytestmark = pytest.mark.multiprocess

CASES = "tests/chatapp/knowledge/test_cluster_stores.py"


def test_the_chroma_store_and_postgresqls_text_index_pass(
    postgres_url: str, chroma_url: str
) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["DATABASE_URL"] = postgres_url.rsplit("/", 1)[0] + "/knowledge"
    env["CHAT_CHROMA_URL"] = chroma_url
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", CASES],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    summary = re.search(r"^(\d+) passed\b.* in [\d.]+s", output, re.MULTILINE)
    assert summary is not None, output[-2000:]
    assert int(summary[1]) >= 14
    assert "skipped" not in output  # it really ran on PostgreSQL and Chroma
