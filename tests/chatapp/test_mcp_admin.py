"""MCP servers in the admin and in Settings → Tools, against the real test MCP server: headers
write-only and encrypted, the listing made on save and on demand, a server that is away said so,
the tool switches, and each server's tools grouped under its name with descriptions escaped."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from django.test import Client
from django.urls import reverse

from chatapp import shared_cache, tools
from chatapp.assistants.models import ChatDefaults
from chatapp.gateways import key_vault
from chatapp.tools.models import McpServer, ToolSwitch
from tests.mcp_server.running import RunningServer, serve

pytestmark = [pytest.mark.django_db(transaction=True)]

ADD = "admin:chatapp_mcpserver_add"
TOKEN = "mcp-bearer-secret-123"


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[RunningServer]:
    with serve() as running:
        yield running


@pytest.fixture
def root(django_user_model: Any) -> Client:
    admin = django_user_model.objects.create_superuser("root", password="x")
    client = Client()
    client.force_login(admin)
    return client


def add(client: Client, url: str, **fields: Any) -> Any:
    form = {
        "name": "Test tools",
        "prefix": "test",
        "url": url,
        "transport": "streamable_http",
        "enabled": "on",
        "bearer_token": TOKEN,
        "headers": "X-Team: blue",
        **fields,
    }
    return client.post(reverse(ADD), form, follow=True)


def test_adding_a_server_stores_its_headers_encrypted_and_lists_its_tools(
    root: Client, mcp_server: RunningServer
) -> None:
    page = add(root, mcp_server.url).text
    server = McpServer.objects.get()
    assert "Test tools: 8 tool(s) listed." in page
    assert TOKEN not in server.headers_encrypted
    stored = orjson.loads(key_vault.decrypt(server.headers_encrypted))
    assert stored == {"X-Team": "blue", "Authorization": f"Bearer {TOKEN}"}
    change = root.get(reverse("admin:chatapp_mcpserver_change", args=[server.pk])).text
    assert TOKEN not in change
    assert "blue" not in change
    assert "stored (encrypted): Authorization, X-Team" in change
    # The description is the server's: escaped, never markup.
    assert "&lt;b&gt;Descriptions are shown escaped.&lt;/b&gt;" in change
    assert "<b>Descriptions are shown escaped.</b>" not in change
    assert "<code>test__lookup</code>" in change


def test_a_new_url_without_headers_clears_them(root: Client, mcp_server: RunningServer) -> None:
    add(root, mcp_server.url)
    server = McpServer.objects.get()
    form = {
        "name": "Test tools",
        "prefix": "test",
        "url": mcp_server.url.replace("127.0.0.1", "localhost"),
        "transport": "streamable_http",
        "enabled": "on",
    }
    url = reverse("admin:chatapp_mcpserver_change", args=[server.pk])
    page = root.post(url, form, follow=True).text
    assert "the stored headers were cleared" in page
    assert McpServer.objects.get().headers_encrypted == ""


@pytest.mark.processes
def test_a_server_that_is_away_is_said_so_in_the_admin(root: Client) -> None:
    with serve() as doomed:
        url = doomed.url
    page = add(root, url).text
    assert "Test tools: its tools are unavailable: it could not be reached" in page
    server = McpServer.objects.get()
    assert "could not be reached" in server.problem
    listing = root.get(reverse("admin:chatapp_mcpserver_changelist")).text
    assert "unavailable: it could not be reached" in listing


def test_refresh_lists_again_on_demand(root: Client, mcp_server: RunningServer) -> None:
    add(root, mcp_server.url)
    server = McpServer.objects.get()
    McpServer.objects.filter(pk=server.pk).update(tools=[], problem="old problem")
    changelist = reverse("admin:chatapp_mcpserver_changelist")
    selected = {"action": "refresh_tools", "_selected_action": [str(server.pk)]}
    page = root.post(changelist, selected, follow=True).text
    assert "Test tools: 8 tool(s) listed." in page
    server.refresh_from_db()
    assert server.problem == ""
    assert len(server.tools) == 8


def test_headers_that_are_not_headers_are_refused(root: Client, mcp_server: RunningServer) -> None:
    page = add(root, mcp_server.url, headers="not a header line").text
    assert "Line 1 is not a header (Name: value)." in page
    page = add(root, mcp_server.url, headers="Host: evil.example").text
    assert "The Host header is the transport&#x27;s own to set." in page
    assert not McpServer.objects.exists()


def test_an_admin_switches_single_mcp_tools_off(root: Client, mcp_server: RunningServer) -> None:
    add(root, mcp_server.url)
    switches = reverse("admin:chatapp_toolswitch_changelist")
    page = root.get(switches).text
    assert "lookup (MCP server Test tools)" in page
    lookup = ToolSwitch.objects.get(name="test__lookup")
    root.post(switches, {"action": "turn_off", "_selected_action": [str(lookup.pk)]})
    names = {tool.name for tool in tools.offered(["test__lookup", "test__slow"], None)}
    assert names == {"test__slow"}


def test_settings_lists_each_server_s_tools_under_its_name(
    root: Client, mcp_server: RunningServer
) -> None:
    add(root, mcp_server.url)
    page = root.get(reverse("chat:defaults")).text
    assert "From the MCP server <strong>Test tools</strong>" in page
    assert 'value="test__lookup"' in page
    assert "&lt;b&gt;Descriptions are shown escaped.&lt;/b&gt;" in page
    root.post(reverse("chat:defaults"), {"tools": ["test__lookup", "calculator"]})
    McpServer.objects.update(problem="it answered HTTP 502")
    page = root.get(reverse("chat:defaults")).text
    assert "Unavailable now: it answered HTTP 502" in page
    # Still chosen while its server is away, and not offered to a model meanwhile.
    assert 'value="test__lookup" id="settings-tools_' in page
    chosen = root.post(reverse("chat:defaults"), {"tools": ["test__lookup"]})
    assert chosen.status_code == 302
    assert ChatDefaults.objects.get().tools == ["test__lookup"]
    assert tools.offered(["test__lookup"], None) == []


def test_a_server_never_reached_is_named_unavailable_in_settings(root: Client) -> None:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        closed_url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    page = add(root, closed_url, name="Never reached", prefix="never").text
    assert "Never reached: its tools are unavailable:" in page
    server = McpServer.objects.get()
    assert server.tools == []
    page = root.get(reverse("chat:defaults")).text
    assert "From the MCP server <strong>Never reached</strong>" in page
    assert f"Unavailable now: {server.problem}" in page.replace("&#x27;", "'")
    assert 'value="never__' not in page  # nothing of it to choose
    # Not saved yet since its address changed: said so too, not missing.
    McpServer.objects.update(problem="", checked_at=None)
    shared_cache.changed()  # as the app's own updates say it (an update sends no signal)
    page = root.get(reverse("chat:defaults")).text
    assert "Unavailable now: it has not been reached yet" in page
