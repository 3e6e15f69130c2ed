"""A hostile gateway on a thread: `tests/gateway_client/rawserver.py`'s raw HTTP server, with
the answer picked by the model name the app asks for, so one server serves a whole session
(a Daphne subprocess's and the in-process app's requests alike).

Some models echo the request back, headers and all, in every place an error can carry text (a
status error's JSON and text bodies, an in-band error event, a malformed event): a gateway that
quotes the `Authorization` header must still not put the key in front of anyone. Others send
model output that tries to break out of its JSON string or its SSE event (`INJECTIONS`), or
framing that tries to add events (`FRAMINGS`). `slow` drips until the client hangs up.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import orjson

from tests.gateway_client.rawserver import Peer, raw_server

# What the model "writes" in each injection scenario, as the content of its chunks.
INJECTIONS: dict[str, list[str]] = {
    "inject-sse": [
        "Before.",
        '\n\ndata: {"choices":[{"index":0,"delta":{"content":"SMUGGLED"}}]}\n\n',
        "\r\ndata: [DONE]\r\n\r\n",
        '\nevent: error\ndata: {"error":{"message":"SMUGGLED"}}\nid: 7\nretry: 1\n\n',
        " After.",
    ],
    "inject-html": [
        "Text </script><img src=x onerror=\"window.__xss='img'\">",
        "<script>window.__xss='script'</script>",
        '<svg onload="window.__xss=\'svg\'"></svg><iframe srcdoc="<script>parent.__xss=1',
        '</script>"></iframe>',
        "[link](javascript:window.__xss='href') <a href=\"javascript:window.__xss='a'\">a</a>",
        "\r<img src=x onerror=window.__xss='cr'>\r\n`</code><img src=x onerror=window.__xss=2>`",
    ],
    # Formulas become MathML: what LaTeX can make of links, styles and HTML must stay inert.
    "inject-math": [
        "Math $\\href{javascript:window.__xss='href'}{click}$ and ",
        "\\(\\text{</mtext></math><img src=x onerror=window.__xss='mtext'>}\\) and ",
        "$\\style{background:url(javascript:window.__xss=1)}{x}$ $\\class{copy-code}{y}$\n\n",
        "$$\n\\html{<script>window.__xss='html'</script>}\n$$\n\n",
        "\\[\\mathrm{<svg/onload=window.__xss='svg'>}\\] $\\color{red}{z}$ end.",
    ],
}

SSE = "text/event-stream"
_CHUNK = {"id": "chatcmpl-sec", "object": "chat.completion.chunk", "model": "scripted"}


def chunk(content: str, finish: str | None = None) -> bytes:
    delta = {"content": content} if content else {}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return orjson.dumps({**_CHUNK, "choices": [choice]})


def event(data: bytes) -> bytes:
    return b"data: " + data + b"\n\n"


# Framing a gateway might send between the chunks "One. " and "Three.": the extra fields must
# change nothing, and no event may be made out of what one event's data carries (SMUGGLED).
# `FRAMING_SHOWN` is the content each must end with: a malformed event ends the stream there.
FRAMINGS: dict[str, bytes] = {
    "frame-fields": b"event: message\nid: 9\nretry: 10\n" + event(chunk("Two. ")),
    "frame-two-objects": b"data: " + chunk("Two. ") + b" " + chunk("SMUGGLED") + b"\n\n",
    # Raw CRs (which JSON forbids in a string) end lines: CR CR would end the event mid-string.
    "frame-cr-in-string": event(
        chunk("\x00cut").replace(
            b'"\\u0000cut"', b'"Two. \r\rdata: ' + chunk("SMUGGLED") + b'\r\r"'
        )
    ),
}
FRAMING_SHOWN = {
    "frame-fields": "One. Two. Three.",
    "frame-two-objects": "One. ",
    "frame-cr-in-string": "One. ",
}


async def _head(peer: Peer, status: str = "200 OK", content_type: str = SSE) -> None:
    # One request per connection (the raw server closes it after the script): say so.
    await peer.head(status, content_type, extra="Connection: close\r\n")


async def _stream(peer: Peer, pieces: list[bytes]) -> None:
    await _head(peer)
    for piece in pieces:
        await peer.chunk(piece)
    await peer.chunk(event(chunk("", "stop")) + b"data: [DONE]\n\n")
    await peer.end()


async def _answer(peer: Peer) -> None:
    head = peer.request_head.decode("latin-1")
    echo = head + peer.request_body.decode("utf-8", "replace")
    if head.startswith("GET ") and "/models" in head.split("\r\n", 1)[0]:
        hostile = head.split(" ", 2)[1].split("/")[1]  # "/models-deep/v1/models": models-deep
        if hostile in HOSTILE_MODELS:
            await _hostile_models(peer, hostile)
            return
        models = [{"id": name} for name in MODELS]
        body = orjson.dumps({"object": "list", "data": models})
        await _head(peer, content_type="application/json")
        await peer.chunk(body)
        await peer.end()
        return
    if head.startswith("GET "):  # a generation record: not found, quoting the request
        await _head(peer, "404 Not Found", "text/plain")
        await peer.chunk(echo.encode())
        await peer.end()
        return
    if "/chat/completions" not in head.split("\r\n", 1)[0]:  # speech, images: refused, quoted
        body = orjson.dumps({"error": {"message": f"Not allowed for key in: {echo}"}})
        await _head(peer, "403 Forbidden", "application/json")
        await peer.chunk(body)
        await peer.end()
        return
    model = orjson.loads(peer.request_body).get("model", "")
    CHAT_MODELS_ASKED.append(model)
    match model:
        case "ok":
            await _stream(peer, [event(chunk("Hello there."))])
        case "slow":
            await _head(peer)
            while True:  # until the client hangs up (a write then fails)
                await peer.chunk(event(chunk("tick ")))
                await asyncio.sleep(0.1)
        case "echo-401":
            body = orjson.dumps({"error": {"message": f"Bad key. You sent: {echo}"}})
            await _head(peer, "401 Unauthorized", "application/json")
            await peer.chunk(body)
            await peer.end()
        case "echo-500-text":
            await _head(peer, "500 Internal Server Error", "text/plain")
            await peer.chunk(f"Traceback (most recent call last): request was {echo}".encode())
            await peer.end()
        case "echo-502-html":
            await _head(peer, "502 Bad Gateway", "text/html")
            await peer.chunk(f"<html><body><pre>{echo}</pre></body></html>".encode())
            await peer.end()
        case "echo-stream-error":
            error = orjson.dumps({"error": {"message": f"Upstream refused: {echo}"}})
            await _stream(peer, [event(chunk("Partial. ")), event(error)])
        case "echo-malformed":
            line = " ".join(echo.split())  # one line: a quoted CR LF would end the data field
            await _stream(peer, [event(chunk("Partial. ")), event(f"not json {line}".encode())])
        case _ if model in INJECTIONS:
            await _stream(peer, [event(chunk(piece)) for piece in INJECTIONS[model]])
        case _ if model in FRAMINGS:
            await _stream(peer, [event(chunk("One. ")), FRAMINGS[model], event(chunk("Three."))])
        case _:
            await _head(peer, "404 Not Found", "application/json")
            await peer.chunk(orjson.dumps({"error": {"message": f"no model {model!r}"}}))
            await peer.end()


# `GET /models` answers that are no model list, each served under its own base URL
# (`hostile_models_url`): the app must show that gateway as down, and every page still work.
HUGE_MODELS_BYTES = 300 * 1024 * 1024
HOSTILE_MODELS: dict[str, bytes] = {
    "models-list": b"[]",
    "models-data-5": b'{"data": 5}',
    "models-deep": b'{"data": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
    "models-deep-entry": b'{"data": [{"id": "ok", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}",
    # Only `ok` is a model: the others' IDs are no strings (or empty), and are skipped.
    "models-bad-ids": orjson.dumps(
        {
            "data": [
                {"id": 5},
                {"id": None},
                {"id": ""},
                {"id": ["ok"]},
                {"name": "x"},
                7,
                {"id": "ok"},
            ]
        }
    ),
    "models-huge": b"",  # `HUGE_MODELS_BYTES` of one entry's padding, streamed, never built
}
# Bytes of `models-huge` each connection wrote before the client hung up.
HUGE_SENT: list[int] = []
# The `model` of every chat request the scripted gateway was sent, in order.
CHAT_MODELS_ASKED: list[str] = []


def hostile_models_url(base_url: str, name: str) -> str:
    """The base URL under which the scripted gateway's `/models` answers `HOSTILE_MODELS[name]`."""
    root, _, _ = base_url.rpartition("/v1")
    return f"{root}/{name}/v1"


