"""A conversation's answer settings from its header, and a user's defaults for new chats."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import AsyncClient, Client
from django.urls import reverse

from chatapp.assistants.models import ChatDefaults
from chatapp.conversations import request_options
from chatapp.conversations.models import Conversation
from chatapp.gateways import configs, key_vault
from chatapp.gateways.models import Gateway
from chatapp.tools.models import ToolSwitch
from chatapp.views.answer_settings import AnswerSettingsForm

pytestmark = [pytest.mark.django_db(transaction=True)]

HTMX = {"HX-Request": "true"}
EVERYTHING = {
    "system_prompt": "Answer in French.",
    "temperature": "0.7",
    "max_tokens": "2048",
    "reasoning_effort": "high",
}
EMPTY = {"system_prompt": "", "temperature": "", "max_tokens": "", "reasoning_effort": ""}
TEMPERATURE = "Temperature is a number from 0 to 2, in steps of 0.1 (e.g. 0.7)."
MAX_TOKENS = "Max tokens is a whole number from 1 to 1,000,000."


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def rendered(user: Any, url: str) -> str:
    """A page, through the async client: its model picker asks the gateways on this test's loop,
    whose clients are closed with it."""
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get(url)
    assert response.status_code == 200
    return response.text


def settings_url(conversation: Conversation) -> str:
    return reverse("chat:conversation_settings", args=[conversation.pk])


def applied(html: str) -> str:
    match = re.search(r'<p class="settings-applied[^"]*" role="status">([^<]*)</p>', html)
    assert match, "the header has the line of what applies"
    return match.group(1)


@pytest.fixture
def conversation(alice: Any) -> Conversation:
    default = configs.config_for(None)  # the emulator's Numes, as the default gateway
    return Conversation.objects.create(user=alice, title="Salt", gateway_id=default.pk)


async def test_the_header_offers_settings_and_says_what_applies(
    alice: Any, conversation: Conversation
) -> None:
    html = await rendered(alice, reverse("chat:conversation", args=[conversation.pk]))
    assert "<summary>Settings</summary>" in html
    assert applied(html) == "Gateway defaults"
    assert f'hx-post="{settings_url(conversation)}"' in html
    assert '<label for="settings-temperature">Temperature</label>' in html
    assert re.search(r'<input type="number" name="temperature"[^>]* step="0.1"', html)
    assert re.search(r'<input type="number" name="temperature"[^>]* min="0"[^>]* max="2"', html)
    assert '<option value="high">high</option>' in html
    assert '<details class="settings-menu">' in html, "closed until asked for"


def test_saving_applies_them_to_the_conversation_and_closes_the_form(
    alice: Any, conversation: Conversation
) -> None:
    before = conversation.updated_at
    response = signed_in(alice).post(settings_url(conversation), EVERYTHING, headers=HTMX)
    assert response.status_code == 200
    html = response.text
    assert html.lstrip().startswith('<div id="answer-settings"')
    assert applied(html) == "System prompt · temperature 0.7 · max 2,048 tokens · effort high"
    assert '<details class="settings-menu">' in html
    assert "Answer in French.</textarea>" in html
    assert 'value="0.7"' in html
    conversation.refresh_from_db()
    assert conversation.system_prompt == "Answer in French."
    assert conversation.temperature == 0.7
    assert conversation.max_tokens == 2048
    assert conversation.reasoning_effort == "high"
    assert conversation.updated_at == before, "settings do not move it up the sidebar"


def test_emptying_them_goes_back_to_the_gateways_defaults(
    alice: Any, conversation: Conversation
) -> None:
    client = signed_in(alice)
    client.post(settings_url(conversation), EVERYTHING, headers=HTMX)
    html = client.post(settings_url(conversation), EMPTY, headers=HTMX).text
    assert applied(html) == "Gateway defaults"
    conversation.refresh_from_db()
    assert (conversation.temperature, conversation.max_tokens) == (None, None)
    assert (conversation.system_prompt, conversation.reasoning_effort) == ("", "")


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("temperature", "2.5", TEMPERATURE),
        ("temperature", "-0.1", TEMPERATURE),
        ("temperature", "0.75", TEMPERATURE),
        ("temperature", "warm", TEMPERATURE),
        ("max_tokens", "0", MAX_TOKENS),
        ("max_tokens", "1.5", MAX_TOKENS),
        ("max_tokens", "2000000", MAX_TOKENS),
        ("reasoning_effort", "extreme", "Choose a reasoning effort from the list."),
        (
            "system_prompt",
            "x" * 100_001,
            "The system prompt is too long (at most 100,000 characters).",
        ),
    ],
)
def test_a_wrong_value_is_explained_and_nothing_is_saved(
    alice: Any, conversation: Conversation, field: str, value: str, error: str
) -> None:
    response = signed_in(alice).post(
        settings_url(conversation), {**EVERYTHING, field: value}, headers=HTMX
    )
    assert response.status_code == 200
    html = response.text
    assert '<details class="settings-menu" open>' in html, "left open to correct"
    assert f'<ul class="errorlist" id="settings-{field}_error"><li>{error}</li></ul>' in html
    assert re.search(rf'name="{field}"[^>]* aria-invalid="true"', html)
    assert applied(html) == "Gateway defaults"
    conversation.refresh_from_db()
    assert conversation.temperature is None


def test_an_effort_the_gateway_is_not_sent_says_so(alice: Any, emulator_url: str) -> None:
    osmexo = Gateway.objects.create(
        name="Osmexo",
        base_url=f"{emulator_url}/osmexo/v1",
        dialect="osmexo",
        cost_unit="micro_usd",
        api_key_encrypted=key_vault.encrypt("osmexo-key"),
    )
    configs.forget_configs()
    conversation = Conversation.objects.create(user=alice, gateway=osmexo)
    html = signed_in(alice).post(
        settings_url(conversation), {**EMPTY, "reasoning_effort": "low"}, headers=HTMX
    )
    assert applied(html.text) == "effort low (not sent: Osmexo takes none)"


def test_without_htmx_saving_returns_to_the_conversation(
    alice: Any, conversation: Conversation
) -> None:
    response = signed_in(alice).post(settings_url(conversation), EVERYTHING)
    assert response.status_code == 302
    assert response["Location"] == reverse("chat:conversation", args=[conversation.pk])
    conversation.refresh_from_db()
    assert conversation.max_tokens == 2048


def test_only_the_owner_can_change_them(bob: Any, conversation: Conversation) -> None:
    response = signed_in(bob).post(settings_url(conversation), EVERYTHING, headers=HTMX)
    assert response.status_code == 404
    conversation.refresh_from_db()
    assert conversation.max_tokens is None


def test_they_need_sign_in_and_a_post(alice: Any, conversation: Conversation) -> None:
    response = Client().post(settings_url(conversation), EVERYTHING)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert signed_in(alice).get(settings_url(conversation)).status_code == 405


# --- Defaults for new chats ------------------------------------------------------------------


async def test_the_sidebar_links_to_the_defaults(alice: Any) -> None:
    html = await rendered(alice, reverse("chat:home"))
    assert f'<a href="{reverse("chat:defaults")}">Chat defaults</a>' in html


def test_defaults_are_saved_per_user_and_shown_again(alice: Any, bob: Any) -> None:
    client = signed_in(alice)
    page = client.get(reverse("chat:defaults")).text
    assert "<h1>Defaults for new chats</h1>" in page
    assert "Now: Gateway defaults" in page
    response = client.post(reverse("chat:defaults"), EVERYTHING)
    assert response.status_code == 302
    assert response["Location"] == reverse("chat:defaults")
    page = client.get(reverse("chat:defaults")).text
    assert "Saved. New chats start with these settings." in page
    assert "Now: System prompt · temperature 0.7 · max 2,048 tokens · effort high" in page
    assert "Answer in French.</textarea>" in page
    client.post(reverse("chat:defaults"), {**EVERYTHING, "temperature": "1.2"})
    (row,) = ChatDefaults.objects.all()
    assert (row.user, row.temperature, row.max_tokens) == (alice, 1.2, 2048)
    assert "Now: Gateway defaults" in signed_in(bob).get(reverse("chat:defaults")).text


def test_wrong_defaults_are_explained_and_not_saved(alice: Any) -> None:
    response = signed_in(alice).post(reverse("chat:defaults"), {**EVERYTHING, "max_tokens": "-5"})
    assert response.status_code == 200
    assert f"<li>{MAX_TOKENS}</li>" in response.text
    assert not ChatDefaults.objects.exists()


def test_the_defaults_page_needs_sign_in() -> None:
    response = Client().get(reverse("chat:defaults"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_two_first_saves_of_the_defaults_make_one_row(alice: Any) -> None:
    # Two requests that both found no row: the second save must update, not fail on the
    # one-row-per-user constraint.
    first, second = ChatDefaults(user=alice), ChatDefaults(user=alice)
    for row, temperature in ((first, "0.3"), (second, "0.9")):
        form = AnswerSettingsForm({"temperature": temperature}, user_pk=None)
        assert form.is_valid(), form.errors
        form.save_to(row)
    assert ChatDefaults.objects.filter(user=alice).count() == 1
    assert ChatDefaults.objects.get(user=alice).temperature == 0.9


# --- Tools -----------------------------------------------------------------------------------


def tool_boxes(html: str) -> list[tuple[str, bool]]:
    """The Tools checkboxes shown: each one's value and whether it is ticked."""
    tags = re.findall(r'<input type="checkbox" name="tools" value="[^"]+"[^>]*>', html)
    return [(re.findall(r'value="([^"]+)"', tag)[0], " checked" in tag) for tag in tags]


