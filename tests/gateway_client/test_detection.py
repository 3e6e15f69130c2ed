"""`detection` tells the gateway behind a base URL from what a real server on loopback answers:
the marker headers on its `/models` (LiteLLM), and the endpoints only one server serves at its
root (vLLM's `/version`, Ollama's `/api/version`, llama.cpp's `/props`). The bodies are the
servers' documented ones, trimmed."""

from __future__ import annotations

import json

import pytest

from gateway_client import GatewayClient
from gateway_client.detection import detect, server_root
from gateway_client.dialects import DIALECTS
from gateway_client.errors import GatewayError
from tests.gateway_client.rawserver import Peer, raw_server

MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]})

# path -> (extra response headers, JSON body); any other path is a 404.
SERVERS: dict[str, dict[str, tuple[str, str]]] = {
    "litellm": {
        "/v1/models": ("x-litellm-version: 1.80.0\r\nx-litellm-call-id: c-1\r\n", MODELS),
    },
    # LiteLLM 1.108's `/models` sends no x-litellm header (as captured); its readiness does.
    "litellm-1.108": {
        "/v1/models": ("", MODELS),
        "/health/readiness/details": (
            "",
            '{"status": "healthy", "db": "Not connected", "litellm_version": "1.108.7"}',
        ),
        "/health/readiness": ("", '{"status": "healthy", "db": "Not connected"}'),
    },
    "vllm": {"/v1/models": ("", MODELS), "/version": ("", '{"version": "0.8.5"}')},
    "ollama": {"/v1/models": ("", MODELS), "/api/version": ("", '{"version": "0.12.3"}')},
    "llamacpp": {
        "/v1/models": ("", MODELS),
        "/props": ("", '{"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}'),
    },
    # Answers every probe, but not as any of them: a JSON 200 without the key, HTML, a 404.
    "unknown": {
        "/v1/models": ("", MODELS),
        "/version": ("", '{"name": "something else"}'),
        "/props": ("", "<html>props</html>"),
    },
}


def serve(routes: dict[str, tuple[str, str]]):  # type: ignore[no-untyped-def]
    async def script(peer: Peer) -> None:
        path = peer.request_head.split(b" ", 2)[1].decode()
        if path not in routes:
            await peer.head("404 Not Found", "application/json")
            await peer.chunk(b'{"detail": "Not Found"}')
        else:
            extra, body = routes[path]
            await peer.head("200 OK", "application/json", extra)
            await peer.chunk(body.encode())
        await peer.end()

    return raw_server(script)


@pytest.mark.parametrize("name", ["litellm", "litellm-1.108", "vllm", "ollama", "llamacpp"])
async def test_each_server_is_told_by_what_it_answers(name: str) -> None:
    async with serve(SERVERS[name]) as (base_url, peers), GatewayClient(base_url, "k") as client:
        found = await detect(client)
    assert found.dialect == name.partition("-")[0]
    assert found.evidence
    # Asked only what it takes to tell: /models, then the probes in table order until one fits.
    probes = [path for facts in DIALECTS.values() for path, _ in facts.probes]
    told_by = next((i for i, path in enumerate(probes) if path in SERVERS[name]), -1)
    assert len(peers) == 1 + told_by + 1


async def test_the_marker_header_is_the_evidence() -> None:
    async with serve(SERVERS["litellm"]) as (base_url, _), GatewayClient(base_url, "k") as client:
        found = await detect(client)
    assert found.evidence == "x-litellm-version: 1.80.0 on its /models answer"


async def test_a_server_that_answers_no_probe_as_expected_stays_unknown() -> None:
    async with (
        serve(SERVERS["unknown"]) as (base_url, peers),
        GatewayClient(base_url, "k") as client,
    ):
        found = await detect(client)
    assert found.dialect is None
    assert found.evidence == "it answered none of the known gateways' probes"
    asked = sorted(peer.request_head.split(b" ", 2)[1].decode() for peer in peers)
    assert asked == [
        "/api/version",
        "/health/readiness",
        "/health/readiness/details",
        "/props",
        "/v1/models",
        "/version",
    ]


async def test_a_probe_left_unanswered_makes_the_detection_inconclusive_not_unknown() -> None:
    """A busy LiteLLM that does not answer its readiness probe in time must not be recorded as
    "none of the known gateways": `detect` raises, and the caller asks again later."""
    routes = SERVERS["litellm-1.108"]

    async def script(peer: Peer) -> None:
        path = peer.request_head.split(b" ", 2)[1].decode()
        if path.startswith("/health/readiness"):
            await peer.wait_closed_by_client()  # never answers
            return
        extra, body = routes.get(path, ("", '{"detail": "Not Found"}'))
        await peer.head("200 OK" if path in routes else "404 Not Found", "application/json", extra)
        await peer.chunk(body.encode())
        await peer.end()

    async with raw_server(script) as (base_url, _), GatewayClient(base_url, "k") as client:
        with pytest.raises(GatewayError, match=r"no answer from .*/health/readiness"):
            await detect(client, probe_seconds=0.2)


async def test_a_url_that_names_the_gateway_needs_no_request() -> None:
    async with GatewayClient("https://openrouter.ai/api/v1", "k") as client:
        found = await detect(client)
    assert (found.dialect, found.evidence) == ("openrouter", "its URL names OpenRouter")


@pytest.mark.parametrize(
    ("base_url", "root"),
    [
        ("http://h:8000/v1", "http://h:8000"),
        ("http://h:8000/v1/", "http://h:8000"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai"),
        ("http://h/proxy/v1", "http://h/proxy"),
        ("http://h:8080", "http://h:8080"),
    ],
)
def test_the_server_root_is_the_base_url_without_its_api_path(base_url: str, root: str) -> None:
    assert server_root(base_url) == root
