"""`python -m gateway_client.emulator`: serve the emulator in the foreground with uvicorn."""

from __future__ import annotations

import argparse
import os

from ..dialects import titles
from .dialects import DIALECTS
from .server import create_app, serve

REQUEST_OPTIONS_ENV = "GATEWAY_EMULATOR_REQUEST_OPTIONS"


def main(argv: list[str] | None = None) -> None:
    gateways = titles(dialect.facts for dialect in DIALECTS.values())
    parser = argparse.ArgumentParser(
        prog="python -m gateway_client.emulator",
        description=f"Emulate the {gateways} gateways on one port.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--tokens-per-second", type=float, default=40.0)
    parser.add_argument("--ttft-ms", type=int, default=400)
    parser.add_argument("--prefix", default="", help="serve under this path, e.g. /emulator")
    parser.add_argument(
        "--request-options",
        action="store_true",
        default=os.environ.get(REQUEST_OPTIONS_ENV, "") == "1",
        help="let each request set knobs through its model name (emulator/long?long_tokens=50);"
        f" for tests only (also {REQUEST_OPTIONS_ENV}=1)",
    )
    args = parser.parse_args(argv)
    app = create_app(
        tokens_per_second=args.tokens_per_second,
        ttft_ms=args.ttft_ms,
        prefix=args.prefix,
        request_options=args.request_options,
    )
    base = f"http://{args.host}:{args.port}{app.prefix}"
    for dialect in DIALECTS.values():
        print(f"{dialect.facts.title:>8}: {base}{dialect.facts.emulator_path}")
    print("models: emulator/<scenario>; see GET .../models (any non-empty Bearer key)", flush=True)
    serve(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
