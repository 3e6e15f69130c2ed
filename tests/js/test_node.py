"""The browser code's own tests (`node --test tests/js/*.test.mjs`), as a part of the suite.

They test `static/chatapp/stream_state.js` from the vectors in `tests/vectors/stream/`; Node comes
from Debian's `nodejs`, which `make test` installs like Chromium. The files are named one by one:
Node 21 and later read `--test`'s arguments as glob patterns and search no directory named there
(Node 20 did).
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
    files = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests/js").glob("*.test.mjs"))
    assert files, "no tests/js/*.test.mjs"
    done = subprocess.run(
        [NODE, "--test", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (
        f"node --test {' '.join(files)} failed:\n{done.stdout}\n{done.stderr}"
    )
    assert "# pass 0\n" not in done.stdout, f"node ran no test:\n{done.stdout}"
