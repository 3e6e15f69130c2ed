"""Search over one user's conversations, titles and message text: the query and the snippet.

PostgreSQL's full-text search where the database has it: the box takes websearch syntax
(`"exact phrase"`, `-word`, `or`), words match by their English stems, results are ranked
(`ts_rank`, a title match counting double) and `ts_headline` picks and marks the snippet, so what
is marked is what matched (it leaves out what its parser reads as HTML tags). Elsewhere (SQLite)
a portable fallback: every word or quoted phrase must appear, case-insensitively (ASCII letters
only, as SQLite's LIKE), in the title or in some message (`-word` excludes), most recent first,
with the first match in the newest matching message as the snippet.

Model text is untrusted: a hit's title and snippet are escaped, and only our `<mark>` is markup.
PostgreSQL marks matches with two private-use characters, removed from the text beforehand, which
become `<mark>` only after the text is escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import Exists, F, OuterRef, Q, Value
from django.db.models.functions import Replace
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from chatapp.models import Conversation, Message

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = ["CONFIG", "RESULTS", "Hit", "search", "snippet", "terms"]

RESULTS = 30
MAX_QUERY = 200  # characters of the box that are read
MAX_TERMS = 8
SNIPPET = 160  # characters around the first match (SQLite)
CONFIG = "english"  # PostgreSQL's text search configuration: English stems and stop words
TITLE_WEIGHT = 2.0
_START, _STOP = "\ue000", "\ue001"  # PostgreSQL's match markers, before escaping
_TERM = re.compile(r'(-?)"([^"]*)"|(\S+)')


@dataclass(frozen=True, slots=True)
class Hit:
    """One matching conversation: its title and a snippet of a matching message, both escaped
    HTML with the matches in `<mark>` (the snippet is empty when only the title matched)."""

    pk: int
    title: SafeString
    snippet: SafeString
    updated_at: datetime


def search(user: User, text: str, limit: int = RESULTS) -> list[Hit]:
    """`user`'s conversations matching `text`, best first; nobody else's, ever."""
    text = " ".join(text[:MAX_QUERY].split())
    if not text:
        return []
    if connection.vendor == "postgresql":
        return _full_text(user, text, limit)
    return _portable(user, text, limit)


def terms(text: str) -> tuple[list[str], list[str]]:
    """The words and quoted phrases to find, and those to exclude (`-word`), websearch style."""
    found: list[str] = []
    excluded: list[str] = []
    for match in _TERM.finditer(text):
        negated, phrase, word = match.groups()
        if word is not None:
            negated, phrase = ("-", word[1:]) if word.startswith("-") else ("", word)
        phrase = " ".join(phrase.strip('"').split())
        if phrase:
            (excluded if negated else found).append(phrase)
    return found[:MAX_TERMS], excluded[:MAX_TERMS]


def snippet(text: str, words: list[str], width: int = SNIPPET) -> SafeString:
    """About `width` characters of `text` around the first of `words`, marked and escaped."""
    text = " ".join(text.split())
    pattern = _pattern(words)
    match = pattern.search(text) if pattern else None
    start = 0 if match is None else max(0, match.start() - width // 3)
    if start:
        space = text.find(" ", start, match.start() if match else None)
        start = space + 1 if space != -1 else start
    end = min(len(text), start + width)
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > (match.end() if match else start) else end
    piece = _marked(text[start:end], pattern)
    return mark_safe(("…" if start else "") + piece + ("…" if end < len(text) else ""))


def _pattern(words: list[str]) -> re.Pattern[str] | None:
    if not words:
        return None
    alternatives = sorted({re.escape(word) for word in words}, key=len, reverse=True)
    return re.compile("|".join(alternatives), re.IGNORECASE)


def _marked(text: str, pattern: re.Pattern[str] | None) -> str:
    """`text` escaped, with each match of `pattern` in `<mark>`."""
    if pattern is None:
        return escape(text)
    parts: list[str] = []
    done = 0
    for match in pattern.finditer(text):
        parts += [escape(text[done : match.start()]), f"<mark>{escape(match[0])}</mark>"]
        done = match.end()
    parts.append(escape(text[done:]))
    return "".join(parts)


def _title(title: str, pattern: re.Pattern[str] | None = None) -> SafeString:
    return mark_safe(_marked(title, pattern)) if title else SafeString("Untitled")


# --- SQLite and any other database ----------------------------------------------------------


def _portable(user: User, text: str, limit: int) -> list[Hit]:
    found, excluded = terms(text)
    if not found:
        return []

    def anywhere(term: str) -> Q:
        in_messages = Message.objects.filter(conversation=OuterRef("pk"), content__icontains=term)
        return Q(title__icontains=term) | Q(Exists(in_messages))

    conversations = Conversation.objects.filter(user=user)
    for term in found:
        conversations = conversations.filter(anywhere(term))
    for term in excluded:
        conversations = conversations.exclude(anywhere(term))
    rows = list(
        conversations.order_by("-updated_at", "-pk").only("pk", "title", "updated_at")[:limit]
    )
    # Per conversation, its newest message holding any of the words.
    any_word = Q()
    for term in found:
        any_word |= Q(content__icontains=term)
    newest: dict[int, int] = {}
    for conversation_pk, pk in (
        Message.objects.filter(any_word, conversation__in=[row.pk for row in rows])
        .order_by("-created_at", "-pk")
        .values_list("conversation_id", "pk")
    ):
        newest.setdefault(conversation_pk, pk)
    contents = dict(Message.objects.filter(pk__in=newest.values()).values_list("pk", "content"))
    pattern = _pattern(found)
    return [
        Hit(
            pk=row.pk,
            title=_title(row.title, pattern),
            snippet=snippet(contents[newest[row.pk]], found)
            if row.pk in newest
            else SafeString(""),
            updated_at=row.updated_at,
        )
        for row in rows
    ]


# --- PostgreSQL ---------------------------------------------------------------------------------


def _full_text(user: User, text: str, limit: int) -> list[Hit]:
    # Imported here: the module needs psycopg, which an SQLite install may not have.
    from django.contrib.postgres.search import (
        SearchHeadline,
        SearchQuery,
        SearchRank,
        SearchVector,
    )

    query = SearchQuery(text, search_type="websearch", config=CONFIG)

    def matching(queryset: Any, field: str) -> Any:
        return (
            queryset.annotate(document=SearchVector(field, config=CONFIG))
            .filter(document=query)
            .annotate(rank=SearchRank(F("document"), query))
        )

    updated: dict[int, datetime] = {}
    best: dict[int, tuple[int, float]] = {}  # conversation -> its best message and that's rank
    for conversation_pk, pk, rank, updated_at in (
        matching(Message.objects.filter(conversation__user=user), "content")
        .order_by("conversation_id", "-rank", "-pk")
        .distinct("conversation_id")
        .values_list("conversation_id", "pk", "rank", "conversation__updated_at")
    ):
        best[conversation_pk] = (pk, rank)
        updated[conversation_pk] = updated_at
    titled: dict[int, float] = {}
    for pk, rank, updated_at in matching(
        Conversation.objects.filter(user=user), "title"
    ).values_list("pk", "rank", "updated_at"):
        titled[pk] = rank
        updated[pk] = updated_at

    def score(pk: int) -> tuple[float, datetime]:
        return TITLE_WEIGHT * titled.get(pk, 0.0) + best.get(pk, (0, 0.0))[1], updated[pk]

    top = sorted(updated, key=score, reverse=True)[:limit]
    titles = dict(
        Conversation.objects.filter(user=user, pk__in=top)
        .annotate(
            marked=SearchHeadline(
                _unmarked("title"),
                query,
                config=CONFIG,
                start_sel=_START,
                stop_sel=_STOP,
                highlight_all=True,
            )
        )
        .values_list("pk", "marked")
    )
    snippets = dict(
        Message.objects.filter(
            conversation__user=user, pk__in=[best[pk][0] for pk in top if pk in best]
        )
        .annotate(
            marked=SearchHeadline(
                _unmarked("content"),
                query,
                min_words=12,
                max_words=30,
                max_fragments=2,
                fragment_delimiter=" … ",
                config=CONFIG,
                start_sel=_START,
                stop_sel=_STOP,
            )
        )
        .values_list("conversation_id", "marked")
    )
    return [
        Hit(
            pk=pk,
            title=_headline(titles.get(pk, "")) if titles.get(pk) else SafeString("Untitled"),
            snippet=_headline(snippets.get(pk, "")),
            updated_at=updated[pk],
        )
        for pk in top
        if pk in titles
    ]


def _unmarked(field: str) -> Replace:
    """`field` without the characters that stand for our marks."""
    return Replace(Replace(F(field), Value(_START), Value("")), Value(_STOP), Value(""))


def _headline(marked: str) -> SafeString:
    """`ts_headline`'s text, escaped, with its marks as `<mark>`."""
    text = escape(" ".join(marked.split()))
    return mark_safe(text.replace(_START, "<mark>").replace(_STOP, "</mark>"))
