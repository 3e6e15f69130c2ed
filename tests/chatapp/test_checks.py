"""The deploy check that stands in for Django's W001-W003 with our middleware subclasses."""

from __future__ import annotations

from typing import Any

import pytest

from chatapp.checks import required_middleware


def test_our_middleware_passes() -> None:
    assert required_middleware() == []


@pytest.mark.parametrize(
    ("removed", "check_id"),
    [
        ("chatapp.middleware.Security", "chatapp.W001"),
        ("chatapp.middleware.XFrameOptions", "chatapp.W002"),
        ("chatapp.middleware.Csrf", "chatapp.W003"),
    ],
)
def test_a_missing_one_is_named(settings: Any, removed: str, check_id: str) -> None:
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != removed]
    assert [m.id for m in required_middleware()] == [check_id]
