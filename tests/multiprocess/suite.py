"""Part of the database-backed test suite, run again on PostgreSQL in a pytest subprocess.

The database is chosen when settings load (`DATABASE_URL`), hence a subprocess. It runs beside
the multi-process tests, which mostly wait (on paced streams, on the sweep), so the module stays
quick; `--reuse-db` keeps pytest-django's test database for the checks after it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .servers import ROOT

SUITES = [
    "tests/chatapp/streaming/test_worker.py",
    "tests/chatapp/streaming/test_sweep.py",
    # the limits' row locks, on the database that has them
    "tests/chatapp/costs/test_spending_limits.py",
    "tests/chatapp/costs/test_group_limits.py",  # a group limit's lock, shared by its members
    # folding's exact sums and row locks, on numeric and bigint
    "tests/chatapp/costs/test_ledger.py",
    "tests/chatapp/costs/test_running_totals.py",  # concurrent upserts of the running totals
]
DESELECT = "not stalled"  # deadlines, not the database: already covered on SQLite


class SuiteRun:
    def __init__(self, database_url: str, log: Path) -> None:
        self.log = log
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env["DATABASE_URL"] = database_url
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--reuse-db",
                 "-k", DESELECT, *SUITES],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def wait(self, timeout: float) -> tuple[int, str]:
        """The exit code and output of the run."""
        returncode = self.process.wait(timeout)
        return returncode, self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
