"""The admin cannot erase or rewrite the cost ledger, through its own URLs: no generation is
added, changed or deleted (one by one or in bulk), nor a folded daily total; an answer's
content, reasoning, tool calls, annotations, attachments, role and place stay as recorded; no
message's stored render is in the form; a conversation keeps its owner.

Each refusal has its control: the same admin edits what is not the record (a question's text,
a conversation's title), so a refusal means the record was refused, not that the form was wrong.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from chatapp.conversations.models import Conversation, Message
from chatapp.costs.models import Generation, LedgerDay
from chatapp.gateways.models import Gateway, ModelPrice

pytestmark = pytest.mark.django_db

CALLS = [{"index": 0, "id": "c1", "name": "calculator", "arguments": "{}"}]


@pytest.fixture
def admin(admin_user: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def numes(db: None) -> Gateway:
    return Gateway.objects.create(name="Numes", base_url="https://n.example", cost_unit="usd")


@pytest.fixture
def answered(alice: Any, numes: Gateway) -> Generation:
    conversation = Conversation.objects.create(user=alice, gateway=numes, title="Trip")
    question = Message.objects.create(conversation=conversation, role="user", content="Hi")
    answer = Message.objects.create(
        conversation=conversation,
        role="assistant",
        parent=question,
        content="The answer",
        tool_calls=CALLS,
    )
    return Generation.objects.create(
        message=answer,
        conversation=conversation,
        gateway=numes,
        model="numes/a",
        status="completed",
        upstream_id="gen-1",
        cost=Decimal("0.0001708"),
        cost_unit="usd",
        cost_source="stream",
    )


def _form(client: Client, url: str) -> dict[str, Any]:
    """The change form's own fields as the page would post them (inlines included)."""
    form = client.get(url).context["adminform"].form
    data: dict[str, Any] = {}
    for name, field in form.fields.items():
        value = form.initial.get(name, field.initial)
        data[name] = "" if value is None else value
    for formset in client.get(url).context["inline_admin_formsets"]:
        management = formset.formset.management_form
        for name in management.fields:
            data[f"{management.prefix}-{name}"] = management.initial.get(name, 0)
        for index, inline in enumerate(formset.formset.forms):
            data[f"{formset.formset.prefix}-{index}-id"] = inline.instance.pk
            data[f"{formset.formset.prefix}-{index}-conversation"] = inline.instance.conversation_id
    return data


def test_a_generation_cannot_be_deleted_one_by_one_or_in_bulk(
    admin: Client, answered: Generation
) -> None:
    delete = f"/admin/chatapp/generation/{answered.pk}/delete/"

    assert admin.get(delete).status_code == 403
    assert admin.post(delete, {"post": "yes"}).status_code == 403
    bulk = admin.post(
        "/admin/chatapp/generation/",
        {"action": "delete_selected", "_selected_action": [answered.pk], "post": "yes"},
    )

    assert bulk.status_code in (200, 302)
    assert Generation.objects.filter(pk=answered.pk).exists()
    listed = admin.get("/admin/chatapp/generation/").content.decode()
    assert 'value="delete_selected"' not in listed
    assert (
        "/delete/"
        not in admin.get(f"/admin/chatapp/generation/{answered.pk}/change/").content.decode()
    )


def test_a_generation_cannot_be_added_or_changed(admin: Client, answered: Generation) -> None:
    change = f"/admin/chatapp/generation/{answered.pk}/change/"

    assert admin.get("/admin/chatapp/generation/add/").status_code == 403
    forged = {"cost": "9", "upstream_id": "forged", "user": "", "user_name": "mallory"}
    assert admin.post(change, forged).status_code == 403

    answered.refresh_from_db()
    assert (answered.cost, answered.upstream_id, answered.user_name) == (
        Decimal("0.0001708"),
        "gen-1",
        "alice",
    )
    page = admin.get(change).content.decode()
    assert "$0.0001708" in page, "the amount reads as an amount beside the stored decimal"


