"""Command line: `python -m gateway_client replay FILE [--chunk-size N]`, and `chat`.

`replay` prints what the client makes of a captured response as one JSON object (the contract in
the conformance README), so a user can debug a capture without the app.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from .capture import CaptureError, parse_capture, replay

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway_client", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    replay_cmd = commands.add_parser("replay", help="replay a `curl -siN` capture, print JSON")
    replay_cmd.add_argument("file", type=Path)
    replay_cmd.add_argument(
        "--chunk-size", type=int, default=None, help="feed the body in pieces of N bytes"
    )

    from .cli_chat import add_chat_command

    add_chat_command(commands)

    args = parser.parse_args(argv)
    if args.command == "replay":
        return _replay(args.file, args.chunk_size)
    return int(args.handler(args))


def _replay(path: Path, chunk_size: int | None) -> int:
    if chunk_size is not None and chunk_size < 1:
        print("replay: --chunk-size must be at least 1", file=sys.stderr)
        return 2
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        print(f"replay: no such file: {path}", file=sys.stderr)
        return 2
    except IsADirectoryError:
        print(f"replay: {path} is a directory, not a capture file", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"replay: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        capture = parse_capture(raw)
    except CaptureError as exc:
        print(f"replay: {path}: {exc}", file=sys.stderr)
        return 2
    completion = replay(capture, chunk_size=chunk_size)
    sys.stdout.buffer.write(orjson.dumps(completion.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
