"""Search on PostgreSQL's full-text path: stems, websearch syntax, a ranked order, `ts_headline`'s
marks, escaping and ownership. Skipped on SQLite; tests/multiprocess/test_search_on_postgresql.py
runs this module on a private PostgreSQL server."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from chatapp.conversations.search import search
from tests.chatapp.conversations.test_search import conversation

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="PostgreSQL's full-text search (tests/multiprocess runs this on PostgreSQL)",
    ),
]


def test_words_match_by_their_stems_and_the_best_match_comes_first(alice: Any) -> None:
    passing = conversation(alice, "Rivers", "Fish, reeds, and an otter now and then.")
    strong = conversation(alice, "Sea otters", "Otters sleep holding hands.", days_ago=30)
    middle = conversation(alice, "Kelp", "Otters sleep in kelp; otters eat urchins.", days_ago=3)
    conversation(alice, "Beavers", "Dams and lodges.")
    hits = search(alice, "otter")
    # By rank (a title match counts double), not by date: the newest is the weakest match.
    assert [hit.pk for hit in hits] == [strong.pk, middle.pk, passing.pk]
    assert hits[0].title == "Sea <mark>otters</mark>"
    assert "<mark>Otters</mark> sleep" in hits[0].snippet
    assert "an <mark>otter</mark> now" in hits[2].snippet
    (hit,) = search(alice, "hand")  # "hand" and "hands": one stem
    assert hit.pk == strong.pk
    assert "holding <mark>hands</mark>" in hit.snippet
    assert {hit.pk for hit in search(alice, "sleeping")} == {strong.pk, middle.pk}


def test_the_box_takes_websearch_syntax(alice: Any) -> None:
    both = conversation(alice, "Trip", "Lisbon with the kids in May")
    conversation(alice, "Other trip", "Porto with the kids")
    night = conversation(alice, "Lisbon by night", "just us")
    assert [hit.pk for hit in search(alice, "lisbon may")] == [both.pk]
    assert [hit.pk for hit in search(alice, '"with the kids" -porto')] == [both.pk]
    assert {hit.pk for hit in search(alice, "may or night")} == {both.pk, night.pk}
    assert search(alice, "the") == []  # only a stop word: nothing to look for


def test_model_text_is_escaped_and_only_our_marks_are_markup(alice: Any) -> None:
    conversation(
        alice,
        "<img src=x onerror=alert(1)> otters",
        '\ue000forged\ue001 otters: if a < b & c > d, <script>alert("x")</script> <b>bold</b>',
    )
    (hit,) = search(alice, "otters")
    assert hit.title == "&lt;img src=x onerror=alert(1)&gt; <mark>otters</mark>"
    assert "forged <mark>otters</mark>: if a &lt; b &amp; c &gt; d," in hit.snippet
    # What its parser reads as an HTML tag, ts_headline leaves out of a snippet.
    assert "<script" not in hit.snippet
    assert "<b>" not in hit.snippet
    assert "&quot;x&quot;" in hit.snippet
    assert hit.snippet.count("<mark>") == hit.snippet.count("</mark>") == 1


def test_a_long_message_gives_fragments_around_its_matches(alice: Any) -> None:
    filler = " ".join(f"word{n}" for n in range(400))
    conversation(alice, "Long", f"{filler} the hidden needle {filler}")
    (hit,) = search(alice, "needle")
    assert "hidden <mark>needle</mark>" in hit.snippet
    assert len(hit.snippet) < 400


def test_only_the_users_own_conversations_are_searched(alice: Any, bob: Any) -> None:
    conversation(bob, "Bob's otters", "otters everywhere")
    assert search(alice, "otters") == []
    mine = conversation(alice, "Mine", "otters")
    assert [hit.pk for hit in search(alice, "otters")] == [mine.pk]


def test_hits_carry_the_conversations_last_activity(alice: Any) -> None:
    found = conversation(alice, "Otters", "otters", days_ago=2)
    (hit,) = search(alice, "otters")
    assert abs(hit.updated_at - found.updated_at) < datetime.timedelta(seconds=1)
    assert hit.updated_at < timezone.now() - datetime.timedelta(days=1)


def test_a_snippet_is_the_words_a_reader_sees_not_the_markdown(alice: Any) -> None:
    conversation(
        alice, "Tides", "## About the **sea** ##\n\n> A [*sea* chart](https://sea.example)"
    )
    (hit,) = search(alice, "sea")
    assert hit.snippet.startswith("About the <mark>sea</mark> A <mark>sea</mark> chart")
    assert "#" not in hit.snippet
    assert "*" not in hit.snippet
    assert hit.snippet.count("<mark>") == hit.snippet.count("</mark>")
