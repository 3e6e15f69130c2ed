"""Pages and htmx endpoints, through Django's async test client and the real emulator."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.urls import reverse

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.gateways import catalog, configs, key_vault
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import exact
from chatapp.rendering.markdown import citation
from chatapp.streaming import worker
from gateway_client import GatewayClient
from gateway_client.chunks import parse_annotation
from gateway_client.emulator import EmulatorURL
from tests.chatapp.conftest import GroupListener, UpstreamLog, start_turn
from tests.emulator_requests import record_chat_bodies
from tests.waiting import poll

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}


async def logged_in(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


async def workers_finished() -> None:
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


async def test_pages_need_sign_in() -> None:
    response = await AsyncClient().get(reverse("chat:home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


async def test_home_has_model_picker_message_box_and_send(alice: Any) -> None:
    client = await logged_in(alice)
    response = await client.get(reverse("chat:home"))
    html = response.content.decode()
    assert response.status_code == 200
    assert '<label for="model">Model</label>' in html
    pk = (await Gateway.objects.aget(name=configs.DEFAULT_NAME)).pk
    assert f'<optgroup label="{configs.DEFAULT_NAME}">' in html
    assert re.search(
        rf'<option value="g{pk}:emulator/chat" title="[^"]+" selected>Emulator: chat<', html
    )
    assert f'<option value="g{pk}:emulator/stall"' in html
    assert '<label for="message" class="visually-hidden">Message</label>' in html
    assert ">Send</button>" in html
    assert "vendor/htmx.min.js" in html
    assert "test-key" not in html  # the API key never reaches the browser


async def test_the_page_carries_the_tool_call_markup_that_live_calls_are_cloned_from(
    alice: Any,
) -> None:
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:home"))).content.decode()
    blank = html.split('<template class="tool-call-template">', 1)[1].split("</template>", 1)[0]
    # `_tool_call.html` with every part, which live_render.js takes each of from here.
    parts = ["tool-call", "tool-head", "tool-name", "tool-status", "tool-args", "tool-flag"]
    assert re.findall(r'class="([\w-]+)"', blank) == [*parts, "tool-result"]
    assert '<code class="tool-name">tool</code>' in blank


async def test_two_gateways_serve_one_users_conversations_side_by_side(
    alice: Any, emulator_url: EmulatorURL
) -> None:
    osmexo = await Gateway.objects.acreate(
        name="Osmexo",
        base_url=f"{emulator_url}/osmexo/v1",
        dialect="osmexo",
        cost_unit="micro_usd",
        api_key_encrypted=key_vault.encrypt("osmexo-key"),
    )
    configs.forget_configs()
    client = await logged_in(alice)
    home = (await client.get(reverse("chat:home"))).content.decode()
    assert '<optgroup label="Osmexo">' in home
    for value in ("emulator/echo", catalog.choice_value(osmexo.pk, "emulator/echo")):
        response = await client.post(
            reverse("chat:send_new"), {"content": "side by side", "model": value}, headers=HTMX
        )
        assert response.status_code == 200
    await workers_finished()
    rows = [
        (g.conversation.gateway.name, g.gateway.name, g.status, g.cost_unit)
        async for g in Generation.objects.select_related(
            "gateway", "conversation__gateway"
        ).order_by("pk")
    ]
    assert rows == [
        (configs.DEFAULT_NAME, configs.DEFAULT_NAME, "completed", "usd"),
        ("Osmexo", "Osmexo", "completed", "micro_usd"),
    ]
    # Each conversation's page preselects its own gateway's model.
    osmexo_conversation = await Conversation.objects.aget(gateway=osmexo)
    page = await client.get(reverse("chat:conversation", args=[osmexo_conversation.pk]))
    value = catalog.choice_value(osmexo.pk, "emulator/echo")
    assert re.search(rf'<option value="{value}"[^>]* selected>', page.content.decode())


async def test_a_disabled_gateway_is_refused_with_a_word(alice: Any) -> None:
    off = await Gateway.objects.acreate(
        name="Off", base_url="http://127.0.0.1:9/v1", cost_unit="usd", enabled=False
    )
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send_new"),
        {"content": "hi", "model": catalog.choice_value(off.pk, "m")},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert "That gateway is not available; choose another model." in response.content.decode()
    assert not await Generation.objects.aexists()


async def test_pages_run_only_our_own_scripts(alice: Any) -> None:
    client = await logged_in(alice)
    policy = (await client.get(reverse("chat:home")))["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["connect-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"


async def test_only_the_first_conversation_takes_the_place_of_no_conversations_yet(
    alice: Any,
) -> None:
    """A later one has no such line to remove (htmx reported the missing target as an error)."""
    client = await logged_in(alice)
    empty = '<div hx-swap-oob="delete:#conversation-list > li.empty"></div>'
    bodies = []
    for text in ("First", "Second"):
        response = await client.post(
            reverse("chat:send_new"), {"content": text, "model": "emulator/echo"}, headers=HTMX
        )
        bodies.append(response.content.decode())
    await workers_finished()
    assert empty in bodies[0]
    assert empty not in bodies[1]


async def test_first_message_swaps_in_the_new_titled_conversation(alice: Any) -> None:
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send_new"),
        {"content": "Plan a trip to Lisbon\nwith kids", "model": "emulator/echo"},
        headers=HTMX,
    )
    conversation = await Conversation.objects.aget(user=alice)
    assert response.status_code == 200
    # No redirect and no new page: the conversation replaces the empty one in place, the address
    # bar follows, and the sidebar gains it.
    url = reverse("chat:conversation", args=[conversation.pk])
    assert response["HX-Push-Url"] == url
    assert response["HX-Retarget"] == "main.chat"
    assert response["HX-Reswap"] == "outerHTML"
    body = response.content.decode()
    assert "{#" not in body  # no template comment leaks as text
    assert "comment %}" not in body
    assert f'<main class="chat" data-conversation="{conversation.pk}"' in body
    assert '<ul hx-swap-oob="afterbegin:#conversation-list"><li class="current"' in body
    assert f'href="{url}"' in body
    assert "<title>Plan a trip to Lisbon · Gateway Chat</title>" in body

    assert conversation.title == "Plan a trip to Lisbon"
    await workers_finished()
    answer = await Message.objects.select_related("generation").aget(role="assistant")
    assert answer.content == "Plan a trip to Lisbon\nwith kids"
    assert answer.generation.status == "completed"
    page = await client.get(reverse("chat:conversation", args=[conversation.pk]))
    html = page.content.decode()
    assert 'data-status="completed"' in html
    assert "Plan a trip to Lisbon" in html


async def test_send_appends_the_turn_with_a_streaming_answer(alice: Any) -> None:
    started = await start_turn(alice, "first", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    client = await logged_in(alice)
    url = reverse("chat:send", args=[started.conversation.pk])
    response = await client.post(
        url, {"content": "second question", "model": "emulator/echo"}, headers=HTMX
    )
    html = response.content.decode()
    assert 'class="message user"' in html
    assert "second question" in html
    assert 'data-status="streaming"' in html
    assert ">Stop</button>" in html
    await workers_finished()
    generation = await Generation.objects.filter(conversation=started.conversation).afirst()
    assert generation is not None
    assert generation.status == "completed"


async def test_a_follow_up_to_a_message_gone_on_from_is_refused_and_the_page_caught_up(
    alice: Any,
) -> None:
    started = await start_turn(alice, "first", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    pk = started.conversation.pk
    second = await start_turn(alice, "from another tab", "emulator/echo", pk)
    await asyncio.wait_for(worker.start(second.job), 30)
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send", args=[pk]),
        {"content": "third", "model": "emulator/echo", "after": str(started.assistant.pk)},
        headers=HTMX,
    )
    assert response["HX-Retarget"] == "#composer-error"
    assert response["HX-Reswap"] == "innerHTML"
    html = response.content.decode()
    error, caught_up = html.split('<div id="messages" hx-swap-oob="innerHTML">')
    assert error.strip() == (
        "This conversation has new messages: they are shown now; send again to continue."
    )
    every = [str(m.pk) async for m in Message.objects.filter(conversation_id=pk).order_by("pk")]
    assert len(every) == 4
    assert re.findall(r'<article [^>]*data-message="(\d+)"', caught_up) == every
    assert not await Message.objects.filter(content="third").aexists()


async def test_multi_turn_context_is_sent(alice: Any) -> None:
    started = await start_turn(alice, "first question", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    second = await start_turn(alice, "second question", "emulator/echo", started.conversation.pk)
    assert second.job.messages == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first question"},
        {"role": "user", "content": "second question"},
    ]


async def test_empty_message_shows_an_error_in_the_composer(alice: Any) -> None:
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send_new"), {"content": "   ", "model": "emulator/chat"}, headers=HTMX
    )
    assert response["HX-Retarget"] == "#composer-error"
    assert "Write a message first." in response.content.decode()
    assert not await Conversation.objects.aexists()


async def test_other_users_conversation_is_404_everywhere(alice: Any, bob: Any) -> None:
    started = await start_turn(alice, "private", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    client = await logged_in(bob)
    pk, message_pk = started.conversation.pk, started.assistant.pk
    for method, url in [
        ("get", reverse("chat:conversation", args=[pk])),
        ("post", reverse("chat:send", args=[pk])),
        ("post", reverse("chat:rename", args=[pk])),
        ("post", reverse("chat:delete", args=[pk])),
        ("get", reverse("chat:message", args=[message_pk])),
        ("get", reverse("chat:message_source", args=[message_pk])),
        ("post", reverse("chat:retry", args=[message_pk])),
        ("post", reverse("chat:continue", args=[message_pk])),
        ("post", reverse("chat:stop", args=[started.generation.pk])),
        ("get", reverse("chat:attachment", args=[message_pk, 0])),
    ]:
        if method == "post":
            data = {"content": "x", "model": "emulator/echo", "title": "x"}
            response = await client.post(url, data)
        else:
            response = await client.get(url)
        assert response.status_code == 404, url
    home = (await client.get(reverse("chat:home"))).content.decode()
    assert "private" not in home
    assert await Conversation.objects.filter(pk=pk, title="private").aexists()


async def test_stop_cancels_the_generation(alice: Any, upstream: UpstreamLog) -> None:
    client = await logged_in(alice)
    started = await start_turn(alice, "otters", "emulator/long?tokens_per_second=100")
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("delta")  # some text is out: Stop lands mid-answer
    response = await client.post(reverse("chat:stop", args=[started.generation.pk]))
    assert response.status_code == 204
    record = await upstream.finished(await upstream.one(scenario="long"))
    assert record.final_outcome == "cancelled", "Stop closed the upstream stream"
    assert record.cancelled_at is not None
    await asyncio.wait_for(task, 5)
    generation = await Generation.objects.select_related("message").aget(pk=started.generation.pk)
    assert generation.status == "cancelled"
    assert generation.message.content
    fragment = await client.get(reverse("chat:message", args=[started.assistant.pk]))
    html = fragment.content.decode()
    assert 'data-status="cancelled"' in html
    assert "Stopped." in html
    assert ">Retry</button>" in html


async def sent_alone(emulator_url: EmulatorURL, messages: list[dict[str, Any]]) -> int:
    """The prompt tokens the emulator counts for `messages` sent by themselves: it counts the
    request's JSON `messages`, so two requests agree only if they sent the same context size."""
    url = f"{emulator_url}/numes/api/v1"
    async with (
        GatewayClient(url, "test-key") as gw,
        gw.stream_chat(model="emulator/echo", messages=messages) as stream,
    ):
        async for _ in stream:
            pass
    assert stream.generation_id
    record = emulator_url.app.records.get(stream.generation_id)
    assert record is not None
    return record.tokens_prompt


