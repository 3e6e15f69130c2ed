"""Search over one user's conversations, titles and message text: the query and the snippet.

PostgreSQL's full-text search where the database has it: the box takes websearch syntax
(`"exact phrase"`, `-word`, `or`), words match by their English stems, results are ranked
(`ts_rank`, a title match counting double) and `ts_headline` picks and marks the snippet, so what
is marked is what matched (it leaves out what its parser reads as HTML tags). Elsewhere (SQLite)
a portable fallback: every word or quoted phrase must appear, case-insensitively (ASCII letters
only, as SQLite's LIKE), in the title or in some message (`-word` excludes), most recent first,
with the first match in the newest matching message as the snippet.

A snippet is the words a reader sees, not the markdown source: "## About **sea**" shows as "About
sea" (`plain_text`: a few linear rules, not a render, which runs only in the render pool).

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
from django.db.models import Case, Exists, F, OuterRef, Q, TextField, Value, When
from django.db.models.functions import Replace
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from chatapp.conversations.models import Conversation, Message
from chatapp.rendering.settle_steps import closes_fence

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = ["CONFIG", "RESULTS", "Hit", "plain_text", "search", "snippet", "terms"]

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
    """About `width` characters of markdown `text`'s words around the first of `words`, marked
    and escaped."""
    text = " ".join(plain_text(text).split())
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


# --- Markdown as the words a reader sees ----------------------------------------------------------

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# Setext underlines, thematic breaks and table delimiter rows: lines with no words.
_RULE = re.compile(
    r" {0,3}(?:=+|-+|(?:[-*_][ \t]*){3,}|\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?)[ \t]*"
)
# Quote marks, then a heading's or a list item's (with its task box).
_LINE_START = re.compile(
    r"[ \t]*(?:>[ \t]?)*[ \t]*"
    r"(?:#{1,6}(?:[ \t]+|$)|(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?)?"
)
_CODE_SPAN = re.compile(r"`+")
# Bounded, so that no line costs more than a pass over it (model text can be anything).
_LINK = re.compile(
    r"!?(?<!\\)\[([^\[\]\n]{0,300})\](?:\([^()\s]{0,1000}(?:[ \t]+\"[^\"\n]{0,300}\")?\)"
    r"|\[[^\[\]\n]{0,100}\])"
)
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^<>\s]{1,1000})>")
_ESCAPE_OR_EMPHASIS = re.compile(r"\\([!-/:-@\[-`{-~])|\*+|_+|~~")


def plain_text(markdown: str) -> str:
    """`markdown` as the words a reader sees: without the marks of headings, quotes, lists,
    emphasis, code fences, tables and rules, links as their text, code as it is written; one
    line for each line of text, in time linear in its length."""
    lines: list[str] = []
    opened = ""
    for line in markdown.split("\n"):
        fence = _FENCE.match(line)
        if opened:
            if closes_fence(line.rstrip("\r"), opened):
                opened = ""
            else:
                lines.append(line)
        elif fence is not None:
            opened = fence[1]
        elif not _RULE.fullmatch(line):
            start = _LINE_START.match(line)
            heading = start is not None and "#" in start[0]
            line = line[start.end() :] if start else line
            if heading:
                line = _without_closing_hashes(line)
            if line.lstrip().startswith("|"):
                line = re.sub(r"(?<!\\)\|", " ", line)
            lines.append(_inline_text(line))
    return "\n".join(lines)


def _without_closing_hashes(line: str) -> str:
    """A heading's text without its closing `#`s (and the blanks before them), by string methods:
    as a regular expression (`[ \t]+#+[ \t]*$`, tried at each blank) a heading of 20,000 spaces
    took 8 s."""
    trimmed = line.rstrip(" \t")
    bare = trimmed.rstrip("#")
    if bare != trimmed and bare[-1:] in (" ", "\t"):
        return bare.rstrip(" \t")
    return line


def _inline_text(line: str) -> str:
    """A line's words: code spans as written, the rest without its links' targets and emphasis."""
    parts: list[str] = []
    done = 0
    opener: re.Match[str] | None = None
    for run in _CODE_SPAN.finditer(line):
        if opener is None:
            opener = run
        elif len(run[0]) == len(opener[0]):
            parts += [_unmarked_text(line[done : opener.start()]), line[opener.end() : run.start()]]
            done, opener = run.end(), None
    parts.append(_unmarked_text(line[done:]))
    return "".join(parts)


def _unmarked_text(text: str) -> str:
    text = _AUTOLINK.sub(r"\1", _LINK.sub(r"\1", text))

    def unmarked(match: re.Match[str]) -> str:
        if match[1] is not None:  # an escaped character stands for itself
            return match[1]
        before = text[match.start() - 1] if match.start() else " "
        after = text[match.end()] if match.end() < len(text) else " "
        if before.isspace() and after.isspace():
            return match[0]  # "2 * 3"
        if before.isalnum() and after.isalnum():
            return match[0]  # "snake_case", "5*3"
        return ""

    return _ESCAPE_OR_EMPHASIS.sub(unmarked, text)


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

    conversations = Conversation.objects.filter(user=user, temporary=False)
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
        matching(
            Message.objects.filter(conversation__user=user, conversation__temporary=False),
            "content",
        )
        .order_by("conversation_id", "-rank", "-pk")
        .distinct("conversation_id")
        .values_list("conversation_id", "pk", "rank", "conversation__updated_at")
    ):
        best[conversation_pk] = (pk, rank)
        updated[conversation_pk] = updated_at
    titled: dict[int, float] = {}
    for pk, rank, updated_at in matching(
        Conversation.objects.filter(user=user, temporary=False), "title"
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
    # The snippet is picked from the words a reader sees, which only Python knows (`plain_text`):
    # the texts go to ts_headline as values, in one query.
    shown = {
        pk: _without_marks(plain_text(content))
        for pk, content in Message.objects.filter(
            conversation__user=user, pk__in=[best[pk][0] for pk in top if pk in best]
        ).values_list("pk", "content")
    }
    snippets = (
        dict(
            Message.objects.filter(pk__in=shown)
            .annotate(
                marked=SearchHeadline(
                    Case(
                        *(When(pk=pk, then=Value(text)) for pk, text in shown.items()),
                        output_field=TextField(),
                    ),
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
        if shown
        else {}
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


def _without_marks(text: str) -> str:
    return text.replace(_START, "").replace(_STOP, "")


def _headline(marked: str) -> SafeString:
    """`ts_headline`'s text, escaped, with its marks as `<mark>`."""
    text = escape(" ".join(marked.split()))
    return mark_safe(text.replace(_START, "<mark>").replace(_STOP, "</mark>"))
