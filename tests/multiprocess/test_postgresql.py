"""The worker and sweep tests pass on PostgreSQL, and really ran there (see `suite.py`)."""

from __future__ import annotations

import re
import time

import psycopg
import pytest

from .suite import SuiteRun

pytestmark = pytest.mark.multiprocess


def test_worker_and_sweep_suites_pass_on_postgresql(
    postgres_suite: SuiteRun, postgres_url: str
) -> None:
    returncode, output = postgres_suite.wait(timeout=90)
    assert returncode == 0, output[-6000:]
    summary = re.search(r"^(\d+) passed\b.* in [\d.]+s", output, re.MULTILINE)
    assert summary is not None, output[-2000:]
    assert int(summary[1]) >= 15

    test_database = postgres_url.rsplit("/", 1)[0] + "/test_chat"
    with psycopg.connect(test_database, autocommit=True) as db:
        migrations = db.execute("SELECT name FROM django_migrations WHERE app = 'chatapp'")
        assert ("0001_initial",) in migrations.fetchall()
        deadline = time.monotonic() + 5  # a session's statistics are published when it ends
        while True:
            row = db.execute(
                "SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables"
                " WHERE relname = 'chatapp_generation'"
            ).fetchone()
            if (row is not None and min(row) > 0) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert row is not None
    inserted, updated = row
    assert inserted > 0
    assert updated > 0  # partial flushes and final states
