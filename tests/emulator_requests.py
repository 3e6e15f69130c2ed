"""What an in-process emulator is asked: the chat request bodies it receives, for tests that
assert what the gateway got (its `messages`, `model`, `max_tokens`, ...)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway_client.emulator.app import EmulatorApp


def record_chat_bodies(app: EmulatorApp, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The bodies of the chat requests `app` receives from now on (until the test ends), parsed."""
    handle = app._handle
    bodies: list[dict[str, Any]] = []

    async def recording(dialect: Any, route: str, channel: Any, body: bytes, query: str) -> None:
        if route == "chat/completions":
            bodies.append(json.loads(body))
        await handle(dialect, route, channel, body, query)

    monkeypatch.setattr(app, "_handle", recording)
    return bodies
