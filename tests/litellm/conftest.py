"""A real LiteLLM proxy on loopback in front of the built-in emulator, and the app pointed at it.

LiteLLM lives in a virtualenv of its own (`make litellm`, a prerequisite of `make test`): its
pins clash with the app's. Its tests skip only when that virtualenv could not be installed
because the package index was unreachable (the target leaves a note saying so), or when it was
never made.

The proxy routes `emulator/<scenario>` to the emulator's Osmexo dialect: Osmexo's usage chunk
carries no `cost` of its own (LiteLLM passes an upstream's `usage.cost` through unchanged, so
behind Numes the cost would be the emulator's, not LiteLLM's), its reasoning field is LiteLLM's
(`reasoning_content`), and it answers `emulator/error-before` with a 503 that LiteLLM retries.
Between the app and the proxy a recording TCP proxy keeps every reply's bytes, so a test reads
what LiteLLM sent the app (its headers, its usage chunk) rather than what it might have sent.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async

from chatapp.gateways import configs, key_vault
from chatapp.gateways.models import Gateway
from deploy.processes import stop
from gateway_client.emulator import EmulatorURL, serve_in_thread
from tests.chatapp.conftest import (  # noqa: F401 (fixtures)
    alice,
    chat_settings,
    password,
)
from tests.django_fixtures import (  # noqa: F401 (used by name: pytest finds fixtures here)
    closed_clients,
    fresh_channel_layer,
    fresh_gateways,
)
from tests.faults.fault_proxy import Connection, FaultProxy, Forward
from tests.waiting import poll

from .http_log import Exchange, exchanges

ROOT = Path(__file__).resolve().parents[2]
LITELLM_VENV = ROOT / ".venv-litellm"
LITELLM = LITELLM_VENV / "bin" / "litellm"
UNREACHABLE = LITELLM_VENV / ".unreachable"
MASTER_KEY = "sk-litellm-test-master"
PRICES = {"input_cost_per_token": 2e-06, "output_cost_per_token": 8e-06}
"""US dollars per token, for every route: LiteLLM's price list for these models."""
NUM_RETRIES = 2
"""LiteLLM's router retries, as a proxy commonly runs (its docs' examples; 3 attempts in all)."""
SCENARIOS = ("chat", "long", "reasoning", "echo", "error-before")
STARTUP_S = 120.0  # about 17 s on an idle two-core machine; much longer while others run


def litellm_or_skip() -> Path:
    if UNREACHABLE.exists():
        pytest.skip(f"LiteLLM is not installed: {UNREACHABLE.read_text().strip()}")
    if not any(LITELLM_VENV.glob(".installed-*")) or not LITELLM.exists():
        pytest.skip(f"LiteLLM is not installed in {LITELLM_VENV} (make litellm)")
    return LITELLM


@dataclass
class UpstreamRequest:
    """One chat request the emulator received from LiteLLM, and when its reply was sent."""

    body: dict[str, Any]
    answered_at: float = 0.0


