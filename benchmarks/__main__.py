"""`python -m benchmarks`: the stream reader against the openai SDK's own SSE decoding path.

The same bytes (a long chat stream with reasoning, content and a usage chunk, fed in 1 KiB reads
as a socket would deliver them) go through:
- ours: `EventStreamParser` (SSE framing, JSON, typed events) folded by `Accumulator`;
- the SDK's: `openai._streaming.SSEDecoder.iter_bytes` and `json.loads` of every payload, which is
  what its `Stream` does before building pydantic models (so this favours the SDK).
The target is at least 3x the SDK's throughput. Prints one line per path and the ratio.
"""

from __future__ import annotations

import json
import sys
import time
import tracemalloc
from collections.abc import Callable

from gateway_client.accumulator import Accumulator
from gateway_client.protocol import EventStreamParser

READ = 1024
TOKENS = 20_000


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


def ours(pieces: list[bytes]) -> int:
    parser = EventStreamParser()
    accumulator = Accumulator()
    for piece in pieces:
        for event in parser.feed(piece):
            accumulator.add(event)
    for event in parser.close():
        accumulator.add(event)
    return len(accumulator.completion.content)


def openai_sdk(pieces: list[bytes]) -> int:
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


def openai_sdk_typed(pieces: list[bytes]) -> int:
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


def measure(runs: dict[str, Callable[[list[bytes]], int]], pieces: list[bytes]) -> dict[str, float]:
    """Best of several interleaved runs each, so background load hits both paths alike."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(15):
        for name, run in runs.items():
            started = time.perf_counter()
            run(pieces)
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def peak_memory(run: Callable[[list[bytes]], int], pieces: list[bytes]) -> int:
    tracemalloc.start()
    run(pieces)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main() -> int:
    data = make_stream()
    pieces = [data[i : i + READ] for i in range(0, len(data), READ)]
    print(f"{len(data) / 1e6:.1f} MB stream, {TOKENS} chunks, {len(pieces)} reads of {READ} bytes")
    runs = {"ours": ours, "SDK typed": openai_sdk_typed, "SDK raw": openai_sdk}
    assert ours(pieces) == openai_sdk(pieces) == openai_sdk_typed(pieces)
    best = measure(runs, pieces)
    for name, seconds in best.items():
        rate = len(data) / seconds / 1e6
        peak = peak_memory(runs[name], pieces) / 1e6
        print(f"{name:10} {seconds * 1000:8.1f} ms  {rate:7.1f} MB/s  peak {peak:6.1f} MB")
    typed = best["SDK typed"] / best["ours"]
    raw = best["SDK raw"] / best["ours"]
    print(f"speed-up vs the SDK's chunk path (typed chunks, as `Stream` yields): {typed:.1f}x")
    print(f"speed-up vs the SDK's SSEDecoder + json.loads alone (untyped dicts): {raw:.1f}x")
    print("target: at least 3x the SDK's chunk path")
    return 0 if typed >= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
