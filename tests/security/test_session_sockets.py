"""An open socket ends with its session, over a real Daphne server and real websockets.

Signing out (from another tab of the same browser), a password change and a deactivation in the
admin each close the user's sockets (4401) while they are open and idle; another browser's
session of the same user outlives a sign-out elsewhere. A change that no signal announces (a
bulk update, as a script would make) is caught by the next `watch`, which is refused.

The servers are this module's own (its users are signed out and changed here): two Daphne
processes on one database and a private Redis, the sockets on one (B) and every change made
through the other (A), so each close crosses processes as it must in production.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from chatapp.ws.session_sockets import CLOSE_SIGNED_OUT
from deploy.services import redis_server
from tests.multiprocess.servers import ROOT, Server, Socket, User, sign_in, start_server

from .conftest import websocket

PASSWORD = "session-sockets-password"
USERS = ("carol", "dave", "erin", "frank")


@dataclass(frozen=True)
class Servers:
    a: Server  # where the user signs out, and the admin changes the user
    b: Server  # where the sockets are
    database: Path


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    directory = tmp_path_factory.mktemp("session-sockets")
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "CHAT_"))}
    with redis_server() as redis_url:
        env = {
            **inherited,
            "DJANGO_SETTINGS_MODULE": "chatapp.settings",
            "DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
            "REDIS_URL": redis_url,
            "DJANGO_SECRET_KEY": "session-sockets-tests-only",
            "CHAT_TITLES": "0",  # no title generations in the ledgers the tests read
            "DJANGO_DEBUG": "0",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
        }
        a, b = start_server("A", env, directory), start_server("B", env, directory)
        try:
            script = (
                "from django.contrib.auth import get_user_model\n"
                "from django.core.management import call_command\n"
                "call_command('migrate', interactive=False, verbosity=0)\n"
                f"get_user_model().objects.create_superuser('root', '', {PASSWORD!r})\n"
                + "".join(
                    f"get_user_model().objects.create_user({name!r}, password={PASSWORD!r})\n"
                    for name in USERS
                )
            )
            subprocess.run(
                [sys.executable, str(ROOT / "manage.py"), "shell", "--no-imports", "-c", script],
                env=env, cwd=ROOT, check=True, stdin=subprocess.DEVNULL, timeout=120,
            )  # fmt: skip
            a.wait_ready()
            b.wait_ready()
            yield Servers(a, b, directory / "db.sqlite3")
        finally:
            a.stop()
            b.stop()


@pytest.fixture
def root(servers: Servers) -> User:
    """The superuser, signed in afresh: the admin's password change cycles its session key."""
    return User(sign_in(servers.a, "root", PASSWORD), database_url="")


def browser(server: Server, name: str) -> User:
    """A new sign-in: a browser of its own (its own session)."""
    return User(sign_in(server, name, PASSWORD), database_url="")


async def is_open(socket: Socket) -> bool:
    await socket.send({"t": "watch", "c": 999999})
    return await socket.next(10) == {"t": "gone", "c": 999999}


async def closed_with(socket: Socket) -> int | None:
    async with asyncio.timeout(10):
        await socket.connection.wait_closed()
    return socket.connection.close_code


async def user_pk(server: Server, root: User, name: str) -> int:
    page = await root.get(server, f"/admin/auth/user/?q={name}")
    found = re.search(r'href="/admin/auth/user/(\d+)/change/[^"]*">' + name + "<", page.text)
    assert found is not None, page.text[:2000]
    return int(found[1])


class FormFields(HTMLParser):
    """The values a browser would submit from the page's `user_form`."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[tuple[str, str]] = []
        self._in_form = False
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._in_form = a.get("id") == "user_form"
        if not self._in_form or ("name" not in a and tag != "option"):
            return
        if tag == "input" and a.get("type") not in ("submit", "button"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            checkable = a.get("type") in ("checkbox", "radio")
            self.fields.append((a["name"], a.get("value", "on" if checkable else "")))
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select is not None and "selected" in a:
            self.fields.append((self._select, a.get("value", "")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "form":
            self._in_form = False


async def test_signing_out_in_another_tab_closes_the_socket(servers: Servers) -> None:
    tab, other_browser = browser(servers.a, "carol"), browser(servers.a, "carol")
    async with (
        websocket(servers.b, tab) as socket,
        websocket(servers.b, other_browser) as other,
    ):
        assert await is_open(socket)
        assert await is_open(other)
        response = await tab.post(servers.a, "/accounts/logout/")
        assert response.status_code == 302
        assert await closed_with(socket) == CLOSE_SIGNED_OUT
        # The same user's session in another browser was not signed out: its socket stays.
        assert await is_open(other)


async def test_a_password_change_in_the_admin_closes_the_socket(
    servers: Servers, root: User
) -> None:
    dave = browser(servers.a, "dave")
    pk = await user_pk(servers.a, root, "dave")
    async with websocket(servers.b, dave) as socket:
        assert await is_open(socket)
        new = "a new session-sockets password"
        response = await root.post(
            servers.a,
            f"/admin/auth/user/{pk}/password/",
            {"password1": new, "password2": new, "usable_password": "true"},
        )
        assert response.status_code == 302, response.text[:1000]
        assert await closed_with(socket) == CLOSE_SIGNED_OUT
    # The control: dave's new password signs in, and that session's socket stays open.
    async with websocket(servers.b, User(sign_in(servers.a, "dave", new), "")) as socket:
        assert await is_open(socket)


async def test_deactivating_the_user_in_the_admin_closes_the_socket(
    servers: Servers, root: User
) -> None:
    erin = browser(servers.a, "erin")
    pk = await user_pk(servers.a, root, "erin")
    async with websocket(servers.b, erin) as socket:
        assert await is_open(socket)
        page = await root.get(servers.a, f"/admin/auth/user/{pk}/change/")
        form = FormFields()
        form.feed(page.text)
        fields = [(k, v) for k, v in form.fields if k != "is_active"]
        assert ("username", "erin") in fields
        async with root.http(servers.a) as http:
            response = await http.post(f"/admin/auth/user/{pk}/change/", data=dict(fields))
        assert response.status_code == 302, re.findall(r"errorlist.{0,300}", response.text)
        assert await closed_with(socket) == CLOSE_SIGNED_OUT


async def test_a_watch_after_the_session_ended_unannounced_is_refused(servers: Servers) -> None:
    frank = browser(servers.a, "frank")
    async with websocket(servers.b, frank) as socket:
        assert await is_open(socket)
        # No signal, no message: as a bulk update from a script (or a lost message) would be.
        with sqlite3.connect(servers.database) as db:
            db.execute("UPDATE auth_user SET is_active = 0 WHERE username = 'frank'")
        await socket.send({"t": "watch", "c": 999999})
        with pytest.raises(ConnectionClosed):
            await socket.next(10)  # no answer to the watch: the socket is closed instead
        assert socket.connection.close_code == CLOSE_SIGNED_OUT
