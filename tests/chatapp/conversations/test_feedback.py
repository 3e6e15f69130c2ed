"""Feedback on answers: thumbs up or down and a comment, one per user and answer, only on one's
own answers; and the cost admin filtered by it (what did the disliked answers cost, per model)."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client, RequestFactory
from django.urls import reverse

from chatapp.conversations import feedback as answer_feedback
from chatapp.conversations.models import Conversation, Message
from chatapp.costs import ledger
from chatapp.costs.models import Feedback, Generation, LedgerDay
from chatapp.gateways.models import Gateway
from tests.chatapp.costs.test_admin_costs import CHANGELIST, EXPORT, SUMMARY, amounts, record

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def numes(db: None) -> Gateway:
    return Gateway.objects.create(
        name="Numes", base_url="https://numes.example/api/v1", dialect="numes", cost_unit="usd"
    )


def rate(client: Client, generation: Generation, **data: str) -> Any:
    assert generation.message_id is not None
    url = reverse("chat:feedback", args=[generation.message_id])
    return client.post(url, data, **HTMX)


@pytest.mark.django_db
def test_a_thumb_is_kept_with_the_generation_and_changes_in_place(
    client: Client, alice: Any, numes: Gateway
) -> None:
    generation = record(alice, numes)
    client.force_login(alice)

    response = rate(client, generation, rating="down")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'class="thumb thumb-down" name="rating" value=""' in html  # pressed: takes it back
    assert 'aria-pressed="true" aria-label="Bad answer"' in html
    assert '<details class="feedback-comment" open>' in html  # a bad answer asks why, once
    assert "Marked as a bad answer." in html
    (feedback,) = Feedback.objects.all()
    assert (feedback.generation, feedback.user, feedback.rating) == (generation, alice, "down")

    rate(client, generation, rating="down", comment="  Wrong\x00 year.\n")
    rate(client, generation, rating="up")  # changed; the comment stays
    (feedback,) = Feedback.objects.all()
    assert (feedback.rating, feedback.comment) == ("up", "Wrong year.")

    response = rate(client, generation, rating="")
    assert response.status_code == 200
    assert "Rating removed." in response.content.decode()
    assert not Feedback.objects.exists()


@pytest.mark.django_db
def test_a_comment_is_bounded(client: Client, alice: Any, numes: Gateway) -> None:
    generation = record(alice, numes)
    client.force_login(alice)
    rate(client, generation, rating="down", comment="x" * (Feedback.MAX_COMMENT + 500))
    assert len(Feedback.objects.get().comment) == Feedback.MAX_COMMENT


@pytest.mark.django_db
def test_another_users_answer_is_not_found(
    client: Client, alice: Any, bob: Any, numes: Gateway
) -> None:
    generation = record(alice, numes)
    client.force_login(bob)
    assert rate(client, generation, rating="down").status_code == 404
    assert not Feedback.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("rating", ["meh", "UP", "up "])
def test_only_up_down_or_nothing_is_a_rating(
    client: Client, alice: Any, numes: Gateway, rating: str
) -> None:
    generation = record(alice, numes)
    client.force_login(alice)
    assert rate(client, generation, rating=rating).status_code == 400
    assert not Feedback.objects.exists()


@pytest.mark.django_db
def test_a_running_answer_takes_no_feedback(client: Client, alice: Any, numes: Gateway) -> None:
    generation = record(alice, numes, status="streaming")
    client.force_login(alice)
    assert rate(client, generation, rating="up").status_code == 400


@pytest.mark.django_db
def test_without_htmx_the_form_goes_back_to_the_answer(
    client: Client, alice: Any, numes: Gateway
) -> None:
    generation = record(alice, numes)
    client.force_login(alice)
    response = client.post(reverse("chat:feedback", args=[generation.message_id]), {"rating": "up"})
    assert response.status_code == 302
    assert response["Location"].endswith(f"/#message-{generation.message_id}")
    assert Feedback.objects.get().rating == "up"


@pytest.mark.django_db
def test_the_page_shows_the_users_own_feedback_read_once(
    client: Client, alice: Any, numes: Gateway, django_assert_max_num_queries: Any
) -> None:
    first = record(alice, numes)
    assert first.conversation is not None
    second = record(alice, numes, conversation=first.conversation)
    assert first.message is not None
    assert second.message is not None
    question = Message.objects.create(
        conversation=first.conversation, role="user", content="And?", parent=first.message
    )
    second.message.parent = question
    second.message.save()
    Conversation.objects.filter(pk=first.conversation.pk).update(current_leaf=second.message)
    Feedback.objects.create(generation=second, user=alice, rating="up", comment="Clear.")
    client.force_login(alice)

    html = client.get(reverse("chat:conversation", args=[first.conversation.pk])).content.decode()

    assert html.count('aria-label="Good answer"') == 2
    assert html.count('aria-pressed="true"') == 1
    assert "Clear.</textarea>" in html
    with django_assert_max_num_queries(1):  # every answer's, in one query
        request = RequestFactory().get("/")
        request.user = alice
        for generation in (first, second):
            assert generation.message is not None
            answer_feedback.given(request, generation.message)


# --- The cost admin, filtered by feedback -------------------------------------------------------


@pytest.fixture
def admin(admin_user: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def rated(alice: Any, bob: Any, numes: Gateway) -> dict[str, Generation]:
    """Answers of two models, liked, disliked (one with a comment) and not rated."""
    found = {
        "a disliked": record(alice, numes, model="numes/a", cost="0.5"),
        "a disliked too": record(bob, numes, model="numes/a", cost="0.25"),
        "b disliked": record(alice, numes, model="numes/b", cost="2"),
        "a liked": record(alice, numes, model="numes/a", cost="8"),
        "b unrated": record(bob, numes, model="numes/b", cost="16"),
    }
    Feedback.objects.create(generation=found["a disliked"], user=alice, rating="down")
    Feedback.objects.create(
        generation=found["a disliked too"], user=bob, rating="down", comment="Too long."
    )
    Feedback.objects.create(generation=found["b disliked"], user=alice, rating="down")
    Feedback.objects.create(generation=found["a liked"], user=alice, rating="up")
    return found


@pytest.mark.django_db
@pytest.mark.usefixtures("rated")
def test_the_summary_says_what_disliked_answers_cost_per_model(admin: Client) -> None:
    summary = admin.get(reverse(SUMMARY), {"feedback": "down"}).context["summary"]

    assert amounts(summary.overall) == {"usd": Decimal("2.75")}
    assert {group.label: amounts(group) for group in summary.models} == {
        "numes/a": {"usd": Decimal("0.75")},
        "numes/b": {"usd": Decimal("2")},
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("up", {"a liked"}),
        ("down", {"a disliked", "a disliked too", "b disliked"}),
        ("comment", {"a disliked too"}),
        ("any", {"a disliked", "a disliked too", "b disliked", "a liked"}),
        ("none", {"b unrated"}),
    ],
)
def test_the_generation_list_filters_by_feedback(
    admin: Client, rated: dict[str, Generation], choice: str, expected: set[str]
) -> None:
    response = admin.get(reverse(CHANGELIST), {"feedback": choice})

    shown = {row.pk for row in response.context["cl"].queryset}
    assert shown == {rated[name].pk for name in expected}
    assert response.context["cost_totals"].generations == len(expected)


@pytest.mark.django_db
@pytest.mark.usefixtures("rated")
def test_the_filter_is_offered_in_the_sidebar_and_kept_by_the_export(admin: Client) -> None:
    html = admin.get(reverse(SUMMARY)).content.decode()
    assert '<details data-filter-title="feedback"' in html
    assert '<a href="?feedback=down&amp;started_from=' in html

    rows = admin.get(reverse(EXPORT), {"feedback": "down"})
    lines = b"".join(rows.streaming_content).decode().strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 + 3  # the header and the disliked answers


@pytest.mark.django_db
def test_folded_generations_kept_no_feedback_so_a_choice_leaves_them_out(
    admin: Client, alice: Any, numes: Gateway
) -> None:
    old = record(alice, numes, cost="4", started=datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC))
    Feedback.objects.create(generation=old, user=alice, rating="down")
    ledger.fold(datetime.date(2021, 1, 1))
    assert LedgerDay.objects.exists()
    assert not Feedback.objects.exists()  # folded away with its generation

    everything = {"started_from": "2019-01-01"}
    assert amounts(admin.get(reverse(SUMMARY), everything).context["summary"].overall) == {
        "usd": Decimal("4")
    }
    disliked = admin.get(reverse(SUMMARY), {**everything, "feedback": "down"})
    assert disliked.context["summary"].overall.generations == 0


@pytest.mark.django_db
@pytest.mark.usefixtures("rated")
def test_the_feedback_list_is_read_only_and_links_to_the_generation(admin: Client) -> None:
    html = admin.get(reverse("admin:chatapp_feedback_changelist")).content.decode()
    assert "Too long." in html
    assert reverse("admin:chatapp_generation_change", args=[1]).rsplit("/", 3)[0] in html
    assert admin.get(reverse("admin:chatapp_feedback_add")).status_code == 403


@pytest.mark.django_db
def test_the_generation_list_and_page_show_the_rating_and_comment(
    admin: Client, rated: dict[str, Generation]
) -> None:
    html = admin.get(reverse(CHANGELIST)).content.decode()
    assert '<td class="field-feedback_listed">disliked: Too long.</td>' in html
    assert '<td class="field-feedback_listed">liked</td>' in html
    assert '<td class="field-feedback_listed">-</td>' in html  # unrated

    generation = rated["a disliked too"]
    page = admin.get(reverse("admin:chatapp_generation_change", args=[generation.pk]))
    assert "disliked by bob: Too long." in page.content.decode()


@pytest.mark.django_db
def test_a_request_refused_before_a_word_takes_no_feedback(
    client: Client, alice: Any, numes: Gateway
) -> None:
    generation = record(alice, numes, status="failed", cost=None, source="not_billed")
    Message.objects.filter(pk=generation.message_id).update(content="")
    client.force_login(alice)
    assert rate(client, generation, rating="down").status_code == 400
    page = client.get(reverse("chat:conversation", args=[generation.conversation_id]))
    assert "Good answer" not in page.content.decode()
