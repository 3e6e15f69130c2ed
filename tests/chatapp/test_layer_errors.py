"""Riding out a channel layer whose server is away."""

from __future__ import annotations

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from chatapp import layer_errors


async def test_a_send_is_retried_until_the_layer_is_back() -> None:
    attempts = 0

    async def send() -> None:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise RedisConnectionError("Connection refused")

    assert await layer_errors.send_retrying(send, "a test message")
    assert attempts == 3


async def test_a_send_gives_up_after_retry_for_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(layer_errors, "RETRY_FOR", 0.2)

    async def send() -> None:
        raise OSError("Connection reset by peer")

    assert not await layer_errors.send_retrying(send, "the end of generation 7")
    (record,) = caplog.records
    assert record.getMessage() == (
        "The channel layer is down: the end of generation 7 was not sent (Connection reset by peer)"
    )
    assert record.exc_info is None


async def test_other_errors_are_not_hidden() -> None:
    async def send() -> None:
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        await layer_errors.send_retrying(send, "a message")
