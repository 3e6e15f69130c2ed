"""Daphne's entry point in the load benchmark: the app unchanged, plus statement counters.

`daphne benchmarks.load.instrumented_app:application` serves `chatapp.asgi.application` as is;
this module only installs `dbcount` on every database connection the process opens and answers
`GET /__bench__/db` with the counters before a request reaches Django. Nothing in chatapp is
touched; the benchmark's `--plain` serves `chatapp.asgi:application` itself, to see what the
hook costs.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.db.backends.signals import connection_created

from benchmarks.load import dbcount

connection_created.connect(dbcount.install, dispatch_uid="benchmarks.load.dbcount")

from chatapp.asgi import application as chat_application  # noqa: E402

STATS_PATH = "/__bench__/db"


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http" and scope.get("path") == STATS_PATH:
        body = orjson.dumps(dbcount.COUNTERS.snapshot())
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await chat_application(scope, receive, send)
