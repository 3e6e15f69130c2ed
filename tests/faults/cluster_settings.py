"""Settings of the servers the infrastructure faults start: the real ones, with quick timings.

The database, the channel layer and the gateway come from `DATABASE_URL`, `REDIS_URL` and
`LLM_BASE_URL` as in production. A quick sweep (so a killed process's answers are found in a few
seconds), a small websocket backlog bound (so a slow reader is found with a short answer), and
`TEST_CHAT_SWEEP_INTERVAL=0` to keep a server from sweeping.
"""

from __future__ import annotations

import os

from chatapp.settings import *  # noqa: F403

CHAT_STALE_AFTER = float(os.environ.get("TEST_CHAT_STALE_AFTER", "4"))
CHAT_SWEEP_INTERVAL = float(os.environ.get("TEST_CHAT_SWEEP_INTERVAL", "1"))
CHAT_WS_MAX_BUFFERED = int(os.environ["TEST_CHAT_WS_MAX_BUFFERED"])
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
