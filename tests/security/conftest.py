"""The security suite's fixtures: a hostile scripted gateway, a distinctive API key, and one real
Daphne server for the session (started as `make run` starts it) whose log is kept for grepping.

In-process tests use the chat app's fixtures (users, a fresh channel layer and gateway cache;
`closed_clients` where they reach the gateway), with the scripted gateway as the default gateway
and the canary key as its key; every test starts with an empty cache, so one test's failed
sign-ins do not lock out the next.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from websockets.asyncio.client import connect
from websockets.typing import Origin

from chatapp.gateways import clients
from tests.chatapp.conftest import (  # noqa: F401 (fixtures)
    alice,
    bob,
    fresh_channel_layer,
    fresh_gateways,
    password,
)
from tests.multiprocess.servers import ROOT, Server, Socket, User, sign_in, start_server

from .scripted_gateway import ScriptedGateway, serve_in_thread

# Distinctive, so that a grep for it finds every copy: in a page, a frame, a log line.
CANARY_KEY = "sk-canary-7e1f0c9d4b2a-never-shown"
PASSWORD = "security-suite-password"
USERS = ("victim", "mallory")


@pytest.fixture
async def closed_clients() -> AsyncIterator[None]:
    """The test loop's shared gateway clients are closed with it. Not autouse (unlike the chat
    app's): the browser tests run no event loop of pytest's."""
    yield
    await clients.close_clients()


@pytest.fixture(scope="session")
def scripted_gateway() -> Iterator[ScriptedGateway]:
    with serve_in_thread() as gateway:
        yield gateway


@pytest.fixture(autouse=True)
def security_settings(settings: Any, scripted_gateway: ScriptedGateway) -> Iterator[Any]:
    settings.LLM_BASE_URL = scripted_gateway.base_url
    settings.LLM_API_KEY = CANARY_KEY
    settings.LLM_DIALECT = None
    settings.LLM_TIMEOUTS = {"idle": 2.0, "first_token": 5.0}
    settings.CHAT_SWEEP_INTERVAL = 0
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "chatapp.patches.channel_layer.LocalChannelLayer"}
    }
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    cache.clear()
    yield settings
    cache.clear()


def _prepare(env: dict[str, str]) -> None:
    """Migrate and add the users, in one Django start."""
    script = (
        "from django.contrib.auth import get_user_model\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', interactive=False, verbosity=0)\n"
        + "".join(
            f"get_user_model().objects.create_user({name!r}, password={PASSWORD!r})\n"
            for name in USERS
        )
    )
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "--no-imports", "-c", script],
        env=env,
        cwd=ROOT,
        check=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


@pytest.fixture(scope="session")
def server(
    tmp_path_factory: pytest.TempPathFactory, scripted_gateway: ScriptedGateway
) -> Iterator[Server]:
    """Daphne on the scripted gateway with the canary key; `server.log_text()` is its output."""
    directory = tmp_path_factory.mktemp("security-server")
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "CHAT_"))}
    inherited.pop("REDIS_URL", None)
    env = {
        **inherited,
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
        "DJANGO_SECRET_KEY": "security-tests-only",
        "DJANGO_DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "LLM_BASE_URL": scripted_gateway.base_url,
        "LLM_API_KEY": CANARY_KEY,
        "LLM_IDLE_TIMEOUT": "2",
        "CHAT_LOG_LEVEL": "DEBUG",
        "PYTHONUNBUFFERED": "1",
    }
    _prepare(env)
    process = start_server("security", env, Path(directory))
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def victim(server: Server) -> User:
    return User(sign_in(server, "victim", PASSWORD), database_url="")


@pytest.fixture(scope="session")
def mallory(server: Server) -> User:
    return User(sign_in(server, "mallory", PASSWORD), database_url="")


@asynccontextmanager
async def websocket(
    server: Server, user: User | None, *, origin: str | None = None
) -> AsyncIterator[Socket]:
    """The page's socket on `server`, signed in as `user` (None: anonymous), from the page's
    origin unless `origin` says another."""
    cookie = "" if user is None else "; ".join(f"{k}={v}" for k, v in user.cookies.items())
    async with connect(
        f"ws://127.0.0.1:{server.port}/ws/chat/",
        origin=Origin(origin or server.url),
        additional_headers={"Cookie": cookie} if cookie else {},
        open_timeout=10,
        compression=None,  # raw frames: the sizes the server sees are the sizes sent
    ) as connection:
        yield Socket(connection)


async def running_generation(server: Server, user: User, model: str = "slow") -> tuple[int, int]:
    """A new conversation of `user`'s with an answer streaming: (conversation, generation)."""
    conversation = await user.new_conversation(server, "my secret question", model)
    async with websocket(server, user) as socket:
        await socket.send({"t": "watch", "c": conversation})
        while True:
            message = await socket.next(10)
            if message["t"] in ("snapshot", "delta"):
                return conversation, int(message["g"])
