"""`python -m benchmarks [reader]`: our stream reader side by side with its peers (issue 8).

The same bytes (a long chat stream with reasoning, content and a usage chunk, fed in 1 KiB reads
as a socket would deliver them) go through each path, which must all find the same answer text:
- ours: `EventStreamParser` (SSE framing, `[DONE]`, JSON, typed events) folded by `Accumulator`;
- the openai SDK's decoder: `openai._streaming.SSEDecoder.iter_bytes` and `json.loads` of every
  payload, what its `Stream` does before it builds models (so this one favours the SDK);
- the openai SDK's typed path: the same plus `construct_type` into `ChatCompletionChunk`, what
  its `Stream` yields;
- httpx-sse: `EventSource(response).iter_sse()` over an `httpx.Response` streaming the reads, and
  `sse.json()` of every event;
- a limit, not a reader: split the buffer on `\\n\\n` and `orjson.loads` each payload, with none of
  the event-stream rules (CR line ends, comments, multi-line data, caps) and no events built.

The target is at least 3x the SDK decoder's throughput. Times are CPU time (`process_time`), the
best of several interleaved runs, so other load on a shared machine counts less. Prints one table
and writes it, with the machine and package versions, to `bench/results/reader-<time>.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import orjson

from gateway_client.accumulator import Accumulator
from gateway_client.stream_parser import EventStreamParser

ROOT = Path(__file__).resolve().parent.parent
READ = 1024
TOKENS = 20_000
TARGET = 3.0
SLOW_PATH_SECONDS = 10.0  # a path stops repeating after this much time, if it has run 3 times


def make_stream() -> bytes:
    head = '{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    frames = []
    for i in range(TOKENS):
        field = "reasoning" if i < TOKENS // 4 else "content"
        delta = json.dumps({field: f" tok{i} é"})
        frames.append(f'data: {head}[{{"index":0,"delta":{delta},"finish_reason":null}}]}}\n\n')
    usage = json.dumps({"prompt_tokens": 5, "completion_tokens": TOKENS, "cost": 0.1})
    frames.append(f'data: {head}[],"usage":{usage}}}\n\n')
    frames.append("data: [DONE]\n\n")
    return "".join(frames).encode()


# The paths: each reads the pieces and returns the length of the answer text ----------------


def ours(pieces: list[bytes]) -> int:
    parser = EventStreamParser()
    accumulator = Accumulator()
    for piece in pieces:
        for event in parser.feed(piece):
            accumulator.add(event)
    for event in parser.close():
        accumulator.add(event)
    return len(accumulator.completion.content)


def openai_decoder(pieces: list[bytes]) -> int:
    from openai._streaming import SSEDecoder

    text = []
    for sse in SSEDecoder().iter_bytes(iter(pieces)):
        if sse.data.startswith("[DONE]"):
            break
        chunk = json.loads(sse.data)
        for choice in chunk["choices"]:
            content = choice["delta"].get("content")
            if content:
                text.append(content)
    return len("".join(text))


def openai_typed(pieces: list[bytes]) -> int:
    """What the SDK's `Stream` does per chunk: decode, `sse.json()`, check `error`, and build the
    typed `ChatCompletionChunk` with `construct_type` (its non-strict `_process_response_data`)."""
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai.types.chat import ChatCompletionChunk

    text = []
    for sse in SSEDecoder().iter_bytes(iter(pieces)):
        if sse.data.startswith("[DONE]"):
            break
        data = sse.json()
        if data.get("error"):
            raise RuntimeError(data["error"])
        chunk = construct_type(type_=ChatCompletionChunk, value=data)
        for choice in chunk.choices:
            if choice.delta.content:
                text.append(choice.delta.content)
    return len("".join(text))


class _Reads(httpx.SyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._pieces)


def httpx_sse(pieces: list[bytes]) -> int:
    from httpx_sse import EventSource

    response = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=_Reads(pieces)
    )
    text = []
    for sse in EventSource(response).iter_sse():
        if sse.data == "[DONE]":
            break
        for choice in sse.json()["choices"]:
            content = choice["delta"].get("content")
            if content:
                text.append(content)
    return len("".join(text))


def naive_split(pieces: list[bytes]) -> int:
    text = []
    rest = b""
    for piece in pieces:
        *blocks, rest = (rest + piece).split(b"\n\n")
        for block in blocks:
            payload = block[6:]
            if payload == b"[DONE]":
                return len("".join(text))
            for choice in orjson.loads(payload)["choices"]:
                content = choice["delta"].get("content")
                if content:
                    text.append(content)
    return len("".join(text))


Reader = Callable[[list[bytes]], int]
PATHS: dict[str, Reader] = {
    "ours: EventStreamParser + Accumulator": ours,
    "openai SSEDecoder + json.loads": openai_decoder,
    "openai Stream (ChatCompletionChunk)": openai_typed,
    "httpx-sse + json.loads": httpx_sse,
    "limit: split on \\n\\n + orjson": naive_split,
}
OURS = "ours: EventStreamParser + Accumulator"
TARGET_PEER = "openai SSEDecoder + json.loads"


# Measuring ---------------------------------------------------------------------------------


def measure(pieces: list[bytes], runs: int) -> dict[str, list[float]]:
    """CPU seconds of each run, the paths interleaved so that background load hits them alike; a
    slow path stops after `SLOW_PATH_SECONDS` once it has run three times."""
    times: dict[str, list[float]] = {name: [] for name in PATHS}
    for _ in range(runs):
        for name, run in PATHS.items():
            if len(times[name]) >= 3 and sum(times[name]) > SLOW_PATH_SECONDS:
                continue
            started = time.process_time()
            run(pieces)
            times[name].append(time.process_time() - started)
    return times


def peak_memory(run: Reader, pieces: list[bytes]) -> int:
    tracemalloc.start()
    run(pieces)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def _git(*command: str) -> str:
    try:
        result = subprocess.run(
            ["git", *command], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return result.stdout.strip()


def table(rows: list[dict[str, Any]]) -> str:
    width = max(len(row["path"]) for row in rows)
    lines = [f"{'path':{width}}  {'best ms':>9}  {'MB/s':>7}  {'ours is':>8}  {'peak MB':>8}"]
    for row in rows:
        lines.append(
            f"{row['path']:{width}}  {row['best_s'] * 1000:9.1f}  {row['mb_per_s']:7.1f}  "
            f"{row['ours_speedup']:7.2f}x  {row['peak_bytes'] / 1e6:8.1f}"
        )
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks [reader]", description=__doc__)
    parser.add_argument("--runs", type=int, default=15, help="interleaved runs of each path")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    data = make_stream()
    pieces = [data[i : i + READ] for i in range(0, len(data), READ)]
    answers = {name: run(pieces) for name, run in PATHS.items()}
    assert len(set(answers.values())) == 1, f"the paths disagree: {answers}"
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    loadavg = os.getloadavg()
    times = measure(pieces, args.runs)
    best_ours = min(times[OURS])
    rows = [
        {
            "path": name,
            "runs": len(seconds),
            "best_s": min(seconds),
            "median_s": statistics.median(seconds),
            "mb_per_s": len(data) / min(seconds) / 1e6,
            "ours_speedup": min(seconds) / best_ours,
            "peak_bytes": peak_memory(PATHS[name], pieces),
        }
        for name, seconds in times.items()
    ]
    ratio = min(times[TARGET_PEER]) / best_ours
    print(
        f"{len(data) / 1e6:.1f} MB stream, {TOKENS} chunks, {len(pieces)} reads of {READ} bytes; "
        f"best of up to {args.runs} interleaved runs, CPU time"
    )
    print(table(rows))
    met = "met" if ratio >= TARGET else "NOT met"
    print(f"target: ours at least {TARGET:g}x the {TARGET_PEER}: {ratio:.2f}x, {met}")
    payload = {
        "started": started,
        "command": ["python", "-m", "benchmarks", *argv],
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_before": loadavg,
            "loadavg_after": os.getloadavg(),
            "python": platform.python_version(),
        },
        "versions": {
            package: version(package) for package in ("openai", "httpx-sse", "msgspec", "orjson")
        },
        "app": {"commit": _git("rev-parse", "HEAD"), "dirty": bool(_git("status", "--porcelain"))},
        "stream": {"bytes": len(data), "chunks": TOKENS, "reads": len(pieces), "read_size": READ},
        "timing": "CPU seconds (time.process_time) per run; best and median of the runs",
        "paths": rows,
        "target": {"peer": TARGET_PEER, "ratio": ratio, "at_least": TARGET, "met": ratio >= TARGET},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"reader-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
    print(f"wrote {path}")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
