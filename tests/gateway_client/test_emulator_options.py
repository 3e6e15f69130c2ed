"""Who sets the emulator's knobs: whoever starts it, and a request only in the test mode that
allows it (`request_options`); and how far even that mode lets a knob go."""

from __future__ import annotations

from typing import Any

import httpx

from gateway_client.emulator import Options, create_app
from tests.gateway_client.test_emulator import AUTH, BASES, chat_body, http


async def _long_answer(app: Any, model: str, query: str = "") -> str:
    """The buffered (`stream: false`) content the app answers `model` with (`query`: the
    URL's)."""
    body = chat_body("long", stream=False) | {"model": model}
    async with http(transport=httpx.ASGITransport(app=app), base_url="http://emulator") as client:
        reply = await client.post(
            f"{BASES['numes']}/chat/completions{query}", json=body, headers=AUTH
        )
    assert reply.status_code == 200, reply.text
    return str(reply.json()["choices"][0]["message"]["content"])


async def test_a_request_cannot_set_a_knob_by_default() -> None:
    app = create_app(tokens_per_second=0, ttft_ms=0, long_tokens=40)
    configured = await _long_answer(app, "emulator/long")
    asked = await _long_answer(app, "emulator/long?long_tokens=5000")
    queried = await _long_answer(app, "emulator/long", "?long_tokens=5000")
    assert len(asked) == len(configured) == len(queried)
    assert len(configured) < 1_000  # about 40 tokens, as configured


async def test_the_test_mode_lets_a_request_set_them() -> None:
    app = create_app(tokens_per_second=0, ttft_ms=0, long_tokens=40, request_options=True)
    configured = await _long_answer(app, "emulator/long")
    asked = await _long_answer(app, "emulator/long?long_tokens=2000")
    assert len(asked) > 10 * len(configured)


def test_even_then_counts_and_times_are_bounded() -> None:
    options = Options().with_overrides(
        "long_tokens=1000000&rounds=1000000&slow_start_s=1e9&finalize_delay_ms=1e12"
    )
    assert options.long_tokens == 50_000  # was 10,000,000: a 1.9 MB answer from 1,000,000
    assert options.rounds == 1_000
    assert options.slow_start_s == 600.0
    assert options.finalize_delay_ms == 600_000.0