async def test_error_is_shown_in_plain_words_and_retry_starts_a_new_generation(
    alice: Any, emulator_url: EmulatorURL, upstream: UpstreamLog
) -> None:
    client = await logged_in(alice)
    started = await start_turn(alice, "hello", "emulator/error-before")
    await asyncio.wait_for(worker.start(started.job), 30)
    generation = await Generation.objects.aget(pk=started.generation.pk)
    html = (await client.get(reverse("chat:message", args=[started.assistant.pk]))).content.decode()
    assert 'data-status="failed"' in html
    assert "The gateway refused the request" in html
    assert f"HTTP {generation.error_status}" in html
    assert generation.error_message in html
    assert "not billed (refused before the answer began)" in html
    response = await client.post(
        reverse("chat:retry", args=[started.assistant.pk]), {"model": "emulator/echo"}, headers=HTMX
    )
    assert 'data-status="streaming"' in response.content.decode()
    await workers_finished()
    retried = await Generation.objects.exclude(pk=generation.pk).select_related("message").aget()
    assert retried.status == "completed"
    assert retried.message.content == "hello"
    assert await Message.objects.filter(conversation=started.conversation).acount() == 3
    # The failed attempt is not sent as context for its retry: the emulator counted the prompt
    # of the question alone (the failed answer would add `{"role": "assistant", ...}`).
    (failed, retry) = upstream.new()
    assert failed.scenario == "error-before"
    assert retry.id == retried.upstream_id
    assert retry.tokens_prompt == await sent_alone(
        emulator_url, [{"role": "user", "content": "hello"}]
    )