async def _hostile_models(peer: Peer, name: str) -> None:
    await _head(peer, content_type="application/json")
    if name != "models-huge":
        await peer.chunk(HOSTILE_MODELS[name])
        await peer.end()
        return
    sent = 0
    piece = b"x" * 65536
    HUGE_SENT.append(0)
    await peer.chunk(b'{"data": [{"id": "ok", "pad": "')
    while sent < HUGE_MODELS_BYTES:  # a write fails once the client hangs up
        await peer.chunk(piece)
        sent += len(piece)
        HUGE_SENT[-1] = sent
    await peer.chunk(b'"}]}')
    await peer.end()


ECHOES = ["echo-401", "echo-500-text", "echo-502-html", "echo-stream-error", "echo-malformed"]
MODELS = ["ok", "slow", *ECHOES, *INJECTIONS, *FRAMINGS]


@dataclass(frozen=True, slots=True)
class ScriptedGateway:
    base_url: str  # ends in /v1, as a gateway's base URL does


@contextlib.contextmanager
def serve_in_thread() -> Iterator[ScriptedGateway]:
    """The scripted gateway on its own event loop in a daemon thread, until the block exits."""
    ready = threading.Event()
    url: list[str] = []
    loop = asyncio.new_event_loop()
    stop: asyncio.Future[None] = loop.create_future()

    async def run(script: Callable[[Peer], Awaitable[None]]) -> None:
        async with raw_server(script) as (base_url, _peers):
            url.append(base_url)
            ready.set()
            await stop

    thread = threading.Thread(
        target=loop.run_until_complete, args=(run(_answer),), name="scripted-gateway", daemon=True
    )
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the scripted gateway did not start")
    try:
        yield ScriptedGateway(url[0])
    finally:
        loop.call_soon_threadsafe(stop.set_result, None)
        thread.join(10)
        loop.close()
