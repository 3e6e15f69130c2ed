"""`GET /models` read as untrusted input (`gateway_client.model_list`): typed, entry by entry,
depth-bounded, and read over a real socket only up to its cap."""

from __future__ import annotations

import gzip
import tracemalloc

import pytest

from gateway_client import GatewayClient
from gateway_client.errors import GatewayError, ProtocolError
from gateway_client.model_list import MAX_MODELS_BYTES, ModelInfo, TooLarge, parse_models
from tests.gateway_client.rawserver import Peer, raw_server


def test_a_listing_reads_its_ids_names_prices_and_outputs() -> None:
    body = (
        b'{"object": "list", "data": [{"id": "b", "name": "Bee", "description": "d",'
        b' "pricing": {"prompt": "0.000001", "completion": 2e-06},'
        b' "architecture": {"output_modalities": ["IMAGE", "text"]}, "extra": {"x": [1]}},'
        b' {"id": "a"}]}'
    )
    assert parse_models(body) == [
        ModelInfo("b", "Bee", "d", "0.000001", "2e-06", ("image", "text")),
        ModelInfo("a"),
    ]


def test_bad_entries_are_skipped_and_bad_fields_dropped() -> None:
    body = (
        b'{"data": [{"id": 5}, {"id": null}, {"id": ""}, {"id": ["x"]}, 7, "m", null,'
        b' {"id": "kept", "pricing": {"prompt": true}, "architecture": 3, "name": 9}]}'
    )
    assert parse_models(body) == [ModelInfo("kept")]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"[]", 'not {"data": [...]}: Expected `object`, got `array`'),
        (b'{"data": 5}', 'not {"data": [...]}: Expected `array`, got `int`'),
        (b'{"models": []}', 'not {"data": [...]}: Object missing required field `data`'),
        (b"<html>", "not JSON"),
        (b'{"data": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "nested too deeply"),
        (
            b'{"data": [{"id": "a", "x": ' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001 + b"]}",
            "nested too deeply",
        ),
    ],
)
def test_anything_else_is_a_protocol_error(body: bytes, said: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_models(body)
    assert said in str(caught.value)


async def test_a_huge_listing_is_read_only_up_to_the_cap() -> None:
    sent: list[int] = []

    async def huge(peer: Peer) -> None:
        await peer.head(content_type="application/json")
        await peer.chunk(b'{"data": [{"id": "a", "pad": "')
        sent.append(0)
        for _ in range(300 * 16):  # 300 MB, a write at a time, until the client hangs up
            await peer.chunk(b"x" * 65536)
            sent[0] += 65536

    async with raw_server(huge) as (url, _), GatewayClient(url, "k") as client:
        with pytest.raises(TooLarge, match="larger than 4 MiB"):
            await client.list_models()
    assert sent[0] < MAX_MODELS_BYTES + 32 * 1024 * 1024  # the cap and the socket's buffers


BOMB = gzip.compress(b"0" * (64 << 20), compresslevel=9)  # 64 MiB in about 64 KiB


@pytest.mark.parametrize("status", ["200 OK", "500 Internal Server Error"])
async def test_a_compressed_listing_is_asked_against_and_never_expanded(status: str) -> None:
    async def bomb(peer: Peer) -> None:
        await peer.head(status, "application/json", extra="Content-Encoding: gzip\r\n")
        await peer.chunk(BOMB)
        await peer.end()

    tracemalloc.start()
    try:
        async with raw_server(bomb) as (url, peers), GatewayClient(url, "k") as client:
            with pytest.raises(GatewayError):
                await client.list_models()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # the 64 MiB it would expand to was never made
    assert b"accept-encoding: identity" in peers[0].request_head.lower()
