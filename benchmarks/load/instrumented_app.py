"""Daphne's entry point in the load benchmark: the app unchanged, plus statement counters.

`daphne benchmarks.load.instrumented_app:application` serves `chatapp.asgi.application` as is;
this module only installs `dbcount` on every database connection the process opens and answers
`GET /__bench__/db` with the counters (and `GET /__bench__/memory` with `memory.snapshot()`, for
the growth check) before a request reaches Django. Nothing in chatapp is touched; the
benchmark's `--plain` serves `chatapp.asgi:application` itself, to see what the hook costs.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.db.backends.signals import connection_created

from benchmarks.load import dbcount, memory

connection_created.connect(dbcount.install, dispatch_uid="benchmarks.load.dbcount")

from chatapp.asgi import application as chat_application  # noqa: E402

STATS_PATH = "/__bench__/db"


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    path = scope.get("path") if scope["type"] == "http" else None
    if path in (STATS_PATH, memory.PATH):
        if path == STATS_PATH:
            found = dbcount.COUNTERS.snapshot()
        else:
            found = memory.snapshot()
            if scope.get("query_string") == b"trim=1":
                memory.trim()
        body = orjson.dumps(found)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await chat_application(scope, receive, send)
