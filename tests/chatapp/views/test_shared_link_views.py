"""Shared links over HTTP: the owner makes, lists and revokes them; anyone reads the branch, with
nothing of the owner's beyond it, `noindex`, `no-store`, the app's CSP and no cookie."""

from __future__ import annotations

import base64
import re
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chatapp.conversations import search_tool
from chatapp.conversations.models import Conversation, Message, SharedLink
from chatapp.costs.models import Generation
from chatapp.rendering import answer_html
from chatapp.rendering.markdown import doc_id_for
from chatapp.tools.base import ToolContext

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
PNG = (  # one pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
ANSWER = "# Lisbon\n\nTake the **tram** and:\n\n```python\nprint('hi')\n```\n"
TOKEN_URL = re.compile(r"http://testserver/s/([A-Za-z0-9_-]{43})/")


@pytest.fixture(autouse=True)
def _renders_wait(settings: Any) -> None:
    settings.CHAT_RENDER_PAGE_WAIT = 60.0  # a cold render process is not what these test


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def turn(
    conversation: Conversation,
    question: str,
    answer: str,
    after: Message | None = None,
    **generation: Any,
) -> Message:
    """A turn after `after`, shown, its answer's final render stored as the worker stores it."""
    asked = Message.objects.create(
        conversation=conversation, role=Message.Role.USER, parent=after, content=question
    )
    answered = Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, parent=asked, content=answer
    )
    answer_html.keep(answered, answer_html.render_answer_sync(answer, [], doc_id_for(answered.pk)))
    answered.save()
    fields = {
        "model": "emulator/echo",
        "status": Generation.Status.COMPLETED,
        "finish_reason": "stop",
        "prompt_tokens": 11,
        "completion_tokens": 42,
        "cost": Decimal("0.000123"),
        "cost_unit": "usd",
        "cost_source": Generation.CostSource.STREAM,
        "ttft_ms": 321,
        **generation,
    }
    Generation.objects.create(message=answered, conversation=conversation, **fields)
    conversation.current_leaf = answered
    conversation.save()
    return answered


def shared(owner: Client, conversation: Conversation, after: Message | None = None) -> str:
    """The path of a new link to `conversation`, made as the Share menu makes it."""
    data = {"after": str(after.pk)} if after else {}
    response = owner.post(reverse("chat:share", args=[conversation.pk]), data, headers=HTMX)
    assert response.status_code == 200
    found = TOKEN_URL.search(response.content.decode())
    assert found, response.content
    return reverse("chat:shared_page", args=[found[1]])


@pytest.fixture
def trip(alice: Any) -> Conversation:
    conversation = Conversation.objects.create(user=alice, title="Lisbon trip")
    turn(conversation, "Where should I go?", ANSWER)
    return conversation


def test_anyone_with_the_link_reads_the_answers_as_the_app_renders_them(
    alice: Any, trip: Conversation
) -> None:
    owner = client_for(alice)
    path = shared(owner, trip)
    page = Client().get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert "<title>Lisbon trip · Shared · Gateway Chat</title>" in html
    assert "Where should I go?" in html
    answer = Message.objects.get(conversation=trip, role=Message.Role.ASSISTANT)
    assert '<pre class="highlight">' in answer.html or "code-block" in answer.html
    # The stored final render, byte for byte, as the app's own page shows it.
    assert f'<div class="content rendered">{answer.html}</div>' in html
    assert answer.html in owner.get(reverse("chat:conversation", args=[trip.pk])).content.decode()
    assert "emulator/echo" in html


def test_the_page_shows_no_costs_no_controls_and_opens_no_socket(
    alice: Any, trip: Conversation
) -> None:
    owner = client_for(alice)
    app_page = owner.get(reverse("chat:conversation", args=[trip.pk])).content.decode()
    page = Client().get(shared(owner, trip)).content.decode()
    # Each of these is on the owner's page (the control), and none on the shared one.
    for owners_only in (
        "$0.000123",
        "42 out",
        "first token 321 ms",
        "Regenerate",
        'id="composer"',
        "<form",
        "hx-post",
        "X-CSRFToken",
        "/ws/chat/",
        "chat.js",
        "htmx.min.js",
        "This conversation",  # the running total
        "Sign out",
    ):
        assert owners_only in app_page, owners_only
        assert owners_only not in page, owners_only
    assert "0.000123" not in page
    assert "csrfmiddlewaretoken" not in page


