"""The emulator process of the load benchmark: the stock emulator, plus its records on a URL.

`GET /__bench__/records` answers every generation record's wall-clock times (`created_at`,
`first_token_at`, `finished_at`), so the benchmark subtracts what the emulator itself took for
each first token rather than its configured TTFT. Wrapping keeps the benchmark out of the code it
measures. `--long-tokens` is here because the emulator's command line has no flag for it and the
page can only send a model its picker lists (`emulator/long`, without a query suffix).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

import orjson
import uvicorn

from gateway_client.emulator import create_app

RECORDS_PATH = "/__bench__/records"
_FIELDS = ("id", "scenario", "created_at", "first_token_at", "finished_at", "cancelled_at")


def with_records(app: Any) -> Any:
    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") == RECORDS_PATH:
            records = [
                {key: value for key, value in asdict(record).items() if key in _FIELDS}
                | {"outcome": record.final_outcome, "tokens": record.tokens_completion}
                for record in app.records.all()
            ]
            body = orjson.dumps(records)
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load.emulator_app")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens-per-second", type=float, default=50.0)
    parser.add_argument("--ttft-ms", type=int, default=400)
    parser.add_argument("--long-tokens", type=int, default=500)
    args = parser.parse_args()
    app = create_app(
        tokens_per_second=args.tokens_per_second,
        ttft_ms=args.ttft_ms,
        long_tokens=args.long_tokens,
    )
    config = uvicorn.Config(
        with_records(app),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
        backlog=4096,
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