async def test_model_output_is_rendered_safely(alice: Any) -> None:
    text = "**bold** <script>alert(1)</script> [x](javascript:alert(1)) [ok](https://example.org)"
    started = await start_turn(alice, text, "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:message", args=[started.assistant.pk]))).content.decode()
    assert "<strong>bold</strong>" in html
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert 'href="javascript' not in html
    assert 'href="https://example.org" target="_blank" rel="noopener nofollow"' in html


async def test_an_answers_markdown_is_copied_from_its_source_for_its_owner_only(
    alice: Any, bob: Any
) -> None:
    text = "# Ünïcode\n\n```python\nx = '<b>'\n```\n\nSee [1] and note[^1].\n\n[^1]: A note."
    started = await start_turn(alice, text, "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    await Message.objects.filter(pk=started.assistant.pk).aupdate(
        annotations=[{"url": "https://cited.example/", "title": "Cited"}]
    )
    client = await logged_in(alice)
    url = reverse("chat:message_source", args=[started.assistant.pk])
    response = await client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.content.decode() == text
    html = (await client.get(reverse("chat:message", args=[started.assistant.pk]))).content.decode()
    assert (
        f'<button type="button" class="copy-answer" data-source-url="{url}"'
        ' aria-label="Copy the answer as Markdown">Copy</button>'
    ) in html
    assert '<button class="copy-code" type="button">Copy</button>' in html
    assert 'href="https://cited.example/" class="citation-ref" title="Cited"' in html
    assert f'<li id="fn-m{started.assistant.pk}-1" class="footnote-item">' in html
    assert (await (await logged_in(bob)).get(url)).status_code == 404
    assert (await client.post(url)).status_code == 405
    anonymous = await AsyncClient().get(url)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith(reverse("login"))


