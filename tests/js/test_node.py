"""The browser code's own tests (`node --test tests/js/`), as a part of the suite.

They test `static/chatapp/stream_state.js` from the vectors in `tests/vectors/stream/`; Node comes
from Debian's `nodejs`, which `make test` installs like Chromium.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node") or ("/usr/bin/node" if Path("/usr/bin/node").exists() else None)


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed (Debian: nodejs)")
def test_node_tests_pass() -> None:
    assert NODE is not None
    done = subprocess.run(
        [NODE, "--test", "tests/js/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"node --test tests/js/ failed:\n{done.stdout}\n{done.stderr}"
    assert "# pass 0\n" not in done.stdout, f"node ran no test:\n{done.stdout}"
