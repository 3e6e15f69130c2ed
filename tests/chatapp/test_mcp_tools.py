"""MCP tools against a real MCP server (the SDK's own server side, `tests/mcp_server`) over
Streamable HTTP on loopback: listing, offering by group, calls that answer, fail, take their
time, return an image or 2 MB, a Stop that cancels on the server, and a server that is away."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.utils import timezone

from chatapp import tools
from chatapp.gateways import key_vault
from chatapp.tools.mcp import calls, catalog, client
from chatapp.tools.models import McpServer
from tests.mcp_server.running import RunningServer, serve
from tests.waiting import eventually

pytestmark = [pytest.mark.django_db(transaction=True)]

ALL = frozenset(
    f"test__{name}"
    for name in ("lookup", "slow", "fail", "picture", "document", "huge", "shaped", "grow", "grown")
)


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[RunningServer]:
    with serve() as running:
        yield running


async def add_server(url: str, **fields: Any) -> McpServer:
    server = await McpServer.objects.acreate(name="Test tools", prefix="test", url=url, **fields)
    assert await catalog.refresh(server.pk) == "" or fields.get("expect_problem")
    return await McpServer.objects.aget(pk=server.pk)


async def call(
    name: str, arguments: dict[str, Any], user_pk: int, seen: list[str] | None = None
) -> calls.McpRun:
    async def progress(text: str) -> None:
        if seen is not None:
            seen.append(text)

    return await calls.run(name, orjson.dumps(arguments).decode(), ALL, user_pk, progress)


async def test_the_tools_are_listed_with_their_schemas(mcp_server: RunningServer) -> None:
    server = await add_server(mcp_server.url)
    names = [entry["name"] for entry in server.tools]
    assert {"lookup", "slow", "fail", "picture", "huge"} <= set(names)
    lookup = next(entry for entry in server.tools if entry["name"] == "lookup")
    assert lookup["input_schema"]["properties"]["word"]["type"] == "string"
    assert "<b>Descriptions are shown escaped.</b>" in lookup["description"]
    assert server.problem == ""
    assert server.checked_at is not None


async def test_a_call_answers_and_its_time_is_on_record(
    mcp_server: RunningServer, alice: Any
) -> None:
    await add_server(mcp_server.url)
    ran = await call("test__lookup", {"word": "tram"}, alice.pk)
    assert ran.status == "done"
    assert "lookup-result-42" in ran.result
    assert "'tram'" in ran.result
    assert ran.duration_ms > 0


async def test_arguments_are_checked_against_the_schema_before_the_server_is_asked(
    mcp_server: RunningServer, alice: Any
) -> None:
    await add_server(mcp_server.url)
    ran = await call("test__lookup", {"word": 7}, alice.pk)
    assert ran.status == "error"
    assert "do not match the parameters of test__lookup" in ran.result


@pytest.mark.timeout(60)
async def test_a_hostile_pattern_in_a_server_s_schema_holds_nothing(
    mcp_server: RunningServer, alice: Any
) -> None:
    """`shaped`'s schema has `^(a+)+$`: checked by Python's `re` on the model's 29 characters,
    it held the whole process for a minute, and each character more doubles that (these 41 would
    take days); with RE2 the refusal is at once, and the server is asked only with a word that
    fits."""
    server = await add_server(mcp_server.url)
    shaped = next(entry for entry in server.tools if entry["name"] == "shaped")
    assert shaped["input_schema"]["properties"]["word"]["pattern"] == "^(a+)+$"
    ran = await call("test__shaped", {"word": "a" * 40 + "!"}, alice.pk)
    assert ran.status == "error"
    assert "do not match the parameters of test__shaped at $.word" in ran.result
    ran = await call("test__shaped", {"word": "a" * 28}, alice.pk)
    assert (ran.status, ran.result) == ("done", "28 a's.")


async def test_the_failing_tool_s_error_is_the_result(
    mcp_server: RunningServer, alice: Any
) -> None:
    await add_server(mcp_server.url)
    ran = await call("test__fail", {"reason": "no cheese"}, alice.pk)
    assert ran.status == "error"
    assert "the test tool failed on purpose: no cheese" in ran.result


async def test_an_image_is_kept_as_a_checked_attachment(
    mcp_server: RunningServer, alice: Any
) -> None:
    await add_server(mcp_server.url)
    ran = await call("test__picture", {}, alice.pk)
    assert ran.status == "done"
    assert "An image (image/png" in ran.result
    [image] = ran.attachments
    assert image["kind"] == "image"
    assert image["media_type"] == "image/png"
    assert image["filename"] == "picture-1.png"


async def test_an_embedded_resource_is_a_file_to_download_and_a_link_is_named(
    mcp_server: RunningServer, alice: Any
) -> None:
    await add_server(mcp_server.url)
    ran = await call("test__document", {}, alice.pk)
    assert ran.status == "done"
    assert "[A file, scores.csv (17 bytes), attached for the user.]" in ran.result
    assert "[A link to the resource 'notes': https://example.org/notes]" in ran.result
    [file] = ran.attachments
    assert file["kind"] == "file"
    assert file["filename"] == "scores.csv"
    assert file["media_type"] == "application/octet-stream"  # served as bytes, never as a page


async def test_two_megabytes_are_cut_for_the_model_and_said_so(
    mcp_server: RunningServer, alice: Any
) -> None:
    await add_server(mcp_server.url)
    ran = await call("test__huge", {}, alice.pk)
    assert ran.status == "done"
    assert len(ran.result) < tools.MAX_RESULT + 200
    assert f"[Cut: the result was {2 * 1024 * 1024:,} characters" in ran.result


async def test_a_server_sending_more_than_the_byte_cap_is_cut_off(
    mcp_server: RunningServer, alice: Any, settings: Any
) -> None:
    await add_server(mcp_server.url)
    settings.CHAT_MCP_MAX_BYTES = 1024 * 1024
    ran = await call("test__huge", {}, alice.pk)
    assert ran.status == "error"
    assert f"sent more than {1024 * 1024:,} bytes" in ran.result
    server = await McpServer.objects.aget(prefix="test")
    assert server.problem == ""  # the server is up: only that answer was too large


async def test_progress_reaches_the_pane_and_a_deadline_cancels_on_the_server(
    mcp_server: RunningServer, alice: Any, settings: Any
) -> None:
    await add_server(mcp_server.url)
    settings.CHAT_MCP_TIMEOUT = 1.6
    seen: list[str] = []
    cancelled_before = mcp_server.lines.count("slow: cancelled")
    ran = await call("test__slow", {"seconds": 30}, alice.pk, seen)
    assert ran.status == "error"
    assert ran.result == "The tool took longer than 1.6 s and was cancelled."
    assert seen
    assert seen[0].startswith("step ")
    await eventually(
        lambda: mcp_server.lines.count("slow: cancelled") > cancelled_before,
        what="notifications/cancelled to reach the server",
    )


async def test_stop_cancels_the_call_on_the_server(mcp_server: RunningServer, alice: Any) -> None:
    await add_server(mcp_server.url)
    started_before = mcp_server.lines.count("slow: started")
    cancelled_before = mcp_server.lines.count("slow: cancelled")
    task = asyncio.create_task(call("test__slow", {"seconds": 30}, alice.pk))
    await eventually(
        lambda: mcp_server.lines.count("slow: started") > started_before, what="the call to start"
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # a call that ignored the cancel would run its 30 s past the test's timeout
    await eventually(
        lambda: mcp_server.lines.count("slow: cancelled") > cancelled_before,
        what="notifications/cancelled to reach the server",
    )


@pytest.mark.processes
async def test_a_server_that_is_away_is_a_reason_not_a_hang(alice: Any, settings: Any) -> None:
    # Deadlines past the test's own timeout: only the transport's error can end the call in time.
    settings.CHAT_MCP_TIMEOUT = settings.CHAT_MCP_CONNECT_TIMEOUT = 600
    with serve() as doomed:
        await add_server(doomed.url)
    ran = await call("test__lookup", {"word": "x"}, alice.pk)
    assert ran.status == "error"
    assert "could not be reached" in ran.result
    server = await McpServer.objects.aget(prefix="test")
    assert "could not be reached" in server.problem
    # Its tools are no longer offered, and a call says why.
    assert await sync_to_async(tools.offered)(ALL, alice.pk) == []
    ran = await call("test__lookup", {"word": "x"}, alice.pk)
    assert "is unavailable: its server Test tools has a problem" in ran.result
    # A listing that fails says so on the row too, keeping the tools it listed before.
    assert "could not be reached" in await catalog.refresh(server.pk)
    assert (await McpServer.objects.aget(pk=server.pk)).tools == server.tools


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("/garbage", "it answered with what is not MCP (Unexpected content type: text/html"),
        ("/broken", "it answered HTTP 500"),
        ("/nothing", "it answered HTTP 404 (is this its MCP endpoint?)"),
    ],
)
async def test_a_server_that_answers_garbage_is_said_so_at_once(
    mcp_server: RunningServer, path: str, problem: str, settings: Any
) -> None:
    # Deadlines past the test's own timeout: only the SDK's error can end the listing in time.
    settings.CHAT_MCP_TIMEOUT = settings.CHAT_MCP_CONNECT_TIMEOUT = 600
    server = await McpServer.objects.acreate(
        name="Odd", prefix="odd", url=f"http://127.0.0.1:{mcp_server.port}{path}"
    )
    said = await catalog.refresh(server.pk)
    assert said.startswith(problem)
    assert (await McpServer.objects.aget(pk=server.pk)).problem == said


@pytest.mark.processes
@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_a_server_killed_mid_call_ends_the_call_with_a_reason(
    alice: Any, transport: str
) -> None:
    with serve() as doomed:
        url = doomed.sse_url if transport == "sse" else doomed.url
        await add_server(url, transport=transport)
        task = asyncio.create_task(call("test__slow", {"seconds": 30}, alice.pk))
        await eventually(lambda: doomed.said("slow: started"), what="the call to start")
        doomed.kill()
        ran = await asyncio.wait_for(task, 10)
    assert ran.status == "error"
    assert ran.result.startswith("The tool could not be run: the server Test tools ")


async def test_groups_decide_who_is_offered_a_server_s_tools(
    mcp_server: RunningServer, alice: Any, bob: Any
) -> None:
    server = await add_server(mcp_server.url)
    everyone = {tool.name for tool in await sync_to_async(tools.offered)(ALL, bob.pk)}
    assert "test__lookup" in everyone
    staff = await Group.objects.acreate(name="staff")
    await sync_to_async(server.groups.add)(staff)
    await sync_to_async(alice.groups.add)(staff)
    assert await sync_to_async(tools.offered)(ALL, bob.pk) == []
    offered = {tool.name for tool in await sync_to_async(tools.offered)(ALL, alice.pk)}
    assert "test__lookup" in offered
    ran = await call("test__lookup", {"word": "x"}, bob.pk)
    assert ran.status == "error"
    assert "There is no tool named 'test__lookup'" in ran.result


async def test_headers_are_sent_encrypted_at_rest(mcp_server: RunningServer) -> None:
    secret = {"Authorization": "Bearer mcp-secret-token"}
    server = await add_server(
        mcp_server.url, headers_encrypted=key_vault.encrypt(orjson.dumps(secret).decode())
    )
    assert "mcp-secret-token" not in server.headers_encrypted
    access = await sync_to_async(catalog.access_for)(server)
    assert access.headers == secret
    assert "mcp-secret-token" not in repr(access)


async def test_list_changed_during_a_call_refreshes_the_listing(
    mcp_server: RunningServer, alice: Any
) -> None:
    server = await add_server(mcp_server.url)
    assert "grown" not in [entry["name"] for entry in server.tools]
    ran = await call("test__grow", {}, alice.pk)
    assert ran.status == "done"

    async def grown() -> bool:
        row = await McpServer.objects.aget(pk=server.pk)
        return "grown" in [entry["name"] for entry in row.tools]

    await eventually(grown, what="the listing to be refreshed after list_changed")


async def test_the_older_sse_transport_works_too(mcp_server: RunningServer, alice: Any) -> None:
    await add_server(mcp_server.sse_url, transport=McpServer.Transport.SSE)
    ran = await call("test__lookup", {"word": "tram"}, alice.pk)
    assert ran.status == "done"
    assert "lookup-result-42" in ran.result


async def test_a_session_per_call_costs_little_on_loopback(
    mcp_server: RunningServer, alice: Any
) -> None:
    """What the design pays for a session per call (initialize, its notice, the call, the
    session's end), measured: 66 to 154 ms on two cores shared with five test runs, most of it
    Python on both ends; bounded here well under what a user would notice beside a model."""
    await add_server(mcp_server.url)
    await call("test__lookup", {"word": "warm"}, alice.pk)
    durations = [(await call("test__lookup", {"word": "x"}, alice.pk)).duration_ms for _ in "abcde"]
    assert sorted(durations)[2] < 500, durations
    print(f"session-per-call durations on loopback (ms): {durations}")


def test_schemas_out_of_bounds_leave_their_tool_out() -> None:
    from mcp import types

    deep: dict[str, Any] = {"type": "object"}
    for _ in range(20):
        deep = {"type": "object", "properties": {"x": deep}}
    cases = [
        types.Tool(name="ok", inputSchema={"type": "object"}),
        types.Tool(name="deep", inputSchema=deep),
        types.Tool(name="remote", inputSchema={"type": "object", "$ref": "https://e.x/s.json"}),
        types.Tool(name="array", inputSchema={"type": "array"}),
        types.Tool(name="bad name!", inputSchema={"type": "object"}),
        types.Tool(name="invalid", inputSchema={"type": "object", "minProperties": "two"}),
    ]
    kept, refused = catalog.listed(cases, "p")
    assert [entry["name"] for entry in kept] == ["ok"]
    assert len(refused) == 5
    assert client.reason(TimeoutError()) == "it did not answer in time"


async def test_listings_are_refreshed_when_due_and_a_server_with_a_problem_sooner(
    mcp_server: RunningServer, settings: Any
) -> None:
    settings.CHAT_MCP_REFRESH_INTERVAL = 300
    settings.CHAT_MCP_RETRY_INTERVAL = 30
    now = timezone.now()
    fresh = await McpServer.objects.acreate(
        name="Fresh", prefix="fresh", url=mcp_server.url, checked_at=now
    )
    await McpServer.objects.acreate(
        name="Stale", prefix="stale", url=mcp_server.url, checked_at=now - timedelta(seconds=301)
    )
    await McpServer.objects.acreate(
        name="Failing",
        prefix="failing",
        url=mcp_server.url,
        problem="it answered HTTP 502",
        checked_at=now - timedelta(seconds=31),
    )
    await McpServer.objects.acreate(name="New", prefix="new", url=mcp_server.url)
    await catalog.refresh_due()
    rows = {row.prefix: row async for row in McpServer.objects.all()}
    assert rows["fresh"].tools == []
    assert rows["fresh"].checked_at == fresh.checked_at
    for prefix in ("stale", "failing", "new"):
        assert len(rows[prefix].tools) >= 7, prefix
        assert rows[prefix].problem == ""


def test_an_mcp_tool_s_result_is_kept_back_from_shared_links() -> None:
    """What a server returns may be its account's data or the user's: private, like a search of
    the user's conversations."""
    from chatapp.conversations import shared_links

    assert shared_links._private({"name": "docs__lookup", "result": "secret"})
    assert not shared_links._private({"name": "calculator", "result": "42"})
