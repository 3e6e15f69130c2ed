"""`python -m gateway_client chat` and `generation`: a gateway from the terminal.

The answer streams as it arrives; reasoning goes in its own dimmed block, tool calls are listed,
and the cost and generation ID close the run. Model output is untrusted, so control characters
(terminal escape sequences above all) are shown escaped, never written raw. Ctrl-C closes the
connection, which cancels the generation upstream, and says how to look its cost up.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, TextIO

import orjson

from .client import GatewayClient
from .dialects import DIALECTS
from .errors import GatewayError, StatusError
from .events import ReasoningDelta, TextDelta, ToolCallDelta

__all__ = ["add_chat_command", "terminal_safe"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """Escape control characters except newline and tab, so output cannot drive the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def add_chat_command(commands: Any) -> None:
    chat = commands.add_parser("chat", help="stream a chat answer from a gateway")
    _connection_args(chat)
    chat.add_argument("--model", required=True)
    chat.add_argument("--system", help="a system message")
    chat.add_argument("--max-tokens", type=int)
    chat.add_argument("--json", action="store_true", help="print the result as one JSON object")
    chat.add_argument("prompt")
    chat.set_defaults(handler=_chat)

    generation = commands.add_parser("generation", help="look up a generation's record and cost")
    _connection_args(generation)
    generation.add_argument("id")
    generation.set_defaults(handler=_generation)


def _connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base-url",
        default=os.environ.get("LLM_BASE_URL"),
        help="gateway base URL (default: $LLM_BASE_URL)",
    )
    parser.add_argument("--api-key", help="API key (default: $LLM_API_KEY)")
    parser.add_argument("--dialect", choices=list(DIALECTS))


def _client(args: argparse.Namespace) -> GatewayClient | None:
    key = args.api_key or os.environ.get("LLM_API_KEY")
    if not args.base_url:
        print("error: give --base-url or set LLM_BASE_URL", file=sys.stderr)
        return None
    if not key:
        print("error: give --api-key or set LLM_API_KEY", file=sys.stderr)
        return None
    return GatewayClient(args.base_url, key, dialect=args.dialect)


@dataclass
class _Progress:
    generation_id: str | None = None
    base_url: str = ""


def _chat(args: argparse.Namespace) -> int:
    client = _client(args)
    if client is None:
        return 2
    progress = _Progress(base_url=client.base_url)
    try:
        return asyncio.run(_stream(client, args, progress))
    except KeyboardInterrupt:
        print(
            "\n\ncancelled: the connection is closed, so the gateway stops generating.",
            file=sys.stderr,
        )
        if progress.generation_id:
            print(
                "what was delivered is billed; look it up with:\n"
                f"  python -m gateway_client generation --base-url {progress.base_url} "
                f"{progress.generation_id}",
                file=sys.stderr,
            )
        return 130


async def _stream(client: GatewayClient, args: argparse.Namespace, progress: _Progress) -> int:
    messages: list[dict[str, Any]] = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    messages.append({"role": "user", "content": args.prompt})
    out = sys.stdout
    dim = out.isatty()
    failure: GatewayError | None = None
    async with client:
        try:
            async with client.stream_chat(
                model=args.model, messages=messages, max_tokens=args.max_tokens
            ) as stream:
                printer = _Printer(out, dim, quiet=args.json)
                try:
                    async for event in stream:
                        progress.generation_id = stream.generation_id
                        printer.show(event)
                except GatewayError as exc:
                    failure = exc
                printer.end()
                completion = stream.completion
        except StatusError as exc:
            return _report_status(exc, args.json)
        except GatewayError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.json:
        out.buffer.write(orjson.dumps(completion.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
        return 0 if failure is None else 1
    for call in completion.tool_calls:
        print(f"tool call {call.index}: {call.name}({terminal_safe(call.arguments)})", file=out)
    if failure is not None:
        print(f"error: {terminal_safe(str(failure))} (partial answer above)", file=sys.stderr)
    cost = completion.cost
    cost_text = (
        f"{cost.amount} {cost.unit}" + (" (estimated)" if cost.estimated else "")
        if cost
        else "not reported in the stream (see `generation`)"
    )
    print(
        f"\nmodel: {completion.model}  generation: {completion.generation_id}  "
        f"finish: {completion.finish_reason}  cost: {cost_text}",
        file=sys.stderr,
    )
    return 0 if failure is None else 1


def _report_status(exc: StatusError, as_json: bool) -> int:
    if as_json:
        sys.stdout.buffer.write(
            orjson.dumps({"status": exc.status, "outcome": "error", "error": exc.info.to_dict()})
            + b"\n"
        )
    else:
        retry = f" (retry after {exc.retry_after:g} s)" if exc.retry_after is not None else ""
        print(f"error: {terminal_safe(str(exc))}{retry}", file=sys.stderr)
    return 1


class _Printer:
    """Writes events as they come: reasoning in a block of its own, then the answer."""

    def __init__(self, out: TextIO, dim: bool, *, quiet: bool) -> None:
        self.out, self.dim, self.quiet = out, dim, quiet
        self.section: str | None = None

    def show(self, event: object) -> None:
        if self.quiet:
            return
        match event:
            case ReasoningDelta(text=text):
                self._enter("reasoning")
                self.out.write(terminal_safe(text))
            case TextDelta(text=text):
                self._enter("answer")
                self.out.write(terminal_safe(text))
            case ToolCallDelta(name=name) if name:
                self._enter("tools")
                self.out.write(f"calling {terminal_safe(name)}…\n")
            case _:
                return
        self.out.flush()

    def _enter(self, section: str) -> None:
        if section == self.section:
            return
        if self.section == "reasoning" and self.dim:
            self.out.write("\x1b[0m")
        if self.section is not None:
            self.out.write("\n\n")
        if section == "reasoning":
            self.out.write("\x1b[2m[reasoning]\n" if self.dim else "[reasoning]\n")
        elif section == "answer" and self.section == "reasoning":
            self.out.write("[answer]\n")
        self.section = section

    def end(self) -> None:
        if self.quiet:
            return
        if self.section == "reasoning" and self.dim:
            self.out.write("\x1b[0m")
        if self.section is not None:
            self.out.write("\n")
        self.out.flush()


def _generation(args: argparse.Namespace) -> int:
    client = _client(args)
    if client is None:
        return 2

    async def lookup() -> int:
        async with client:
            try:
                record = await client.get_generation(args.id)
            except GatewayError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
        sys.stdout.buffer.write(orjson.dumps(record.raw, option=orjson.OPT_INDENT_2) + b"\n")
        return 0

    return asyncio.run(lookup())
