"""Tools from an MCP server in real Chromium, against the real test MCP server (its SDK's server
side, over Streamable HTTP on loopback): an admin adds the server in the admin, a user ticks its
tools in Settings → Tools, the model (the emulator's `tools` scenario) calls one, and the pane
shows the call and its result, which the answer uses. Stop during the slow tool cancels it on
the server; the failing tool's error reaches the model; a server killed mid-call leaves a clear
error and nothing hung.

With `CHAT_SCREENSHOTS` set to a directory, Settings → Tools and the pane are saved there.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.mcp_server.running import RunningServer, serve
from tests.waiting import poll

from .conftest import manage_shell, screenshots, send

pytestmark = [pytest.mark.browser]

TOKEN = "mcp-browser-bearer-secret"


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[RunningServer]:
    with serve() as running:
        yield running


@pytest.fixture
def cleaned(server_env: dict[str, str]) -> Iterator[None]:
    """The modules after this one see no MCP server, switch or chosen MCP tool."""
    yield
    manage_shell(
        server_env,
        "from chatapp.assistants.models import ChatDefaults; "
        "from chatapp.tools.models import McpServer; from chatapp.tools.models import ToolSwitch; "
        "McpServer.objects.all().delete(); "
        "ToolSwitch.objects.filter(name__contains='__').delete(); "
        "ChatDefaults.objects.all().delete()",
    )


def origin(page: Any) -> str:
    return "/".join(page.url.split("/")[:3])


def add_server(page: Any, name: str, prefix: str, url: str) -> None:
    """An admin adds the server in the admin, as a person does."""
    page.goto(origin(page) + "/admin/")
    page.get_by_role("link", name="MCP servers").first.click()
    page.get_by_role("link", name=re.compile("Add MCP server")).click()
    page.get_by_label("Name:").fill(name)
    page.get_by_label("Prefix:").fill(prefix)
    page.get_by_label("URL:").fill(url)
    page.get_by_label("Bearer token:").fill(TOKEN)
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist")).to_contain_text(f"{name}: 8 tool(s) listed.")


def tick_tools(page: Any, *titles: str) -> None:
    """The user ticks `titles` in Settings → Tools (their defaults for new chats)."""
    page.goto(origin(page) + "/settings/")
    tools = page.get_by_role("group", name="Tools")
    for title in titles:
        tools.get_by_role("checkbox", name=re.compile(f"^{title} ")).check()
    page.get_by_role("button", name=re.compile("^Save")).click()
    expect(page.locator(".settings-saved")).to_contain_text("Saved.")
    page.goto(origin(page) + "/")


def pane_call(answer: Any) -> Any:
    call = answer.get_by_role("region", name="Tool calls").locator(".tool-call")
    expect(call).to_have_count(1)
    return call


@pytest.mark.paced
def test_an_admin_adds_a_server_a_user_ticks_its_tool_and_the_model_calls_it(
    alice: Any, mcp_server: RunningServer, cleaned: None
) -> None:
    add_server(alice, "Test tools", "test", mcp_server.url)
    expect(alice.locator("body")).not_to_contain_text(TOKEN)
    # Settings → Tools: the server's tools under its name, their descriptions as text.
    alice.goto(origin(alice) + "/settings/")
    group = alice.get_by_role("group", name="Tools of the MCP server Test tools")
    expect(group).to_contain_text("<b>Descriptions are shown escaped.</b>")
    expect(group.locator("b")).to_have_count(0)
    screenshots(alice, "mcp-settings-tools", lambda page: group.scroll_into_view_if_needed())
    tick_tools(alice, "lookup", "slow", "fail", "picture")
    answer = send(alice, "Please use test__lookup on trams", "emulator/tools")
    call = pane_call(answer)
    expect(call.locator(".tool-name")).to_have_text("test__lookup")
    expect(call.locator(".tool-status")).to_have_text(re.compile(r"^done · [\d,]+ ms$"))
    call.locator(".tool-result summary").click()
    expect(call.locator(".tool-result pre")).to_contain_text("lookup-result-42")
    final = alice.locator("article.assistant").last
    expect(final).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(final.locator(".content")).to_contain_text("lookup-result-42")
    screenshots(alice, "mcp-tool-call")

    # An image the tool returned is shown with the answer, checked and served from our origin.
    alice.goto(origin(alice) + "/")
    answer = send(alice, "use test__picture", "emulator/tools")
    expect(pane_call(answer).locator(".tool-status")).to_have_text(re.compile(r"^done"))
    image = answer.get_by_role("img", name="Image returned by the tool picture")
    # The image loads lazily (loading="lazy"): below the fold it stays 0 x 0, so "visible" waits
    # until it is scrolled to, as a reader would.
    expect(image).to_be_attached(timeout=30_000)
    image.scroll_into_view_if_needed()
    expect(image).to_be_visible()
    assert image.evaluate("img => img.naturalWidth") == 1

    # The failing tool: its error is the result, and the model reads it.
    alice.goto(origin(alice) + "/")
    answer = send(alice, "use test__fail", "emulator/tools")
    call = pane_call(answer)
    expect(call.locator(".tool-status")).to_have_text(re.compile(r"^error · [\d,]+ ms$"))
    final = alice.locator("article.assistant").last
    expect(final).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(final.locator(".content")).to_contain_text("the test tool failed on purpose")

    # Stop during the slow tool: the pane showed its progress, the call is cancelled, on the
    # server too (it prints so).
    cancelled_before = mcp_server.lines.count("slow: cancelled")
    alice.goto(origin(alice) + "/")
    answer = send(alice, "use test__slow", "emulator/tools")
    call = pane_call(answer)
    expect(call.locator(".tool-status")).to_have_text(re.compile(r"^running… · step \d+ of \d+$"))
    answer.get_by_role("button", name="Stop").click()
    expect(call.locator(".tool-status")).to_have_text("cancelled")
    expect(answer).not_to_have_attribute("data-status", "streaming")
    poll(
        lambda: mcp_server.lines.count("slow: cancelled") > cancelled_before,
        what="notifications/cancelled to reach the MCP server",
    )


def test_a_server_killed_mid_call_leaves_a_clear_error_and_nothing_hung(
    alice: Any, cleaned: None
) -> None:
    with serve() as doomed:
        add_server(alice, "Doomed tools", "doomed", doomed.url)
        tick_tools(alice, "slow")
        answer = send(alice, "use doomed__slow", "emulator/tools")
        call = pane_call(answer)
        expect(call.locator(".tool-status")).to_have_text(re.compile(r"^running…"))
        poll(lambda: doomed.said("slow: started"), what="the slow tool to start")
        doomed.kill()
        expect(call.locator(".tool-status")).to_have_text(
            re.compile(r"^error · [\d,]+ ms$"), timeout=10_000
        )
    call.locator(".tool-result summary").click()
    expect(call.locator(".tool-result pre")).to_contain_text(
        "The tool could not be run: the server Doomed tools"
    )
    final = alice.locator("article.assistant").last
    expect(final).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(final.locator(".content")).to_contain_text("could not be run")
    # Settings → Tools says why its tools are unavailable now.
    alice.goto(origin(alice) + "/settings/")
    expect(alice.get_by_role("group", name="Tools of the MCP server Doomed tools")).to_contain_text(
        "Unavailable now:"
    )


def test_a_server_never_reached_is_unavailable_in_settings_and_its_state_shows_in_the_admin(
    alice: Any, cleaned: None
) -> None:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        closed_url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    alice.goto(origin(alice) + "/admin/chatapp/mcpserver/add/")
    alice.get_by_label("Name:").fill("Never reached")
    alice.get_by_label("Prefix:").fill("never")
    alice.get_by_label("URL:").fill(closed_url)
    alice.get_by_role("button", name="Save", exact=True).click()
    expect(alice.locator(".messagelist")).to_contain_text(
        "Never reached: its tools are unavailable"
    )
    # The changelist shows the state whole at 1280 px: neither clipped nor off the page.
    alice.set_viewport_size({"width": 1280, "height": 800})
    state = alice.locator("#result_list td.field-state").first
    expect(state).to_contain_text("unavailable: it could not be reached")
    screenshots(alice, "mcp-admin-servers")
    # Django's results box scrolls what does not fit, hiding the columns past its edge.
    results = alice.locator("#changelist .results")
    assert results.evaluate("box => box.scrollWidth <= box.clientWidth")
    alice.goto(origin(alice) + "/settings/")
    group = alice.get_by_role("group", name="Tools of the MCP server Never reached")
    expect(group).to_contain_text("Unavailable now:")
    expect(group.get_by_role("checkbox")).to_have_count(0)
