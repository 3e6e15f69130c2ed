"""Riding out a channel layer whose server is away."""

from __future__ import annotations

import asyncio

import pytest
from channels_redis.core import RedisChannelLayer
from redis.exceptions import ConnectionError as RedisConnectionError

from chatapp.messaging import layer_errors


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


async def test_a_layer_background_task_failing_in_an_outage_is_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """channels_redis's own unawaited cleanup task, failing as Redis goes: a warning, no
    traceback. Another task's failure is left to the handler there was."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, object]] = []
    loop.set_exception_handler(lambda loop, context: seen.append(context))
    try:
        layer_errors.quiet_background_failures(loop)
        layer_errors.quiet_background_failures(loop)  # once per loop
        layer = RedisChannelLayer(hosts=["redis://127.0.0.1:9"])
        layer_task = loop.create_task(layer._clean_receive_backup(0, "specific.x!y"))
        other = loop.create_task(asyncio.sleep(0))
        await asyncio.wait([layer_task, other])
        assert isinstance(layer_task.exception(), OSError | RedisConnectionError)  # retrieved here
        error = RedisConnectionError("Connection closed by server.")
        for task in (layer_task, other):
            loop.call_exception_handler(
                {
                    "message": "Task exception was never retrieved",
                    "exception": error,
                    "future": task,
                }
            )
    finally:
        loop.set_exception_handler(None)
    assert "The channel layer is down: a background task failed" in caplog.text
    assert "Traceback" not in caplog.text
    assert [context["future"] for context in seen] == [other]