@dataclass
class Upstream:
    """The emulator behind LiteLLM, with every chat request it receives."""

    url: EmulatorURL
    requests: list[UpstreamRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def asked(self, text: str) -> list[UpstreamRequest]:
        """The requests whose last message is `text` (each test asks something of its own)."""
        with self.lock:
            return [r for r in self.requests if _last_text(r.body) == text]


def _last_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content")
    return content if isinstance(content, str) else ""


@pytest.fixture(scope="module")
def litellm_upstream() -> Iterator[Upstream]:
    with serve_in_thread(tokens_per_second=400, ttft_ms=5, request_options=True) as url:
        upstream = Upstream(url)
        handle = url.app._handle

        async def recording(
            dialect: Any, route: str, channel: Any, body: bytes, query: str
        ) -> None:
            request = None
            if route == "chat/completions":
                request = UpstreamRequest(json.loads(body))
                with upstream.lock:
                    upstream.requests.append(request)
            try:
                await handle(dialect, route, channel, body, query)
            finally:
                if request is not None:
                    request.answered_at = time.time()

        url.app._handle = recording  # type: ignore[method-assign]
        yield upstream


def litellm_config(emulator: str) -> dict[str, Any]:
    routes = [
        {
            "model_name": f"emulator/{scenario}",
            "litellm_params": {
                "model": f"openai/emulator/{scenario}",
                "api_base": f"{emulator}/osmexo/v1",
                "api_key": "emulator-key",
                **PRICES,
            },
        }
        for scenario in SCENARIOS
    ]
    return {
        "model_list": routes,
        "router_settings": {"num_retries": NUM_RETRIES},
        "general_settings": {"master_key": MASTER_KEY},
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Proxy:
    url: str
    log: Path

    def get(self, path: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {MASTER_KEY}"}
        return httpx.get(f"{self.url}{path}", headers=headers, timeout=30)


def _alive(url: str, process: subprocess.Popen[bytes], log: Path) -> bool:
    if process.poll() is not None:
        raise AssertionError(f"litellm exited ({process.returncode}):\n{log.read_text()[-4000:]}")
    try:
        return httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture(scope="module")
def litellm_proxy(
    litellm_upstream: Upstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proxy]:
    """`litellm --config ...` on a free loopback port, ready (its liveliness probe answers)."""
    executable = litellm_or_skip()
    directory = tmp_path_factory.mktemp("litellm")
    config = directory / "config.yaml"
    config.write_text(json.dumps(litellm_config(litellm_upstream.url), indent=2))  # YAML ⊃ JSON
    log = directory / "litellm.log"
    port = _free_port()
    env = {
        **os.environ,
        # The price map shipped in the package, not the one LiteLLM would fetch from GitHub.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
    }
    env.pop("DATABASE_URL", None)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(executable), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=directory,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        poll(lambda: _alive(url, process, log), what="LiteLLM to start", within=STARTUP_S)
        yield Proxy(url, log)
    finally:
        stop(process)


class RecordingProxy(FaultProxy):
    """Forwards every connection unchanged and keeps the reply bytes with when they were sent."""

    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__(target, lambda _n: Forward())
        self.replies: dict[int, list[tuple[float, bytes]]] = {}

    async def _send(self, writer: Any, data: bytes, conn: Connection) -> None:
        await super()._send(writer, data, conn)
        if data:
            self.replies.setdefault(id(conn), []).append((time.time(), data))

    def exchanges(self) -> list[Exchange]:
        """Every request and its reply so far, in the order the connections were opened."""
        found: list[Exchange] = []
        for conn in self.connections:
            found += exchanges(bytes(conn.request), self.replies.get(id(conn), []))
        return found


@pytest.fixture(autouse=True)
def litellm_deadlines(request: pytest.FixtureRequest, settings: Any) -> None:
    """The app's deadlines here are a proxy's: LiteLLM's three attempts at a failing route take
    about 5 s before it answers, past the 5 s first-token deadline the app's own tests use."""
    request.getfixturevalue("chat_settings")  # set first, then overridden here
    settings.LLM_TIMEOUTS = {"idle": 5.0, "first_token": 60.0}


@pytest.fixture
async def recorder(litellm_proxy: Proxy) -> AsyncIterator[RecordingProxy]:
    port = int(litellm_proxy.url.rsplit(":", 1)[1])
    proxy = RecordingProxy(("127.0.0.1", port))
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


@pytest.fixture
async def litellm_gateway(recorder: RecordingProxy) -> Gateway:
    """The app's gateway row for the proxy, as the README's table says to set one up: its `/v1`
    URL, a virtual key (the master key here), dialect LiteLLM, US dollars (the admin requires a
    unit; LiteLLM's `usage.cost` is in dollars)."""
    row = await Gateway.objects.acreate(
        name="LiteLLM",
        base_url=f"{recorder.url}/v1",
        dialect="litellm",
        cost_unit="usd",
        api_key_encrypted=await sync_to_async(key_vault.encrypt)(MASTER_KEY),
    )
    configs.forget_configs()
    return row