async def test_rename_and_delete(alice: Any) -> None:
    started = await start_turn(alice, "hello", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    client = await logged_in(alice)
    pk = started.conversation.pk
    response = await client.post(
        reverse("chat:rename", args=[pk]), {"title": "  Renamed   trip "}, headers=HTMX
    )
    html = response.content.decode()
    assert '<h1 id="conversation-title">Renamed trip</h1>' in html
    assert 'hx-swap-oob="true"' in html
    assert (await Conversation.objects.aget(pk=pk)).title == "Renamed trip"
    response = await client.post(reverse("chat:delete", args=[pk]), headers=HTMX)
    assert response["HX-Redirect"] == reverse("chat:home")
    assert not await Conversation.objects.filter(pk=pk).aexists()


async def test_deleting_a_conversation_stops_its_generation_and_keeps_its_cost(
    alice: Any, upstream: UpstreamLog
) -> None:
    started = await start_turn(alice, "otters", "emulator/long?tokens_per_second=100")
    listener = await GroupListener(started.conversation.pk).join()
    task = worker.start(started.job)
    await listener.until("delta")
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:delete", args=[started.conversation.pk]), headers=HTMX
    )
    assert response["HX-Redirect"] == reverse("chat:home")
    # Stop reached the gateway: the stream was closed long before its 3,000 tokens.
    record = await upstream.finished(await upstream.one(scenario="long"))
    assert record.final_outcome == "cancelled"
    assert record.cancelled_at is not None
    assert record.tokens_completion < 1000
    await asyncio.wait_for(task, 30)
    # The ledger keeps the generation (its text went with the conversation), its cost settled.
    generation = await Generation.objects.aget()
    assert (generation.status, generation.user_id, generation.user_name) == (
        "cancelled",
        alice.pk,
        "alice",
    )
    assert (generation.conversation_id, generation.message_id) == (None, None)
    assert generation.upstream_id == record.id
    settled = await upstream.settled(record.id)
    assert generation.cost_source == "record"
    assert generation.cost == exact(settled.total_cost) > 0


async def test_sidebar_lists_own_conversations_newest_first(alice: Any, bob: Any) -> None:
    for text in ("older", "newer"):
        started = await start_turn(alice, text, "emulator/echo")
        await asyncio.wait_for(worker.start(started.job), 30)
    await start_turn(bob, "not alice's", "emulator/echo")
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:home"))).content.decode()
    assert html.index(">newer</a>") < html.index(">older</a>")
    assert "not alice" not in html


@pytest.mark.parametrize("status", ["streaming", "completed"])
async def test_page_carries_status_and_seq_for_reattach(alice: Any, status: str) -> None:
    started = await start_turn(alice, "hi", "emulator/echo")
    await sync_to_async(Generation.objects.filter(pk=started.generation.pk).update)(
        status=status, last_seq=7
    )
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:conversation", args=[started.conversation.pk]))).content
    assert f'data-status="{status}" data-seq="7"'.encode() in html
    assert (b">Stop</button>" in html) == (status == "streaming")


async def test_reasoning_details_are_sent_back_unchanged(alice: Any) -> None:
    started = await start_turn(alice, "why is the sky blue", "emulator/reasoning")
    await asyncio.wait_for(worker.start(started.job), 30)
    answer = await Message.objects.aget(pk=started.assistant.pk)
    assert answer.reasoning_details
    second = await start_turn(alice, "and at sunset?", "emulator/echo", started.conversation.pk)
    assert second.job.messages[1] == {
        "role": "assistant",
        "content": answer.content,
        "reasoning_details": answer.reasoning_details,
    }


