"""`python -m benchmarks markdown`: what live markdown costs on a 4,000-token answer (issue 10).

A markdown answer of about 4,000 tokens (headings, paragraphs, lists, tables, quotes and code in
three languages, as models write them) goes through `LiveState` as the worker feeds it: the
emulator's pieces of up to four characters, a delta taken as the ticker takes them (every
`--tokens-per-delta` pieces, 50 tokens/s at a 50 ms tick). Reported: the websocket bytes per byte
of answer (each delta's encoded message plus its frame header), as Daphne sends them with
permessage-deflate (`chatapp/patches/daphne_websockets.py`: zlib with its window and memory level,
flushed per message) and uncompressed, with and without the settled blocks' HTML; the server CPU per
settled chunk and per delta; and whether the chunks join to exactly the final render. The
settler's parses run in this process (not in the render pool, so that their CPU is counted), one
tick after the delta that started them, as the ticker finds them. Prints one table and writes it
to `bench/results/markdown-<time>.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
TARGET_WIRE = 3.0  # wire bytes per answer byte, at most (the goal)


def answer(tokens: int) -> str:
    """About `tokens` emulator tokens of varied markdown."""
    from gateway_client.emulator.text import split_tokens

    sections = []
    n = 0
    while sum(len(split_tokens(part)) for part in sections) < tokens:
        n += 1
        sections.append(
            f"## Step {n}: measuring the gateway\n\n"
            f"Paragraph {n} explains **why** the stream is read as it arrives, with `inline "
            "code`, a [link](https://example.com/docs) and a little UTF-8: café, 日本語, 🚀.\n"
            "It wraps onto a second line of the same paragraph.\n\n"
            f"- first point of step {n}\n- second point, *emphasised*\n"
            "  - a nested point\n- third point\n\n"
            "| metric | value | unit |\n|:--|--:|:-:|\n"
            f"| latency | {n * 7} | ms |\n| tokens | {n * 40} | tok |\n\n"
            "```python\n"
            f"def step_{n}(stream):\n"
            '    """Read every delta; keep what arrived."""\n'
            "    for delta in stream:\n"
            "        yield delta.text.strip()\n"
            "```\n\n"
            f"> A quoted remark about step {n},\n> over two lines.\n\n"
            "```js\n"
            f"const step{n} = (events) => events.filter((e) => e.type === 'delta');\n"
            "```\n\n"
        )
    return "".join(sections)


def frame(text: str) -> int:
    """Bytes of a server-to-browser websocket text frame carrying `text`."""
    size = len(text.encode())
    return size + (2 if size < 126 else 4 if size < 65536 else 10)


class Deflater:
    """A socket's permessage-deflate compressor, as autobahn runs it for Daphne."""

    def __init__(self) -> None:
        from chatapp.patches.daphne_websockets import MEM_LEVEL, WINDOW_BITS

        self._zlib = zlib.compressobj(
            zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -WINDOW_BITS, MEM_LEVEL
        )

    def frame(self, text: str) -> int:
        data = self._zlib.compress(text.encode()) + self._zlib.flush(zlib.Z_SYNC_FLUSH)
        size = len(data) - 4  # the flush's empty block, left out on the wire (RFC 7692)
        return size + (2 if size < 126 else 4 if size < 65536 else 10)


async def _direct(function: object, *args: object) -> object:
    return function(*args)  # type: ignore[operator]


async def run(tokens: int, tokens_per_delta: int) -> dict[str, object]:
    from chatapp.rendering.markdown import render_markdown
    from chatapp.streaming.live_blocks import BlockSettler
    from chatapp.streaming.live_state import LiveState
    from chatapp.ws import protocol
    from gateway_client.emulator.text import split_tokens
    from gateway_client.events import TextDelta

    text = answer(tokens)
    pieces = split_tokens(text)
    state = LiveState()
    state.blocks = BlockSettler(run=_direct)
    wire = wire_without_html = deflated = 0
    deflater = Deflater()
    deltas = chunks = 0
    html: list[str] = []
    cpu_deltas = 0.0
    cpu_settling = 0.0

    async def take(last: bool = False) -> None:
        nonlocal wire, wire_without_html, deflated, deltas, chunks, cpu_deltas, cpu_settling
        started = time.process_time()
        if last:
            await state.finish_render()
        fields = state.take_last_delta() if last else state.take_delta()
        await asyncio.sleep(0)  # the parse it started runs before the next tick
        spent = time.process_time() - started
        if fields is None:
            return
        cpu_deltas += spent
        deltas += 1
        message = protocol.group_message(protocol.delta(1, fields))["text"]
        wire += frame(message)
        deflated += deflater.frame(message)
        settled = fields.pop("settled", None)
        if settled is not None:
            chunks += 1
            cpu_settling += spent
            html.append(str(settled[2]))  # type: ignore[index]
        if "content" in fields:
            plain = protocol.group_message(protocol.delta(1, fields))["text"]
            wire_without_html += frame(plain)

    for i, piece in enumerate(pieces, 1):
        state.apply(TextDelta(piece))
        if i % tokens_per_delta == 0:
            await take()
    await take(last=True)
    answer_bytes = len(text.encode())
    started = time.process_time()
    final = render_markdown(text)
    final_cpu = time.process_time() - started
    return {
        "tokens": len(pieces),
        "answer_bytes": answer_bytes,
        "deltas": deltas,
        "settled_chunks": chunks,
        "wire_bytes_per_answer_byte": round(deflated / answer_bytes, 3),
        "wire_bytes_per_answer_byte_uncompressed": round(wire / answer_bytes, 3),
        "wire_bytes_per_answer_byte_uncompressed_text_only": round(
            wire_without_html / answer_bytes, 3
        ),
        "cpu_ms_per_chunk": round(cpu_settling / max(chunks, 1) * 1000, 3),
        "cpu_ms_per_delta_all": round(cpu_deltas / max(deltas, 1) * 1000, 3),
        "cpu_ms_whole_render_once": round(final_cpu * 1000, 3),
        "cpu_ms_all_deltas": round(cpu_deltas * 1000, 1),
        "characters_parsed_per_answer_character": round(state.blocks.parsed / len(text), 2),
        "final_equals_live": state.blocks.html == final,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks markdown", description=__doc__)
    parser.add_argument("--tokens", type=int, default=4000)
    parser.add_argument("--tokens-per-delta", type=int, default=4, help="~16 characters a delta")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    result = asyncio.run(run(args.tokens, args.tokens_per_delta))
    for key, value in result.items():
        print(f"{key:40} {value}")
    wire = float(str(result["wire_bytes_per_answer_byte"]))
    ok = bool(result["final_equals_live"]) and wire <= TARGET_WIRE
    print("goal (≤ 3 wire bytes per answer byte, final = live):", "met" if ok else "NOT met")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    record = {"benchmark": "markdown", "machine": platform.platform(), "args": vars(args), **result}
    (out / f"markdown-{stamp}.json").write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    return 0 if ok else 1