def test_the_tools_are_listed_with_what_they_do_and_saved_by_name(
    alice: Any, conversation: Conversation
) -> None:
    client = signed_in(alice)
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).text
    assert tool_boxes(page) == [
        ("calculator", False),
        ("current_time", False),
        ("search_conversations", False),
    ]
    assert "<legend>Tools</legend>" in page
    assert "<strong>Calculator</strong>" in page
    assert "Exact arithmetic, powers, roots, logarithms and trigonometry." in page
    chosen = {**EMPTY, "tools": ["calculator", "current_time"]}
    html = client.post(settings_url(conversation), chosen, headers=HTMX).text
    assert applied(html) == "tools: calculator, date and time"
    assert tool_boxes(html) == [
        ("calculator", True),
        ("current_time", True),
        ("search_conversations", False),
    ]
    conversation.refresh_from_db()
    assert conversation.tools == ["calculator", "current_time"]
    html = client.post(settings_url(conversation), EMPTY, headers=HTMX).text
    assert applied(html) == "Gateway defaults"
    conversation.refresh_from_db()
    assert conversation.tools == []


def test_unknown_tool_names_are_dropped_on_save(alice: Any, conversation: Conversation) -> None:
    chosen = {**EMPTY, "tools": ["calculator", "rm_rf", "calculator"]}
    response = signed_in(alice).post(settings_url(conversation), chosen, headers=HTMX)
    assert applied(response.text) == "tools: calculator"
    conversation.refresh_from_db()
    assert conversation.tools == ["calculator"]


