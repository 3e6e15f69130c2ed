"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_client.emulator import EmulatorURL

FAULTS = Path(__file__).parent / "faults"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The fault suite is marked `faults` as a whole (`make test-quick` leaves it out)."""
    for item in items:
        if item.path.is_relative_to(FAULTS):
            item.add_marker(pytest.mark.faults)


@pytest.fixture(scope="session")
def emulator_url() -> Iterator[EmulatorURL]:
    """Base URL (no trailing slash) of the gateway emulator, served by a real server on loopback.

    Fast pacing so tests stay quick; scenarios that are slow by design (stall, slow-start) stay so.
    """
    from gateway_client.emulator import serve_in_thread

    with serve_in_thread(tokens_per_second=2000, ttft_ms=5, request_options=True) as url:
        yield url