def test_the_page_is_noindex_no_store_with_the_apps_csp_and_needs_no_session(
    alice: Any, bob: Any, trip: Conversation
) -> None:
    owner = client_for(alice)
    path = shared(owner, trip)
    app_page = owner.get(reverse("chat:conversation", args=[trip.pk]))
    for reader in (Client(), client_for(bob), owner):
        response = reader.get(path)
        assert response.status_code == 200
        assert response["X-Robots-Tag"] == "noindex"
        assert '<meta name="robots" content="noindex">' in response.content.decode()
        assert response["Cache-Control"] == "no-store"
        assert response["Referrer-Policy"] == "no-referrer"
        assert response["Content-Security-Policy"] == app_page["Content-Security-Policy"]
        assert response["X-Frame-Options"] == "DENY"
        assert not response.cookies  # no CSRF cookie, no session
        assert "Cookie" not in response.get("Vary", "")


def test_revoking_a_link_makes_it_and_its_images_404_at_once(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Pictures")
    image = {"kind": "image", "media_type": "image/png", "filename": "a.png", "data": PNG}
    turn(conversation, "Draw", "", kind=Generation.Kind.IMAGE)
    Message.objects.filter(role=Message.Role.ASSISTANT).update(attachments=[image])
    owner = client_for(alice)
    path = shared(owner, conversation)
    image_path = f"{path}images/2/0/"
    reader = Client()
    assert reader.get(path).status_code == 200
    assert reader.get(image_path).status_code == 200
    link = SharedLink.objects.get()
    response = owner.post(reverse("chat:revoke_shared_link", args=[link.pk]), headers=HTMX)
    assert response.status_code == 200
    assert "revoked" in response.content.decode()
    gone = reader.get(path)
    assert gone.status_code == 404
    assert gone["X-Robots-Tag"] == "noindex"
    assert "Pictures" not in gone.content.decode()
    assert reader.get(image_path).status_code == 404
    # A revoked link reads exactly as one that never existed.
    unknown = reader.get(reverse("chat:shared_page", args=["A" * 43]))
    assert (unknown.status_code, unknown.content) == (404, gone.content)


def test_a_deleted_conversation_takes_its_links_with_it(alice: Any, trip: Conversation) -> None:
    owner = client_for(alice)
    path = shared(owner, trip)
    assert Client().get(path).status_code == 200
    owner.post(reverse("chat:delete", args=[trip.pk]), headers=HTMX)
    assert Client().get(path).status_code == 404


def test_only_the_owner_makes_lists_and_revokes_links(
    alice: Any, bob: Any, trip: Conversation
) -> None:
    owner, mallory, anonymous = client_for(alice), client_for(bob), Client()
    share_url = reverse("chat:share", args=[trip.pk])
    assert mallory.post(share_url, headers=HTMX).status_code == 404
    answer = Message.objects.get(conversation=trip, role=Message.Role.ASSISTANT)
    assert anonymous.post(share_url, {"after": answer.pk}).status_code == 302  # to sign in
    assert not SharedLink.objects.exists()
    path = shared(owner, trip)
    link = SharedLink.objects.get()
    revoke_url = reverse("chat:revoke_shared_link", args=[link.pk])
    assert mallory.post(revoke_url, headers=HTMX).status_code == 404
    assert anonymous.post(revoke_url).status_code == 302
    assert anonymous.get(path).status_code == 200  # still open
    assert "Lisbon trip" not in mallory.get(reverse("chat:shared_links")).content.decode()
    assert anonymous.get(reverse("chat:shared_links")).status_code == 302
    listed = owner.get(reverse("chat:shared_links")).content.decode()
    assert "Lisbon trip" in listed
    assert "2 messages" in listed
    assert revoke_url in listed
    assert path not in listed  # the token is shown once, when the link is made


def test_later_messages_and_other_versions_are_not_shown(alice: Any, trip: Conversation) -> None:
    owner = client_for(alice)
    first = Message.objects.get(conversation=trip, role=Message.Role.ASSISTANT)
    path = shared(owner, trip, after=first)
    turn(trip, "And after Lisbon?", "Porto.", after=first)
    turn(trip, "Where should I go instead?", "Madrid.")  # an edited first question
    page = Client().get(path).content.decode()
    assert "Where should I go?" in page
    for later in ("And after Lisbon?", "Porto.", "instead", "Madrid."):
        assert later not in page
    # The control: a link made now shows the branch shown now.
    assert "Madrid." in Client().get(shared(owner, trip)).content.decode()


def test_an_answer_still_being_written_is_left_out_until_it_ends(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Live")
    answer = turn(conversation, "Tell me", "", status=Generation.Status.STREAMING)
    Message.objects.filter(pk=answer.pk).update(content="half of what will be")
    path = shared(client_for(alice), conversation)
    page = Client().get(path).content.decode()
    assert "Tell me" in page
    assert "half of what will be" not in page
    assert "still being written" in page
    Message.objects.filter(pk=answer.pk).update(content="half of what will be, and the rest")
    Generation.objects.filter(message=answer).update(status=Generation.Status.COMPLETED)
    page = Client().get(path).content.decode()
    assert "half of what will be, and the rest" in page
    assert "still being written" not in page


def test_images_are_served_under_the_link_and_audio_and_files_are_left_out(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Media")
    secret = base64.b64encode(b"a file only the owner downloads").decode()
    items = [
        {"kind": "image", "media_type": "image/png", "filename": "a.png", "data": PNG},
        {"kind": "image_url", "url": f"data:image/png;base64,{PNG}"},
        {"kind": "file", "filename": "notes.csv", "media_type": "text/csv", "data": secret},
        {"kind": "audio", "media_type": "audio/wav", "data": secret, "transcript": "hello"},
        {"kind": "image", "media_type": "image/png", "filename": "b.png", "data": secret},
    ]
    answer = turn(conversation, "Make things", "Here they are.")
    Message.objects.filter(pk=answer.pk).update(attachments=items)
    path = shared(client_for(alice), conversation)
    page = Client().get(path).content.decode()
    assert f'src="{path}images/2/0/"' in page
    assert f'src="data:image/png;base64,{PNG}"' in page
    assert "Not included in shared links: a file, an audio clip from the model." in page
    assert secret not in page
    assert "notes.csv" not in page
    image = Client().get(f"{path}images/2/0/")
    assert image.status_code == 200
    assert image["Content-Type"] == "image/png"
    assert image.content == base64.b64decode(PNG)
    assert image["X-Content-Type-Options"] == "nosniff"
    assert image["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert image["X-Robots-Tag"] == "noindex"
    for other in ("2/2", "2/3", "2/4", "2/9", "1/0", "3/0"):  # file, audio, not raster, none
        assert Client().get(f"{path}images/{other}/").status_code == 404, other


def test_an_image_of_a_later_message_is_not_served(alice: Any, trip: Conversation) -> None:
    owner = client_for(alice)
    path = shared(owner, trip)
    later = turn(trip, "Draw it", "", after=Message.objects.filter(conversation=trip).last())
    image = {"kind": "image", "media_type": "image/png", "filename": "a.png", "data": PNG}
    Message.objects.filter(pk=later.pk).update(attachments=[image])
    assert Client().get(f"{path}images/4/0/").status_code == 404
    assert Client().get(f"{shared(owner, trip)}images/4/0/").status_code == 200  # control


def test_reasoning_and_tool_calls_are_shown_read_only(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Tools")
    calls = [
        {
            "index": 0,
            "id": "call_1",
            "name": "calculator",
            "arguments": '{"expression": "6*7"}',
            "status": "done",
            "result": "42",
            "duration_ms": 3,
        }
    ]
    answer = turn(conversation, "Six sevens?", "It is:\n\n```\n42\n```\n", thinking_ms=2400)
    Message.objects.filter(pk=answer.pk).update(reasoning="Multiply them.", tool_calls=calls)
    page = Client().get(shared(client_for(alice), conversation)).content.decode()
    assert '<details class="pane reasoning-pane">' in page  # folded, as a finished answer's
    assert "Thought for 2 s" in page
    assert "Multiply them." in page
    assert '<code class="tool-name">calculator</code>' in page
    assert "<pre>42</pre>" in page
    buttons = re.findall(r"<button[^>]*>", page)
    assert buttons  # the code block's Copy
    assert all('class="copy-code"' in button for button in buttons)


def test_a_search_of_the_owners_other_conversations_is_shown_without_what_it_found(
    alice: Any,
) -> None:
    conversation = Conversation.objects.create(user=alice, title="Recall")
    calls = [
        {
            "index": 0,
            "id": "call_1",
            "name": "search_conversations",
            "arguments": '{"query": "salary"}',
            "status": "done",
            "result": '{"results": [{"title": "My salary talk", "snippet": "ask for 90k"}]}',
        },
        {
            "index": 1,
            "id": "call_2",
            "name": "clock",
            "arguments": "{}",
            "status": "done",
            "result": "2026-12-02T15:00:00Z",
        },
    ]
    answer = turn(conversation, "What did I say?", "Let me look.")
    Message.objects.filter(pk=answer.pk).update(tool_calls=calls)
    page = Client().get(shared(client_for(alice), conversation)).content.decode()
    assert '<code class="tool-name">search_conversations</code>' in page
    assert "Let me look." in page  # written before the search ran
    assert "salary talk" not in page
    assert "90k" not in page
    assert "The result of “Search my conversations” is not shared" in page
    assert "2026-12-02T15:00:00Z" in page  # another tool's result is shown


def test_no_answer_after_a_search_of_the_owners_other_conversations_is_shared(
    alice: Any,
) -> None:
    private = Conversation.objects.create(user=alice, title="Quitting over the salary cut")
    turn(private, "Draft my resignation", "Dear board, the salary cut leaves me no choice.")
    conversation = Conversation.objects.create(user=alice, title="Recall")
    searching = turn(conversation, "What did I say about my salary?", "Let me look.")
    context = ToolContext(alice.pk, conversation.pk)
    found = search_tool.TOOL.run({"query": "salary"}, context)
    assert private.title in found  # what the model was sent
    assert f'"conversation_id":{private.pk}' in found
    call = {"index": 0, "id": "call_1", "name": "search_conversations", "arguments": "{}"}
    Message.objects.filter(pk=searching.pk).update(
        tool_calls=[{**call, "status": "done", "result": found}]
    )
    quoting = f"In “{private.title}” (#{private.pk}) you wrote: “the salary cut leaves me”."
    round_2 = Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, parent=searching, content=quoting
    )
    answer_html.keep(round_2, answer_html.render_answer_sync(quoting, [], doc_id_for(round_2.pk)))
    round_2.save()
    Generation.objects.create(
        message=round_2,
        conversation=conversation,
        model="emulator/tools",
        status=Generation.Status.COMPLETED,
        tool_round=2,
    )
    # A later turn's request holds the search's result too.
    turn(conversation, "Say it again", f"It was “{private.title}”.", after=round_2)
    image = {"kind": "image", "media_type": "image/png", "filename": "a.png", "data": PNG}
    Message.objects.filter(pk__in=[searching.pk, round_2.pk]).update(attachments=[image])
    owner = client_for(alice)
    owners_page = owner.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert private.title in owners_page  # the control: the owner sees it all

    page = Client().get(shared(owner, conversation)).content.decode()
    assert private.title not in page
    assert "salary cut" not in page
    assert f"#{private.pk}" not in page
    words = "Not shared: this answer was written after the result of “Search my conversations”"
    assert page.count(words) == 2
    assert "What did I say about my salary?" in page  # the owner's own questions are shared
    assert "Say it again" in page
    assert "Let me look." in page
    path = shared(owner, conversation)
    assert Client().get(f"{path}images/2/0/").status_code == 200  # before the search ran
    assert Client().get(f"{path}images/3/0/").status_code == 404


def test_what_went_wrong_is_said_without_the_gateways_words(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Errors")
    failed = turn(
        conversation,
        "q1",
        "partial",
        status=Generation.Status.FAILED,
        error_status=402,
        error_message="Key sk-live-1234 has $3.20 left",
    )
    turn(
        conversation,
        "q2",
        "cut",
        after=failed,
        status=Generation.Status.CANCELLED,
        error_type="spending_limit",
        error_message="This answer would pass your limit of $10.00 a month.",
    )
    page = Client().get(shared(client_for(alice), conversation)).content.decode()
    assert "The answer failed; what arrived before is shown." in page
    assert "Stopped." in page
    for private in ("sk-live", "$3.20", "$10.00", "402", "limit"):
        assert private not in page, private


def test_without_htmx_a_new_link_is_shown_on_the_list_and_revoking_returns_there(
    alice: Any, trip: Conversation
) -> None:
    owner = client_for(alice)
    response = owner.post(reverse("chat:share", args=[trip.pk]))
    assert response.status_code == 200
    assert "<h1>Shared links</h1>" in response.content.decode()
    found = TOKEN_URL.search(response.content.decode())
    assert found
    link = SharedLink.objects.get()
    response = owner.post(reverse("chat:revoke_shared_link", args=[link.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("chat:shared_links")
    assert Client().get(reverse("chat:shared_page", args=[found[1]])).status_code == 404


def test_a_title_a_model_wrote_from_a_private_result_is_not_the_links(alice: Any) -> None:
    """A model titles a conversation from its first exchange, the answer after a search
    included: the link's page takes the first question's line instead (#45)."""
    conversation = Conversation.objects.create(
        user=alice,
        title="Quitting over the salary cut",
        title_source=Conversation.TitleSource.MODEL,
    )
    searching = turn(conversation, "## What did I **say**?", "Let me look.")
    search = {"index": 0, "name": "search_conversations", "status": "done", "result": "{}"}
    Message.objects.filter(pk=searching.pk).update(tool_calls=[search])
    turn(conversation, "Thanks", "You said the salary cut.", after=searching)
    page = Client().get(shared(client_for(alice), conversation)).content.decode()
    assert "salary" not in page
    assert "<title>What did I say? · Shared" in page
    assert '<h1 id="conversation-title">What did I say?</h1>' in page

    plain = Conversation.objects.create(
        user=alice, title="Lisbon with kids", title_source=Conversation.TitleSource.MODEL
    )
    turn(plain, "Where should I go?", ANSWER)
    page = Client().get(shared(client_for(alice), plain)).content.decode()
    assert '<h1 id="conversation-title">Lisbon with kids</h1>' in page  # the control


def test_a_withheld_mcp_result_is_named_as_the_tool_it_came_from(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Lookup")
    looked_up = turn(conversation, "Look it up", "Looking.")
    call = {"index": 0, "name": "test__lookup", "status": "done", "result": "secret row 7"}
    Message.objects.filter(pk=looked_up.pk).update(tool_calls=[call])
    turn(conversation, "And?", "Row 7 says secret.", after=looked_up)
    page = Client().get(shared(client_for(alice), conversation)).content.decode()
    assert "secret" not in page
    assert "other conversations" not in page
    assert "The result of the MCP tool “lookup” of “test” is not shared" in page
    assert (
        "Not shared: this answer was written after the result of the MCP tool “lookup” of"
        " “test”, which is not shared, and could quote it." in page
    )


def test_a_temporary_chat_offers_no_share_and_cannot_be_shared(alice: Any) -> None:
    conversation = Conversation.objects.create(user=alice, title="Scratch", temporary=True)
    turn(conversation, "Where should I go?", ANSWER)
    owner = client_for(alice)
    page = owner.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert "Create a share link" not in page
    response = owner.post(reverse("chat:share", args=[conversation.pk]), headers=HTMX)
    assert response.status_code == 400
    assert response.content.decode() == "A temporary chat is not kept, so it cannot be shared."
    assert not SharedLink.objects.filter(conversation=conversation).exists()


def test_a_shared_page_draws_diagrams_and_offers_previews(alice: Any, trip: Conversation) -> None:
    """Its answers are the app's render, hooks and all; the scripts that use them and the frames
    they open are anyone's (chatapp/views/code_frames.py)."""
    page = Client().get(shared(client_for(alice), trip)).content.decode()
    assert '<script type="module" src="/static/chatapp/diagrams.js"></script>' in page
    assert '<script type="module" src="/static/chatapp/previews.js"></script>' in page
    assert f'data-diagram="{reverse("diagram_frame")}"' in page
    assert Client().get(reverse("diagram_frame")).status_code == 200