async def test_admin_lists_generations_with_their_cost(alice: Any) -> None:
    started = await start_turn(alice, "hello", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    await sync_to_async(type(alice).objects.filter(pk=alice.pk).update)(
        is_staff=True, is_superuser=True
    )
    client = await logged_in(alice)
    for name in ("generation", "conversation", "message"):
        response = await client.get(reverse(f"admin:chatapp_{name}_changelist"))
        assert response.status_code == 200, name
    html = (await client.get(reverse("admin:chatapp_generation_changelist"))).content.decode()
    assert "emulator/echo" in html
    assert "usage chunk" in html


async def test_thinking_is_open_while_streaming_then_collapsed(alice: Any) -> None:
    client = await logged_in(alice)
    started = await start_turn(alice, "Why is the sky blue?", "emulator/reasoning")
    url = reverse("chat:message", args=[started.assistant.pk])
    running = (await client.get(url)).content.decode()
    assert '<details class="pane reasoning-pane" open hidden>' in running
    await asyncio.wait_for(worker.start(started.job), 30)
    done = (await client.get(url)).content.decode()
    assert '<details class="pane reasoning-pane">' in done
    assert "The user asks about" in done


async def test_tool_calls_have_their_own_pane(alice: Any) -> None:
    client = await logged_in(alice)
    started = await start_turn(alice, "Weather in Oslo?", "emulator/tools")
    await asyncio.wait_for(worker.start(started.job), 30)
    html = (await client.get(reverse("chat:message", args=[started.assistant.pk]))).content.decode()
    pane = html[html.index('<section class="pane tool-calls-pane"') :]
    pane = pane[: pane.index("</section>")]
    assert "hidden" not in pane.split(">", 1)[0]
    assert '<code class="tool-name">get_weather</code>' in pane
    assert "{&quot;city&quot;:&quot;Oslo&quot;,&quot;unit&quot;:&quot;celsius&quot;}" in pane
    assert "no tools were offered in this conversation, so none ran" in pane


async def test_a_tool_call_that_ran_shows_its_status_arguments_and_result(alice: Any) -> None:
    client = await logged_in(alice)
    ran = {
        "index": 0,
        "id": "call_1",
        "name": "calculator",
        "arguments": '{"expression":"6*7"}',
        "status": "done",
        "result": "<b>42</b>",
        "duration_ms": 1234,
    }
    bad = {**ran, "index": 1, "arguments": '{"expression":', "status": "error", "result": "bad"}
    hostile = {
        **ran,
        "index": 2,
        "name": "<img src=x onerror=alert(1)>",
        "arguments": '{"q": "</pre><script>alert(1)</script>"}',
    }
    answer = await finished_with(alice, tool_calls=[ran, bad, hostile])
    html = (await client.get(reverse("chat:message", args=[answer.pk]))).content.decode()
    pane = html[html.index('<section class="pane tool-calls-pane"') :]
    pane = pane[: pane.index("</section>")]
    assert 'data-status="done"' in pane
    assert "done · 1,234 ms" in pane
    assert "{\n  &quot;expression&quot;: &quot;6*7&quot;\n}" in pane  # pretty-printed
    assert "&lt;b&gt;42&lt;/b&gt;" in pane  # a result is text, never markup
    assert '<pre class="tool-args invalid">{&quot;expression&quot;:</pre>' in pane
    assert "These arguments are not a JSON object." in pane
    assert "<img" not in pane  # a model's names and arguments are text too
    assert "<script>" not in pane
    assert "&lt;img src=x onerror=alert(1)&gt;" in pane
    assert "none ran" not in pane


async def finished_with(user: Any, **fields: Any) -> Message:
    """A completed answer carrying `fields` as a gateway might have sent them."""
    started = await start_turn(user, "media", "emulator/echo")
    await Generation.objects.filter(pk=started.generation.pk).aupdate(status="completed")
    await Message.objects.filter(pk=started.assistant.pk).aupdate(**fields)
    return started.assistant


def stored_citations(*raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Citations as the worker stores them: checked by the reader, in their page form."""
    checked = [parse_annotation(entry) for entry in raw]
    return [{**citation(a), "raw": a.raw} for a in checked if a is not None]


async def test_media_are_shown_safely(alice: Any) -> None:
    message = await finished_with(
        alice,
        attachments=[
            {"kind": "image_url", "url": "data:image/png;base64,iVBORw0KGgo="},
            {"kind": "image_url", "url": "data:image/svg+xml;base64,PHN2Zz4="},
            {"kind": "image_url", "url": "http://plain.example/a.png"},
            {"kind": "image_url", "url": "javascript:alert(1)"},
            {"kind": "audio", "media_type": "audio/wav", "data": "UklGRg==", "transcript": "<b>"},
            {"kind": "file", "filename": '"><img src=x onerror=alert(1)>.csv', "data": "YQ=="},
            {"kind": "file", "filename": "p.png", "media_type": "image/png", "data": "iVBO"},
            {"kind": "<script>", "data": ""},
        ],
        annotations=[
            *stored_citations(
                {
                    "type": "url_citation",
                    "url_citation": {"url": "https://ok.example/", "title": "OK"},
                },
                {
                    "type": "url_citation",
                    "url_citation": {"url": "javascript:alert(1)", "title": "JS"},
                },
                {"type": "file_citation", "title": "<i>data</i>"},
            ),
            # Stored before the reader checked citations, or by hand: the page checks again.
            {"url": "data:text/html,<script>", "title": "bad", "raw": {}},
        ],
    )
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:message", args=[message.pk]))).content.decode()
    audio_url = reverse("chat:attachment", args=[message.pk, 4])
    assert html.count('<img class="image"') == 1
    assert '<img class="image" src="data:image/png;base64,iVBORw0KGgo="' in html
    assert "image/svg" not in html  # the SVG image (the footer's icons are our own SVG)
    assert "PHN2Zz4" not in html
    assert "plain.example" not in html
    assert "javascript:" not in html
    assert f'<audio controls preload="metadata" src="{audio_url}"></audio>' in html
    assert "<figcaption>&lt;b&gt;</figcaption>" in html
    assert "<img src=x" not in html
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;.csv" in html
    assert '<img class="preview" src="data:image/png;base64,iVBO" alt="p.png"' in html
    assert "&lt;script&gt; received" in html
    assert '<a href="https://ok.example/" rel="noopener nofollow" target="_blank">OK</a>' in html
    assert "<li>JS</li>" not in html  # the reader drops a citation it would not link to
    assert "<li>&lt;i&gt;data&lt;/i&gt;</li>" in html
    assert "<li>bad</li>" in html
    assert "data:text/html" not in html


async def test_attachments_are_downloads_never_pages(alice: Any) -> None:
    message = await finished_with(
        alice,
        attachments=[
            {"kind": "image_url", "url": "data:image/png;base64,iVBORw0KGgo="},
            {
                "kind": "file",
                "filename": "../x\r\n.html",
                "media_type": "text/html",
                "data": "PGI+",
            },
            {"kind": "audio", "media_type": "audio/wav", "filename": "a.wav", "data": "UklGRg=="},
            {"kind": "file", "filename": "résumé.csv", "data": "YQ=="},
        ],
    )
    client = await logged_in(alice)

    async def fetch(index: int) -> Any:
        return await client.get(reverse("chat:attachment", args=[message.pk, index]))

    page = await fetch(1)
    assert page.status_code == 200
    assert page.content == b"<b>"
    assert page["Content-Type"] == "application/octet-stream"
    assert page["Content-Disposition"] == 'attachment; filename="x.html"'
    assert page["X-Content-Type-Options"] == "nosniff"
    assert page["Content-Security-Policy"] == "default-src 'none'; sandbox"
    audio = await fetch(2)
    assert audio["Content-Type"] == "audio/wav"
    assert audio.content == b"RIFF"
    assert audio["Content-Disposition"] == 'attachment; filename="a.wav"'
    accented = await fetch(3)
    assert accented["Content-Disposition"] == "attachment; filename*=utf-8''r%C3%A9sum%C3%A9.csv"
    assert (await fetch(0)).status_code == 404, "images are shown from their URL, not served"
    assert (await fetch(9)).status_code == 404


async def test_a_new_chat_is_sent_upstream_before_its_rows_are_written(
    alice: Any, upstream: UpstreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first message's request goes out at once; if the turn then cannot be stored, that
    request is cancelled upstream rather than left running (and billing) with no generation."""

    def failing_create_turn(*args: Any, **kwargs: Any) -> Any:
        # On the records thread, so waiting here blocks no loop: the emulator has the request
        # before the turn is stored.
        poll(
            lambda: upstream.new(scenario="long"), what="the request to reach the gateway", within=5
        )
        raise RuntimeError("the database is gone")

    monkeypatch.setattr("chatapp.streaming.turn_start.create_turn", failing_create_turn)
    client = await logged_in(alice)
    with pytest.raises(RuntimeError, match="the database is gone"):
        await client.post(
            reverse("chat:send_new"),
            {"content": "otters", "model": "emulator/long?tokens_per_second=100"},
            headers=HTMX,
        )
    record = await upstream.finished(await upstream.one(scenario="long"))
    assert record.final_outcome == "cancelled"
    assert not await Conversation.objects.aexists()


async def answered(user: Any, text: str) -> Any:
    """A conversation with one finished answer to `text` (emulator/echo); its turn."""
    started = await start_turn(user, text, "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    return started


async def test_a_follow_up_is_sent_upstream_before_its_rows_are_written(
    alice: Any, upstream: UpstreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a new chat's: the follow-up's request, with its whole context, goes out before the
    turn is stored; if the turn then cannot be stored, that request is cancelled upstream."""
    first = await answered(alice, "Say otters")

    def failing_create_turn(*args: Any, **kwargs: Any) -> Any:
        poll(
            lambda: upstream.new(scenario="long"), what="the request to reach the gateway", within=5
        )
        raise RuntimeError("the database is gone")

    monkeypatch.setattr("chatapp.streaming.turn_start.create_turn", failing_create_turn)
    client = await logged_in(alice)
    with pytest.raises(RuntimeError, match="the database is gone"):
        await client.post(
            reverse("chat:send", args=[first.conversation.pk]),
            {
                "content": "And seals?",
                "model": "emulator/long?tokens_per_second=100",
                "after": str(first.assistant.pk),
            },
            headers=HTMX,
        )
    record = await upstream.finished(await upstream.one(scenario="long"))
    assert record.final_outcome == "cancelled"
    assert not await Message.objects.filter(content="And seals?").aexists()


async def test_a_follow_up_sends_its_context_once(
    alice: Any, upstream: UpstreamLog, received: list[dict[str, Any]]
) -> None:
    """The request read ahead is the turn's own: the branch shown and the new message, sent
    once (the worker reads the early stream, it does not send another)."""
    first = await answered(alice, "Say otters")
    answer = await Message.objects.aget(pk=first.assistant.pk)
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send", args=[first.conversation.pk]),
        {"content": "And seals?", "model": "emulator/chat", "after": str(answer.pk)},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert 'data-status="streaming"' in response.content.decode()
    await workers_finished()
    follow_ups = [body for body in received if body["model"] == "emulator/chat"]
    assert [body["messages"] for body in follow_ups] == [
        [
            {"role": "user", "content": "Say otters"},
            {"role": "assistant", "content": answer.content},
            {"role": "user", "content": "And seals?"},
        ]
    ]
    generation = await Generation.objects.aget(message__parent__content="And seals?")
    assert generation.status == Generation.Status.COMPLETED
    assert generation.upstream_id == (await upstream.one(scenario="chat")).id


async def test_a_refused_follow_up_sends_nothing_upstream(
    alice: Any, upstream: UpstreamLog
) -> None:
    started = await start_turn(alice, "A long one", "emulator/long")
    task = worker.start(started.job)
    await upstream.one(scenario="long")
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send", args=[started.conversation.pk]),
        {"content": "Meanwhile?", "model": "emulator/chat", "after": str(started.assistant.pk)},
        headers=HTMX,
    )
    assert BUSY in response.content.decode()
    assert upstream.new(scenario="chat") == []
    worker._running[started.job.generation_pk].cancel()
    await asyncio.wait_for(task, 30)


@pytest.fixture
def received(emulator_url: EmulatorURL, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The bodies of the chat requests the emulator receives from now on, as it parsed them."""
    return record_chat_bodies(emulator_url.app, monkeypatch)


async def test_thinking_that_ran_out_of_budget_continues_with_a_larger_one(
    alice: Any, bob: Any, upstream: UpstreamLog, received: list[dict[str, Any]]
) -> None:
    started = await start_turn(alice, "Why is the sea salty?", "emulator/length")
    await asyncio.wait_for(worker.start(started.job), 30)
    cut = await upstream.finished(await upstream.one(scenario="length"))
    assert (cut.finish_reason, cut.tokens_completion) == ("length", 48)  # the default budget
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:message", args=[started.assistant.pk]))).content.decode()
    assert "The token budget ran out while the model was thinking, before it answered." in html
    url = reverse("chat:continue", args=[started.assistant.pk])
    assert f'hx-post="{url}"' in html
    assert ">Continue with a larger budget</button>" in html
    assert ">Retry</button>" not in html  # it is a complete answer, not a failure

    assert (await (await logged_in(bob)).post(url, headers=HTMX)).status_code == 404
    assert (await client.get(url)).status_code == 405
    response = await client.post(url, headers=HTMX)
    assert 'data-status="streaming"' in response.content.decode()
    await workers_finished()

    continued = (
        await Generation.objects.exclude(pk=started.generation.pk).select_related("message").aget()
    )
    assert continued.max_tokens == 4096
    assert continued.model == "emulator/length"
    assert continued.gateway_id == started.generation.gateway_id
    assert (continued.status, continued.finish_reason) == ("completed", "stop")
    assert continued.message.reasoning.startswith("Let me think")
    assert "## About" in continued.message.content
    # What the gateway was asked: the gateway's default budget first, then 4,096 for the same
    # question (the cut answer is not context for its continuation).
    first, second = (body for body in received if body["model"] == "emulator/length")
    assert "max_tokens" not in first
    assert second["max_tokens"] == 4096
    assert (
        second["messages"]
        == first["messages"]
        == [{"role": "user", "content": "Why is the sea salty?"}]
    )
    record = await upstream.finished(await upstream.one(id=continued.upstream_id))
    assert (record.finish_reason, record.final_outcome) == ("stop", "completed")
    html = (await client.get(reverse("chat:message", args=[continued.message.pk]))).content.decode()
    assert "finish-note" not in html
    assert "Continue with a larger budget" not in html


async def test_an_answer_cut_at_the_budget_says_so(alice: Any, emulator_url: EmulatorURL) -> None:
    tiny = await Gateway.objects.acreate(
        name="tiny-3b",
        base_url=f"{emulator_url}/tiny/v1",
        dialect="tiny",
        cost_unit="credits",
        api_key_encrypted=key_vault.encrypt("tiny-key"),
    )
    configs.forget_configs()
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:send_new"),
        {
            "content": "Why is the sea salty?",
            "model": catalog.choice_value(tiny.pk, "emulator/length"),
        },
        headers=HTMX,
    )
    assert response.status_code == 200
    await workers_finished()
    generation = await Generation.objects.select_related("message").aget()
    assert generation.finish_reason == "length"
    assert generation.message.content.startswith("Let me think")  # no reasoning field: aloud
    html = (
        await client.get(reverse("chat:message", args=[generation.message.pk]))
    ).content.decode()
    assert "The answer was cut off at the token budget" in html
    assert "Continue with a larger budget" not in html


# --- Branches: regenerate, edit, switch versions (views/branches.py) ------------------------------

BUSY = "An answer is still being written in this conversation; stop it or wait for it to finish."


async def answered_twice(user: Any) -> tuple[Conversation, list[Message]]:
    """A finished conversation "one" → "one" → "two" → "two" (echoed): its four messages."""
    first = await start_turn(user, "one", "emulator/echo")
    await asyncio.wait_for(worker.start(first.job), 30)
    second = await start_turn(user, "two", "emulator/echo", first.conversation.pk)
    await asyncio.wait_for(worker.start(second.job), 30)
    messages = [m async for m in Message.objects.filter(conversation=first.conversation)]
    return await Conversation.objects.aget(pk=first.conversation.pk), messages


def articles(html: str) -> list[str]:
    """The ids of the messages in `html`, in order."""
    return re.findall(r'<article class="message \w+" id="(message-\d+)"', html)


async def test_regenerate_answers_with_the_new_version_and_its_arrows(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    conversation, (one, re_one, _two, re_two) = await answered_twice(alice)
    client = await logged_in(alice)
    html = (await client.get(reverse("chat:conversation", args=[conversation.pk]))).content.decode()
    retry_url = reverse("chat:retry", args=[re_one.pk])
    assert (
        f'hx-post="{retry_url}" hx-include="#model, #image-count" hx-target="closest article"'
        in html
    )
    assert ">Regenerate</button>" in html  # every finished answer, not only failures
    assert f'hx-post="{reverse("chat:edit", args=[one.pk])}"' in html
    assert f'name="after" value="{re_two.pk}"' in html

    response = await client.post(retry_url, {"model": "emulator/chat"}, headers=HTMX)
    body = response.content.decode()
    new = await Message.objects.aget(parent=one, role="assistant", pk__gt=re_two.pk)
    assert articles(body) == [f"message-{new.pk}"]
    assert 'aria-label="Version 2 of 2"' in body
    assert f'hx-post="{reverse("chat:show_version", args=[re_one.pk])}"' in body
    await workers_finished()
    assert received[-1]["model"] == "emulator/chat"
    assert received[-1]["messages"] == [{"role": "user", "content": "one"}]
    page = (await client.get(reverse("chat:conversation", args=[conversation.pk]))).content
    assert articles(page.decode()) == [f"message-{one.pk}", f"message-{new.pk}"]
    # An answer's own render (fetched when it ends) keeps its arrows.
    fragment = (await client.get(reverse("chat:message", args=[new.pk]))).content.decode()
    assert 'aria-label="Version 2 of 2"' in fragment


async def test_edit_and_show_version_answer_with_the_branch_from_that_message(
    alice: Any, received: list[dict[str, Any]]
) -> None:
    conversation, (_one, _re_one, two, re_two) = await answered_twice(alice)
    client = await logged_in(alice)
    response = await client.post(
        reverse("chat:edit", args=[two.pk]),
        {"content": "deux", "model": "emulator/echo"},
        headers=HTMX,
    )
    deux = await Message.objects.aget(content="deux", role="user")
    answer = await Message.objects.aget(parent=deux)
    assert articles(response.content.decode()) == [f"message-{deux.pk}", f"message-{answer.pk}"]
    await workers_finished()
    assert received[-1]["messages"] == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "deux"},
    ]
    response = await client.post(reverse("chat:show_version", args=[two.pk]), headers=HTMX)
    body = response.content.decode()
    assert articles(body) == [f"message-{two.pk}", f"message-{re_two.pk}"]
    assert 'aria-label="Version 1 of 2"' in body
    assert 'aria-label="Next version"' in body
    conversation = await Conversation.objects.aget(pk=conversation.pk)
    assert conversation.current_leaf_id == re_two.pk
    # The composer's follow-up comes after the message the page shows (the edit's answer, in a
    # tab that has not switched back), not after the current leaf.
    await client.post(
        reverse("chat:send", args=[conversation.pk]),
        {"content": "after deux", "model": "emulator/echo", "after": answer.pk},
        headers=HTMX,
    )
    await workers_finished()
    assert (await Message.objects.aget(content="after deux", role="user")).parent_id == answer.pk


async def test_an_edit_is_checked_and_a_second_turn_is_refused_in_the_composer(
    alice: Any, upstream: UpstreamLog
) -> None:
    conversation, (one, re_one, two, _re_two) = await answered_twice(alice)
    client = await logged_in(alice)
    empty = await client.post(
        reverse("chat:edit", args=[two.pk]),
        {"content": " ", "model": "emulator/echo"},
        headers=HTMX,
    )
    assert empty["HX-Retarget"] == "#composer-error"
    assert empty.content.decode().strip() == "Write a message first."
    running = await start_turn(
        alice, "otters", "emulator/long?tokens_per_second=100", conversation.pk
    )
    task = worker.start(running.job)
    await upstream.one(scenario="long")
    requests = len(upstream.new())
    count = await Message.objects.filter(conversation=conversation).acount()
    for url, data in [
        (reverse("chat:send", args=[conversation.pk]), {"content": "and?"}),
        (reverse("chat:retry", args=[re_one.pk]), {}),
        (reverse("chat:edit", args=[two.pk]), {"content": "deux"}),
    ]:
        response = await client.post(url, {"model": "emulator/echo", **data}, headers=HTMX)
        assert response["HX-Retarget"] == "#composer-error", url
        # Marked as holding until the answer is done: the page clears it then (composer.js).
        assert response.content.decode().strip() == f"<span data-until-done>{BUSY}</span>"
    assert await Message.objects.filter(conversation=conversation).acount() == count
    # Switching versions is only what is shown: allowed meanwhile.
    response = await client.post(reverse("chat:show_version", args=[one.pk]), headers=HTMX)
    assert response.status_code == 200
    await client.post(reverse("chat:stop", args=[running.generation.pk]))
    await asyncio.wait_for(task, 10)
    assert len(upstream.new()) == requests  # none but the running answer's


async def test_branch_views_are_the_owners_only(alice: Any, bob: Any) -> None:
    conversation, (_one, re_one, two, re_two) = await answered_twice(alice)
    client = await logged_in(bob)
    for url in (reverse("chat:edit", args=[two.pk]), reverse("chat:show_version", args=[two.pk])):
        response = await client.post(url, {"content": "x", "model": "emulator/echo"}, headers=HTMX)
        assert response.status_code == 404, url
    response = await client.post(
        reverse("chat:send", args=[conversation.pk]),
        {"content": "x", "model": "emulator/echo", "after": re_one.pk},
    )
    assert response.status_code == 404
    owner = await logged_in(alice)
    assert (await owner.get(reverse("chat:show_version", args=[two.pk]))).status_code == 405
    assert (await owner.get(reverse("chat:edit", args=[two.pk]))).status_code == 405
    conversation = await Conversation.objects.aget(pk=conversation.pk)
    assert conversation.current_leaf_id == re_two.pk
    assert await Message.objects.filter(conversation=conversation).acount() == 4