def test_an_answers_record_is_read_only_and_a_question_is_not(
    admin: Client, answered: Generation, bob: Any
) -> None:
    assert answered.message is not None
    answer_url = f"/admin/chatapp/message/{answered.message.pk}/change/"
    other = Conversation.objects.create(user=bob, title="Bob's")
    forged = {
        **_form(admin, answer_url),
        "conversation": other.pk,
        "role": "user",
        "content": "Rewritten",
        "tool_calls": "[]",
        "reasoning": "Rewritten",
        "reasoning_details": '[{"type": "reasoning.text", "text": "Rewritten"}]',
        "annotations": '[{"type": "url_citation", "url": "https://evil.example"}]',
        "attachments": '[{"kind": "image_url", "url": "https://evil.example/x.png"}]',
        "parent": "",
        "html": "<script>alert(1)</script>",
        "html_key": "forged",
    }

    assert admin.post(answer_url, forged).status_code == 302

    answer = Message.objects.get(pk=answered.message.pk)
    assert (answer.conversation_id, answer.role) == (answered.conversation_id, "assistant")
    assert (answer.content, answer.tool_calls) == ("The answer", CALLS)
    assert (answer.reasoning, answer.reasoning_details) == ("", [])
    assert (answer.annotations, answer.attachments) == ([], [])
    assert (answer.html, answer.html_key) == ("", "")
    question = answer.parent
    assert question is not None
    assert question.pk == answered.message.parent_id, "an answer keeps its place"
    question_url = f"/admin/chatapp/message/{question.pk}/change/"
    edited = {**_form(admin, question_url), "content": "Hello there"}
    assert admin.post(question_url, edited).status_code == 302
    assert Message.objects.get(pk=question.pk).content == "Hello there"


def test_an_answers_stored_render_is_not_in_the_admins_form(
    admin: Client, answered: Generation
) -> None:
    """`html` is served as it is: a field for it would let the admin write raw HTML into a page."""
    assert answered.message is not None
    Message.objects.filter(pk=answered.message.pk).update(html="<p>The answer</p>", html_key="k")
    for message in (answered.message.parent, answered.message):
        assert message is not None
        url = f"/admin/chatapp/message/{message.pk}/change/"
        page = admin.get(url)
        assert {"html", "html_key"}.isdisjoint(page.context["adminform"].form.fields)
        assert 'name="html"' not in page.content.decode()
    forged = {**_form(admin, url), "html": "<script>alert(1)</script>", "html_key": "forged"}
    assert admin.post(url, forged).status_code == 302
    answer = Message.objects.get(pk=answered.message.pk)
    assert (answer.html, answer.html_key) == ("<p>The answer</p>", "k")


def test_a_conversation_keeps_its_owner_and_its_answers_text(
    admin: Client, answered: Generation, alice: Any, bob: Any
) -> None:
    url = f"/admin/chatapp/conversation/{answered.conversation_id}/change/"
    data = {**_form(admin, url), "user": bob.pk, "title": "Renamed"}
    for key in list(data):
        if key.endswith("-content"):
            data[key] = "Rewritten in the inline"

    assert admin.post(url, data).status_code == 302

    conversation = Conversation.objects.get(pk=answered.conversation_id)
    assert (conversation.user_id, conversation.title) == (alice.pk, "Renamed")
    assert set(conversation.messages.values_list("content", flat=True)) == {"Hi", "The answer"}
    answered.refresh_from_db()
    assert answered.user_id == alice.pk


def test_folded_daily_totals_cannot_be_deleted(admin: Client, answered: Generation) -> None:
    day = LedgerDay.objects.create(
        day=answered.started_at.date(),
        model="numes/a",
        kind="chat",
        status="completed",
        cost_unit="usd",
        cost_source="stream",
        generations=3,
        priced=3,
        cost_high=1708,
    )

    assert admin.get(f"/admin/chatapp/ledgerday/{day.pk}/delete/").status_code == 403
    admin.post(
        "/admin/chatapp/ledgerday/",
        {"action": "delete_selected", "_selected_action": [day.pk], "post": "yes"},
    )
    assert admin.get("/admin/chatapp/ledgerday/add/").status_code == 403

    assert LedgerDay.objects.filter(pk=day.pk).exists()
    assert "$0.0001708" in admin.get("/admin/chatapp/ledgerday/").content.decode()


def test_prices_read_as_amounts_in_their_unit(admin: Client, numes: Gateway) -> None:
    sats = Gateway.objects.create(name="BTC", base_url="https://b.example", cost_unit="sat")
    ModelPrice.objects.create(
        gateway=numes, model="numes/a", prompt=Decimal("0.0001708"), completion=Decimal("0.0002")
    )
    ModelPrice.objects.create(gateway=sats, model="btc/a", prompt=Decimal("120"), completion=1)

    listed = admin.get("/admin/chatapp/modelprice/").content.decode()

    for shown in ("$0.0001708", "$0.0002", "120 sat", "1 sat"):
        assert f">{shown}<" in listed
    assert "0.000170800000000" not in listed
