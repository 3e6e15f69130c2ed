"""The sidebar's date groups and its rename and delete, a follow-up moving a conversation to the
top, export as Markdown and JSON, and the site icon."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import re
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import pytest
from django.test import AsyncClient, Client
from django.urls import reverse
from django.utils import timezone

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation
from chatapp.gateways.models import Gateway
from chatapp.rendering import attachments
from chatapp.streaming import worker
from chatapp.views.library import date_group
from tests.chatapp.conftest import start_turn

HTMX = {"HX-Request": "true"}


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def on_page_of(pk: int | None) -> dict[str, str]:
    """The headers of an htmx request sent from the page of conversation `pk` (None: home)."""
    path = reverse("chat:conversation", args=[pk]) if pk else reverse("chat:home")
    return {**HTMX, "HX-Current-URL": f"http://testserver{path}"}


def made(user: Any, title: str, days_ago: float = 0) -> Conversation:
    conversation = Conversation.objects.create(user=user, title=title)
    Message.objects.create(conversation=conversation, role=Message.Role.USER, content=title)
    when = timezone.now() - datetime.timedelta(days=days_ago)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=when)
    return conversation


# --- Date groups ------------------------------------------------------------------------------


def test_a_conversation_is_grouped_by_its_last_days_date_in_the_servers_time_zone(
    settings: Any,
) -> None:
    settings.TIME_ZONE = "America/New_York"
    today = datetime.date(2026, 12, 10)
    utc = datetime.UTC

    def group(*when: int) -> str:
        return date_group(datetime.datetime(*when, tzinfo=utc), today)

    assert group(2026, 12, 10, 15) == "today"
    assert group(2026, 12, 10, 3) == "yesterday"  # 22:00 on the 9th in New York
    assert group(2026, 12, 8, 12) == "week"
    assert group(2026, 12, 3, 12) == "week"  # 7 days before
    assert group(2026, 12, 2, 12) == "older"
    assert group(2026, 12, 11, 12) == "today"  # a clock ahead of ours is not the future


@pytest.mark.django_db
def test_the_sidebar_groups_conversations_by_date_newest_first(alice: Any, bob: Any) -> None:
    made(alice, "ancient", days_ago=40)
    made(alice, "last week", days_ago=4)
    made(alice, "yesterday's", days_ago=1)
    # Earlier today, whatever the hour the test runs at (14 minutes ago was yesterday at 00:10).
    since_midnight = timezone.localtime() - timezone.localtime().replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    shown = made(
        alice, "this morning", days_ago=min(0.01, since_midnight / 2 / datetime.timedelta(days=1))
    )
    made(alice, "just now")
    made(bob, "bob's")
    html = client_for(alice).get(reverse("chat:conversation", args=[shown.pk])).content.decode()
    headings = re.findall(r'<h2 class="date-heading" id="date-group-(\w+)">([^<]+)</h2>', html)
    assert headings == [
        ("today", "Today"),
        ("yesterday", "Yesterday"),
        ("week", "Previous 7 days"),
        ("older", "Older"),
    ]
    titles = re.findall(r'id="conversation-link-\d+">([^<]+)</a>', html)
    assert titles == ["just now", "this morning", "yesterday&#x27;s", "last week", "ancient"]
    today = html[html.index('id="conversation-list"') : html.index('id="date-group-yesterday"')]
    assert "just now" in today
    assert "this morning" in today
    assert f'<li class="current" aria-current="page" id="conversation-item-{shown.pk}">' in html
    assert "bob&#x27;s" not in html  # not "bob": the message box is a combobox


@pytest.mark.django_db
def test_with_no_conversation_the_list_says_so_and_today_is_ready(alice: Any) -> None:
    html = client_for(alice).get(reverse("chat:home")).content.decode()
    assert '<ul id="conversation-list" class="conversation-list"' in html
    assert '<li class="empty">No conversations yet.</li>' in html
    assert "date-group-yesterday" not in html


# --- Rename and delete from the sidebar --------------------------------------------------------


@pytest.mark.django_db
def test_renaming_the_conversation_on_screen_renames_its_tab_too(alice: Any) -> None:
    shown = made(alice, "old name")
    response = client_for(alice).post(
        reverse("chat:rename", args=[shown.pk]), {"title": "New name"}, headers=on_page_of(shown.pk)
    )
    html = response.content.decode()
    assert html.strip().startswith('<h1 id="conversation-title">New name</h1>')
    assert "<title>New name · Gateway Chat</title>" in html
    groups = '<div id="conversation-groups" class="conversation-groups" hx-boost="true"'
    assert f'{groups} hx-swap-oob="true">' in html
    assert f'<li class="current" aria-current="page" id="conversation-item-{shown.pk}">' in html


@pytest.mark.django_db
def test_renaming_another_conversation_leaves_the_page_and_its_tab_alone(alice: Any) -> None:
    shown = made(alice, "on screen")
    other = made(alice, "elsewhere")
    response = client_for(alice).post(
        reverse("chat:rename", args=[other.pk]), {"title": "Renamed"}, headers=on_page_of(shown.pk)
    )
    html = response.content.decode()
    assert "<title>" not in html
    assert f'id="conversation-link-{other.pk}">Renamed</a>' in html
    assert f'<li class="current" aria-current="page" id="conversation-item-{shown.pk}">' in html
    assert f'<li id="conversation-item-{other.pk}">' in html
    # Its menu's form swaps nothing in: only the out-of-band list changes the page.
    item = html[html.index(f'id="conversation-item-{other.pk}"') :]
    assert re.match(r'[^<]*<a[^>]*>[^<]*</a>\s*<details class="item-menu">', item)
    assert 'hx-swap="none"' in item.split("</li>")[0]


@pytest.mark.django_db(transaction=True)
def test_deleting_another_conversation_from_the_sidebar_keeps_the_page(alice: Any) -> None:
    shown = made(alice, "on screen")
    other = made(alice, "to delete")
    client = client_for(alice)
    response = client.post(
        reverse("chat:delete_entry", args=[other.pk]), headers=on_page_of(shown.pk)
    )
    assert response.status_code == 200
    assert "HX-Redirect" not in response
    assert response.content.decode() == (
        f'<div hx-swap-oob="delete:#conversation-item-{other.pk}"></div>'
    )
    assert not Conversation.objects.filter(pk=other.pk).exists()
    # The one on screen leaves its page, as from the header.
    response = client.post(
        reverse("chat:delete_entry", args=[shown.pk]), headers=on_page_of(shown.pk)
    )
    assert response["HX-Redirect"] == reverse("chat:home")
    assert not Conversation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_nobody_renames_or_deletes_anothers_conversation(alice: Any, bob: Any) -> None:
    theirs = made(alice, "alice's")
    client = client_for(bob)
    for name in ("rename", "delete_entry"):
        response = client.post(
            reverse(f"chat:{name}", args=[theirs.pk]), {"title": "x"}, headers=HTMX
        )
        assert response.status_code == 404
    assert Conversation.objects.get(pk=theirs.pk).title == "alice's"


# --- A follow-up moves its conversation to the top ------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_follow_up_moves_its_conversation_to_the_top_of_today(alice: Any) -> None:
    started = await start_turn(alice, "first question", "emulator/echo")
    await asyncio.wait_for(worker.start(started.job), 30)
    client = AsyncClient()
    await client.aforce_login(alice)
    pk = started.conversation.pk
    response = await client.post(
        reverse("chat:send", args=[pk]),
        {"content": "a follow-up", "model": "emulator/echo"},
        headers=on_page_of(pk),
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'class="message user"' in html
    moved = html[html.index(f'<div hx-swap-oob="delete:#conversation-item-{pk}"></div>') :]
    assert moved.split("\n", 1)[1].startswith(
        '<ul hx-swap-oob="afterbegin:#conversation-list">'
        f'<li class="current" aria-current="page" id="conversation-item-{pk}">'
    )
    assert f'id="conversation-link-{pk}">first question</a>' in moved
    await asyncio.wait_for(asyncio.gather(*list(worker._tasks)), 30)


# --- Export -----------------------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 24).decode()
PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()


@pytest.fixture
def recorded(alice: Any) -> Conversation:
    """A conversation with two versions of its answer, the first one shown, and everything a
    message and a generation can hold."""
    gateway = Gateway.objects.create(
        name="Numes", base_url="https://numes.example/api/v1", cost_unit="usd"
    )
    conversation = Conversation.objects.create(
        user=alice,
        title="Otters: a *field* guide",
        gateway=gateway,
        model="numes/otter-1",
        system_prompt="Be brief.",
        temperature=0.3,
    )
    question = Message.objects.create(
        conversation=conversation, role="user", content="Where do sea otters sleep?"
    )
    shown = Message.objects.create(
        conversation=conversation,
        role="assistant",
        parent=question,
        content="In kelp forests, wrapped in kelp [1].\n\n```py\nprint('```')\n```",
        reasoning="They float.\nThey hold hands.",
        reasoning_details=[{"type": "reasoning.text", "text": "They float.", "signature": "s1"}],
        tool_calls=[{"index": 0, "id": "call_1", "name": "lookup", "arguments": '{"q": "otters"}'}],
        annotations=[
            {
                "type": "url_citation",
                "url": "https://example.org/otters?a=1",
                "title": "Otters [wiki]",
            },
            {"type": "url_citation", "url": "javascript:alert(1)", "title": "Not a link"},
        ],
        attachments=[
            {"kind": "image_url", "url": f"data:image/png;base64,{PNG}"},
            {"kind": "image_url", "url": "https://example.org/otter.png"},
            {
                "kind": "file",
                "artifact_type": "document",
                "filename": "otters.pdf",
                "media_type": "application/pdf",
                "data": PDF,
            },
        ],
    )
    Generation.objects.create(
        message=shown,
        conversation=conversation,
        gateway=gateway,
        model="numes/otter-1",
        dialect="numes",
        status="completed",
        upstream_id="gen-shown-1",
        request_id="req-1",
        served_model="otter-1-2026",
        finish_reason="stop",
        prompt_tokens=12,
        completion_tokens=34,
        reasoning_tokens=5,
        cached_tokens=2,
        usage={"prompt_tokens": 12, "completion_tokens": 34, "cost": 0.00013},
        cost=Decimal("0.000130000000000"),
        cost_unit="usd",
        cost_source="stream",
        first_token_at=timezone.now(),
        ttft_ms=210,
        thinking_ms=900,
        finished_at=timezone.now(),
        warnings=["unread_parts"],
    )
    hidden = Message.objects.create(
        conversation=conversation, role="assistant", parent=question, content="A hidden version."
    )
    Generation.objects.create(
        message=hidden,
        conversation=conversation,
        gateway=gateway,
        model="numes/otter-2",
        status="failed",
        error_status=429,
        error_code="rate_limited",
        error_message="Slow down",
        retry_after=2.5,
        cost_source="not_billed",
        cost_note="refused before the answer began",
        finished_at=timezone.now(),
    )
    Conversation.objects.filter(pk=conversation.pk).update(current_leaf=shown)
    return Conversation.objects.get(pk=conversation.pk)


def when(value: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(value) if value is not None else None


def as_held(item: dict[str, Any]) -> dict[str, Any]:
    """An attachment as the export describes it, from what the database holds."""
    described = {key: value for key, value in item.items() if key not in ("data", "url")}
    url = item.get("url", "")
    if url.startswith("data:"):
        described["media_type"] = "image/png"
        described["bytes"] = len(base64.b64decode(url.split(",", 1)[1]))
    elif url:
        described["url"] = url
    if "data" in item:
        described["bytes"] = len(attachments.decoded(item) or b"")
    return described


@pytest.mark.django_db
def test_the_json_export_reads_back_as_what_the_database_holds(
    alice: Any, recorded: Conversation
) -> None:
    response = client_for(alice).get(reverse("chat:export_json", args=[recorded.pk]))
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == (
        f'attachment; filename="otters-a-field-guide-{recorded.pk}.json"'
    )
    exported = json.loads(response.content)
    assert exported["format"] == "gateway-chat/conversation@1"
    head = exported["conversation"]
    assert head["id"] == recorded.pk
    assert head["title"] == recorded.title
    assert when(head["created_at"]) == recorded.created_at
    assert when(head["updated_at"]) == recorded.updated_at
    assert (head["gateway"], head["model"]) == ("Numes", recorded.model)
    assert head["current_leaf"] == recorded.current_leaf_id
    assert head["settings"] == {
        "system_prompt": "Be brief.",
        "temperature": 0.3,
        "max_tokens": None,
        "reasoning_effort": "",
    }
    held = list(recorded.messages.order_by("created_at", "id"))
    assert [m["id"] for m in exported["messages"]] == [m.pk for m in held]
    for out, message in zip(exported["messages"], held, strict=True):
        assert out["parent"] == message.parent_id
        assert out["role"] == message.role
        assert when(out["created_at"]) == message.created_at
        assert out["content"] == message.content
        assert out["reasoning"] == message.reasoning
        assert out["reasoning_details"] == message.reasoning_details
        assert out["tool_calls"] == message.tool_calls
        assert out["citations"] == message.annotations
        assert out["attachments"] == [as_held(item) for item in message.attachments]
        generation = Generation.objects.filter(message=message).select_related("gateway").first()
        if generation is None:
            assert out["generation"] is None
            continue
        g = out["generation"]
        for field in (
            "dialect",
            "model",
            "served_model",
            "upstream_id",
            "request_id",
            "status",
            "finish_reason",
            "max_tokens",
            "ttft_ms",
            "thinking_ms",
            "warnings",
        ):
            assert g[field] == getattr(generation, field), field
        assert g["gateway"] == generation.gateway.name
        assert g["usage"] == {
            "prompt_tokens": generation.prompt_tokens,
            "completion_tokens": generation.completion_tokens,
            "reasoning_tokens": generation.reasoning_tokens,
            "cached_tokens": generation.cached_tokens,
            "reported": generation.usage,
        }
        amount = g["cost"]["amount"]
        assert (Decimal(amount) if amount is not None else None) == generation.cost
        assert g["cost"]["unit"] == generation.cost_unit
        assert g["cost"]["source"] == generation.cost_source
        assert g["cost"]["note"] == generation.cost_note
        for field in ("started_at", "first_token_at", "finished_at"):
            assert when(g[field]) == getattr(generation, field), field
        if generation.error_status:
            assert g["error"] == {
                "status": generation.error_status,
                "code": generation.error_code,
                "type": generation.error_type,
                "message": generation.error_message,
                "retry_after": generation.retry_after,
            }
        else:
            assert g["error"] is None
    # No attachment's bytes are in the file.
    assert PNG not in response.content.decode()
    assert PDF not in response.content.decode()
    assert exported["messages"][1]["generation"]["cost"]["amount"] == "0.00013"


@pytest.mark.django_db
def test_the_markdown_export_is_the_branch_shown_with_its_record(
    alice: Any, recorded: Conversation
) -> None:
    response = client_for(alice).get(reverse("chat:export_markdown", args=[recorded.pk]))
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="otters-a-field-guide-{recorded.pk}.md"'
    )
    assert response["X-Content-Type-Options"] == "nosniff"
    text = response.content.decode()
    assert text.startswith("# Otters: a *field* guide\n")
    assert "The branch shown: 2 of 3 messages (the JSON export has every branch)." in text
    assert "\n\nWhere do sea otters sleep?\n" in text
    assert "\n\nIn kelp forests, wrapped in kelp [1].\n\n```py\nprint('```')\n```\n" in text
    assert "> **Thinking**\n>\n> They float.\n> They hold hands.\n" in text
    assert 'Tool call `lookup`:\n\n```\n{"q": "otters"}\n```' in text
    assert "1. [Otters \\[wiki\\]](<https://example.org/otters?a=1>)\n2. Not a link\n" in text
    assert "- image (image/png, 32 bytes)\n" in text
    assert "- image <https://example.org/otter.png>\n" in text
    assert "- file `otters.pdf` (application/pdf, 13 bytes)\n" in text
    assert "- Model: `numes/otter-1` (served as `otter-1-2026`) via Numes\n" in text
    assert "- Generation ID: `gen-shown-1`\n- Request ID: `req-1`\n" in text
    assert "- Tokens: 12 in, 34 out (5 reasoning), 2 cached\n" in text
    assert "- Cost: $0.00013 (US dollars; usage chunk)\n" in text
    assert "hidden version" not in text  # the other branch is in the JSON only
    assert PNG not in text


@pytest.mark.django_db
def test_exports_are_the_owners_only(alice: Any, bob: Any, recorded: Conversation) -> None:
    for name in ("chat:export_json", "chat:export_markdown"):
        url = reverse(name, args=[recorded.pk])
        assert client_for(bob).get(url).status_code == 404
        anonymous = Client().get(url)
        assert anonymous.status_code == 302
        assert anonymous["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_the_headers_menu_offers_both_exports(alice: Any, recorded: Conversation) -> None:
    html = client_for(alice).get(reverse("chat:conversation", args=[recorded.pk])).content.decode()
    menu = html[html.index('<details class="conversation-actions">') :].split("</details>")[0]
    assert "<summary>More</summary>" in menu
    assert (
        f'<a href="{reverse("chat:export_markdown", args=[recorded.pk])}" download>Markdown</a>'
        in menu
    )
    assert f'<a href="{reverse("chat:export_json", args=[recorded.pk])}" download>JSON</a>' in menu


@pytest.mark.django_db
def test_a_title_with_no_ascii_gives_a_plain_file_name(alice: Any) -> None:
    conversation = made(alice, "Выдры/../..")
    response = client_for(alice).get(reverse("chat:export_json", args=[conversation.pk]))
    assert (
        response["Content-Disposition"]
        == f'attachment; filename="conversation-{conversation.pk}.json"'
    )
    assert quote("..") not in response["Content-Disposition"]


# --- The first screen and the icon ----------------------------------------------------------------


@pytest.mark.django_db
def test_a_new_chat_says_what_to_do_and_which_model_answers(alice: Any) -> None:
    html = client_for(alice).get(reverse("chat:home")).content.decode()
    assert "press Enter to send it (Shift+Enter starts a new line)" in html
    assert "It goes to <strong data-selected-model>Emulator: chat</strong>" in html


@pytest.mark.django_db
def test_pages_name_their_icon_and_favicon_ico_leads_to_it(alice: Any) -> None:
    html = client_for(alice).get(reverse("chat:home")).content.decode()
    assert '<link rel="icon" href="/static/chatapp/icon.svg" type="image/svg+xml">' in html
    response = Client().get("/favicon.ico")
    assert response.status_code == 302
    assert response["Location"] == "/static/chatapp/icon.svg"


@pytest.mark.django_db
def test_an_answer_cut_off_in_a_code_block_does_not_swallow_the_rest(alice: Any) -> None:
    conversation = made(alice, "cut")
    question = conversation.messages.get()
    answer = Message.objects.create(
        conversation=conversation,
        role="assistant",
        parent=question,
        content="Here:\n\n```py\nprint(1)",
    )
    Generation.objects.create(
        message=answer,
        conversation=conversation,
        model="m",
        status="cancelled",
        cost_source="pending",
    )
    text = client_for(alice).get(reverse("chat:export_markdown", args=[conversation.pk])).content
    assert (
        "```py\nprint(1)\n```\n\nGeneration:\n\n- Model: `m`\n- Status: cancelled\n"
        in text.decode()
    )


@pytest.mark.django_db
def test_an_answers_headings_are_sections_of_its_assistant_heading(alice: Any) -> None:
    conversation = made(alice, "headings")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        parent=conversation.messages.get(),
        content=(
            "# Title\n\nText\n## Part ##\n##### Five\n###### Six\n#tag\n\n"
            "A setext\ntitle\n===\n\nA part\n---\n\n- a list\n---\n\n"
            "```md\n# Kept\nas code\n===\n```\n    # indented code"
        ),
    )
    text = client_for(alice).get(reverse("chat:export_markdown", args=[conversation.pk])).content
    answer = text.decode().split("## Assistant · ")[1].split("\n\n", 1)[1]
    assert answer == (
        "### Title\n\nText\n#### Part ##\n###### Five\n###### Six\n#tag\n\n"
        "### A setext title\n\n#### A part\n\n- a list\n---\n\n"
        "```md\n# Kept\nas code\n===\n```\n    # indented code\n"
    )
