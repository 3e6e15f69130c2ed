"""Our templates as a simulated browser reads them: the chat page, an answer's fragment.

A few regular expressions over `templates/chatapp/*.html` and `templates/base.html` rather than an
HTML parser, to keep a tab's work small; each sits here next to what it assumes, so a template
change is fixed in this module and the page's behaviour in `browser`.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

import orjson

_ATTR = re.compile(r'([\w-]+)="([^"]*)"')
FORM_TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
_HX_HEADERS = re.compile(r"<body hx-headers='([^']*)'")
_COMPOSER = re.compile(r'<form id="composer"[^>]*>')
_SOCKET_HOLDER = re.compile(r'<div class="layout"[^>]*>')
_MAIN = re.compile(r'<main class="chat"[^>]*>')
_SELECT = re.compile(r'<select id="model"[^>]*>(.*?)</select>', re.S)
_OPTION = re.compile(r'<option value="([^"]*)"')
_ARTICLE = re.compile(r'<article class="message assistant"[^>]*>')
# A streaming answer: its settled blocks as HTML (`data-settled` UTF-16 units of text), the rest
# as text in its live tail (templates/chatapp/_message.html).
_STREAMING = re.compile(r'<div class="content streaming"[^>]*data-settled="(\d+)"[^>]*>')
_LIVE_TAIL = re.compile(r'<div class="live-tail">(.*?)</div>', re.S)
_ASSET = re.compile(r'(?:href|src)="(/static/[^"]+)"')
# The last message shown, which a follow-up answers to (`_chat_main.html`'s hidden `after`).
_AFTER = re.compile(r'<input type="hidden" name="after" value="(\d*)">')


class PageError(Exception):
    """The server answered something the page would not have gone on from."""


@dataclass(frozen=True, slots=True)
class Answer:
    """An assistant `<article>` as rendered: while it streams, how much of its text is settled
    (shown as HTML) and the unsettled rest as text (`tail`); 0 and "" once rendered whole."""

    generation: int
    message: int
    status: str
    seq: int
    fragment_path: str
    settled_end: int
    tail: str

    @property
    def shows_text(self) -> bool:
        return bool(self.settled_end or self.tail)


@dataclass(frozen=True, slots=True)
class Page:
    url: str
    csrf_header: str
    form_token: str
    send_path: str
    after: str  # the composer's `after`: "" on the empty page
    models: tuple[str, ...]  # the picker's option values: `g<gateway>:<model>`
    socket_path: str | None
    answers: tuple[Answer, ...]
    assets: tuple[str, ...]

    def option_for(self, model: str) -> str | None:
        """The picker value that chooses `model` (on the first gateway listing it)."""
        for value in self.models:
            head, sep, listed = value.partition(":")
            if value == model or (sep and head.startswith("g") and listed == model):
                return value
        return None


def _attrs(tag: str) -> dict[str, str]:
    return {name: html.unescape(value) for name, value in _ATTR.findall(tag)}


def parse_answers(body: str) -> list[Answer]:
    answers = []
    for match in _ARTICLE.finditer(body):
        attrs = _attrs(match.group())
        end = body.find("</article>", match.end())
        stop = end if end >= 0 else len(body)
        streaming = _STREAMING.search(body, match.end(), stop)
        tail = _LIVE_TAIL.search(body, streaming.end(), stop) if streaming else None
        answers.append(
            Answer(
                generation=int(attrs["data-generation"]),
                message=int(attrs["data-message"]),
                status=attrs["data-status"],
                seq=int(attrs.get("data-seq") or 0),
                fragment_path=attrs["data-fragment-url"],
                settled_end=int(streaming.group(1)) if streaming else 0,
                tail=html.unescape(tail.group(1)) if tail else "",
            )
        )
    return answers


def parse_page(url: str, body: str) -> Page:
    headers = _HX_HEADERS.search(body)
    composer = _COMPOSER.search(body)
    if headers is None or composer is None:
        raise PageError(f"{url} is not the chat page: {body[:200]!r}")
    token = FORM_TOKEN.search(body, composer.end())
    select = _SELECT.search(body, composer.end())
    holder = _SOCKET_HOLDER.search(body)
    after = _AFTER.search(body, composer.end())
    return Page(
        url=url,
        csrf_header=orjson.loads(html.unescape(headers.group(1)))["X-CSRFToken"],
        form_token=token.group(1) if token else "",
        send_path=_attrs(composer.group())["hx-post"],
        after=after.group(1) if after else "",
        models=tuple(html.unescape(m) for m in _OPTION.findall(select.group(1) if select else "")),
        socket_path=_attrs(holder.group()).get("data-socket-path") if holder else None,
        answers=tuple(parse_answers(body)),
        assets=tuple(dict.fromkeys(_ASSET.findall(body))),
    )


def parse_swap(body: str) -> tuple[int, list[Answer]] | None:
    """A new conversation as the send POST returns it for htmx to swap in (`_new_conversation`):
    its id and answers, or None if the body is not one."""
    main = _MAIN.search(body)
    conversation = _attrs(main.group()).get("data-conversation") if main else None
    if not conversation:
        return None
    return int(conversation), parse_answers(body)
