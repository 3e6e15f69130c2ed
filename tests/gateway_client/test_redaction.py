"""The client cuts its own API key out of the errors a gateway sends back (one that quotes the
request, `Authorization` header and all)."""

from __future__ import annotations

import httpx
import orjson
import pytest

from gateway_client import GatewayClient, InBandError, ProtocolError, StatusError
from gateway_client.redaction import MASK, Redactor

KEY = "sk-live-0123456789abcdef"


def quoting(status: int, content_type: str, body: bytes) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        quoted = body.replace(b"{auth}", request.headers["authorization"].encode())
        return httpx.Response(status, content=quoted, headers={"content-type": content_type})

    return httpx.MockTransport(handler)


async def read_all(client: GatewayClient) -> None:
    async with client.stream_chat(model="m", messages=[]) as stream:
        async for _ in stream:
            pass


async def failure(transport: httpx.MockTransport) -> BaseException:
    client = GatewayClient("https://gw.example/v1", KEY, transport=transport)
    with pytest.raises((StatusError, InBandError, ProtocolError)) as caught:
        await read_all(client)
    await client.aclose()
    return caught.value


@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (401, "application/json", b'{"error": {"message": "bad key: {auth}", "code": "{auth}"}}'),
        (500, "text/plain", b"request was: Authorization: {auth}"),
        (502, "text/html", b"<pre>Authorization: {auth}</pre>"),
        (200, "text/event-stream", b'data: {"error": {"message": "refused {auth}"}}\n\n'),
        (200, "text/event-stream", b"data: not json {auth}\n\n"),
    ],
)
async def test_a_quoted_key_is_cut_from_every_error(
    status: int, content_type: str, body: bytes
) -> None:
    error = await failure(quoting(status, content_type, body))
    described = repr(error) + str(error) + repr(getattr(error, "info", None))
    described += orjson.dumps(error.info.to_dict()).decode() if hasattr(error, "info") else ""
    assert KEY not in described
    assert f"Bearer {MASK}" in described


async def test_a_quoted_key_is_cut_from_a_refused_reading_aloud() -> None:
    transport = quoting(403, "application/json", b'{"error": {"message": "no: {auth}"}}')
    client = GatewayClient("https://gw.example/v1", KEY, transport=transport)
    with pytest.raises(StatusError) as caught:
        await client.stream_speech(model="tts", input="hi").__aenter__()
    await client.aclose()
    assert str(caught.value) == f"HTTP 403: no: Bearer {MASK}"


def test_a_key_too_short_to_cut_safely_is_left_alone() -> None:
    assert Redactor("abc").text("abc abc") == "abc abc"
    assert Redactor(KEY).text(f"x{KEY}y") == f"x{MASK}y"
