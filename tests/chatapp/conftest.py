"""Fixtures for the chat app: a user, the emulator as the gateway, a fresh channel layer.

Worker and consumer tests use `transaction=True` databases: the worker writes from asgiref's
database thread, which cannot see a test transaction that is never committed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.test import AsyncClient

from chatapp.conversations.turns import Answerer, StartedGeneration, TurnRequest, create_turn
from chatapp.messaging import socket_messages
from chatapp.streaming import worker
from gateway_client.emulator import EmulatorRecord, EmulatorURL
from tests.django_fixtures import (  # noqa: F401 (used by name: pytest finds fixtures here)
    closed_clients,
    fresh_channel_layer,
    fresh_gateways,
)
from tests.waiting import eventually


@pytest.fixture(autouse=True)
def chat_settings(settings: Any, emulator_url: str) -> Any:
    settings.LLM_BASE_URL = f"{emulator_url}/numes/api/v1"
    settings.LLM_API_KEY = "test-key"
    settings.LLM_TIMEOUTS = {"idle": 1.0, "first_token": 5.0}
    settings.CHAT_SWEEP_INTERVAL = 0
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "chatapp.patches.channel_layer.LocalChannelLayer"}
    }
    # Deliberately slow in production; irrelevant to what these tests check.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return settings


@pytest.fixture
def password() -> str:
    return "correct horse battery staple"


@pytest.fixture
def alice(django_user_model: Any, password: str) -> Any:
    return django_user_model.objects.create_user("alice", password=password)


@pytest.fixture
def bob(django_user_model: Any, password: str) -> Any:
    return django_user_model.objects.create_user("bob", password=password)


def asked(
    text: str, model: str, conversation_pk: int | None = None, *, after: int | None = None
) -> TurnRequest:
    """A turn's request with `text` for `model` on the default gateway."""
    return TurnRequest(
        text=text, answerer=Answerer(model=model), conversation_pk=conversation_pk, after=after
    )


async def start_turn(
    user: Any, text: str, model: str, conversation_pk: int | None = None
) -> StartedGeneration:
    owner = await worker.owner_channel()
    return await sync_to_async(create_turn)(user, asked(text, model, conversation_pk), owner)


class UpstreamLog:
    """The emulator's records of the requests made since this log was opened. The emulator is
    the session's, so older records are other tests'."""

    def __init__(self, emulator_url: EmulatorURL) -> None:
        self.records = emulator_url.app.records
        self._before = {record.id for record in self.records.all()}

    def new(self, **match: Any) -> list[EmulatorRecord]:
        """New records whose attributes equal `match` (e.g. `scenario="long"`), oldest first."""
        return [
            record
            for record in self.records.all()
            if record.id not in self._before
            and all(getattr(record, key) == value for key, value in match.items())
        ]

    async def one(self, **match: Any) -> EmulatorRecord:
        """The one new record matching `match`, once the emulator has taken the request."""
        (record,) = await eventually(lambda: self.new(**match), what=f"a request ({match})")
        return record

    async def finished(self, record: EmulatorRecord, within: float = 5.0) -> EmulatorRecord:
        """`record` once its stream has ended (without waiting out the finalisation window)."""
        return await asyncio.to_thread(self.records.wait_finished, record.id, within)

    async def settled(self, key: str, within: float = 5.0) -> EmulatorRecord:
        """The record `key` (generation or request ID) once it shows its final outcome."""
        return await asyncio.to_thread(self.records.wait_settled, key, within)


@pytest.fixture
def upstream(emulator_url: EmulatorURL) -> UpstreamLog:
    return UpstreamLog(emulator_url)


class GroupListener:
    """Joins a conversation's group as a browser would and decodes what arrives."""

    def __init__(self, conversation_pk: int) -> None:
        self.layer = get_channel_layer()
        self.group = socket_messages.group_name(conversation_pk)
        self.channel = ""
        self.received: list[dict[str, Any]] = []
        self.frames = 0  # channel-layer messages, each one websocket frame
        self.frame_sizes: list[int] = []  # each frame's bytes, as a socket sends it
        self._unread: list[dict[str, Any]] = []  # the rest of a frame of several deltas

    async def join(self) -> GroupListener:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)
        return self

    async def next(self) -> dict[str, Any]:
        # Bounds a hang, not a speed: `done` follows the final render, and a cold render process
        # took over 10 s to start while parallel test workers shared two cores.
        if not self._unread:
            async with asyncio.timeout(30):
                message = await self.layer.receive(self.channel)
            self.frames += 1
            self.frame_sizes.append(len(message["text"].encode()))
            self._unread = socket_messages.decode_frame(message["text"])
        payload = self._unread.pop(0)
        self.received.append(payload)
        return payload

    async def until(self, kind: str, within: float = 15.0) -> dict[str, Any]:
        async with asyncio.timeout(within):
            while True:
                payload = await self.next()
                if payload["t"] == kind:
                    return payload

    def deltas(self) -> list[dict[str, Any]]:
        return [m for m in self.received if m["t"] == "delta"]


@pytest.fixture
def user_model() -> Any:
    return get_user_model()


async def logged_in(user: Any) -> AsyncClient:
    """A test client signed in as `user`."""
    client = AsyncClient()
    await client.aforce_login(user)
    return client
