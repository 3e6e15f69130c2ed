"""Settings of the servers these tests start: the real ones, with a sweep quick enough to watch.

Only the timing of the heartbeat sweep changes (and a fast password hasher): the database, the
channel layer and the gateway still come from `DATABASE_URL`, `REDIS_URL` and `LLM_BASE_URL`.
`TEST_CHAT_SWEEP_INTERVAL=0` turns a server's sweep off, so a test knows which process swept.
"""

from __future__ import annotations

import os

from chatapp.settings import *  # noqa: F403

CHAT_STALE_AFTER = 4.0
CHAT_SWEEP_INTERVAL = float(os.environ.get("TEST_CHAT_SWEEP_INTERVAL", "1"))
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if os.environ.get("TEST_SLOW_RESERVATION"):  # tests/multiprocess/test_spending_limits.py
    INSTALLED_APPS = [*INSTALLED_APPS, "tests.multiprocess.slow_reservations.SlowReservations"]  # noqa: F405
