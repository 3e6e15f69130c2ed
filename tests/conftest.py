"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway_client.emulator import EmulatorURL


@pytest.fixture(scope="session")
def emulator_url() -> Iterator[EmulatorURL]:
    """Base URL (no trailing slash) of the gateway emulator, served by a real server on loopback.

    Fast pacing so tests stay quick; scenarios that are slow by design (stall, slow-start) stay so.
    """
    from gateway_client.emulator import serve_in_thread

    with serve_in_thread(tokens_per_second=2000, ttft_ms=5, request_options=True) as url:
        yield url