def test_a_tool_switched_off_is_not_listed_applied_or_saved(
    alice: Any, conversation: Conversation
) -> None:
    conversation.tools = ["calculator", "search_conversations"]
    conversation.save()
    ToolSwitch.objects.create(name="calculator", enabled=False)
    client = signed_in(alice)
    page = client.get(reverse("chat:conversation", args=[conversation.pk])).text
    assert tool_boxes(page) == [("current_time", False), ("search_conversations", True)]
    assert applied(page) == "tools: search my conversations"
    chosen = {**EMPTY, "tools": ["calculator", "search_conversations"]}
    client.post(settings_url(conversation), chosen, headers=HTMX)
    conversation.refresh_from_db()
    assert conversation.tools == ["search_conversations"]


def test_with_every_tool_switched_off_there_is_no_tools_control(
    alice: Any, conversation: Conversation
) -> None:
    for name in ("current_time", "calculator", "search_conversations"):
        ToolSwitch.objects.create(name=name, enabled=False)
    page = signed_in(alice).get(reverse("chat:conversation", args=[conversation.pk])).text
    assert tool_boxes(page) == []
    assert "<legend>Tools</legend>" not in page


def test_tools_on_a_gateway_that_takes_none_say_so(alice: Any, emulator_url: str) -> None:
    tiny = Gateway.objects.create(
        name="tiny-3b",
        base_url=f"{emulator_url}/tiny/v1",
        dialect="tiny",
        cost_unit="micro_usd",
        api_key_encrypted=key_vault.encrypt("tiny-key"),
    )
    configs.forget_configs()
    conversation = Conversation.objects.create(user=alice, gateway=tiny)
    html = signed_in(alice).post(
        settings_url(conversation), {**EMPTY, "tools": ["calculator"]}, headers=HTMX
    )
    assert applied(html.text) == "tools: calculator (not sent: tiny-3b takes none)"


def test_default_tools_are_saved_and_a_new_chat_starts_with_them(alice: Any) -> None:
    client = signed_in(alice)
    client.post(reverse("chat:defaults"), {**EMPTY, "tools": ["search_conversations"]})
    page = client.get(reverse("chat:defaults")).text
    assert "Now: tools: search my conversations" in page
    assert ("search_conversations", True) in tool_boxes(page)
    assert ChatDefaults.objects.get(user=alice).tools == ["search_conversations"]
    assert request_options.defaults_for(alice)["tools"] == ["search_conversations"]


def test_the_system_prompt_invites_one_rather_than_saying_none(
    alice: Any, conversation: Conversation
) -> None:
    client = signed_in(alice)
    for page in (
        client.get(reverse("chat:defaults")).text,
        client.get(reverse("chat:conversation", args=[conversation.pk])).text,
    ):
        (placeholder,) = re.findall(
            r'<textarea name="system_prompt"[^>]*placeholder="([^"]*)"', page
        )
        assert placeholder == "Optional, e.g. Answer briefly, in plain English."
