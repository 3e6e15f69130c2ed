"""Template filters that turn stored answers into safe HTML and plain-words status lines.

They render nothing themselves: an answer's HTML is its stored final render, or made in the
render pool, off the event loop and under its deadline (`rendering/answer_html.py`)."""

from __future__ import annotations

from collections.abc import Mapping

from django import template
from django.utils.safestring import SafeString, mark_safe

from chatapp.conversations import feedback, knowledge_context, presentation, uploads
from chatapp.conversations.models import Message, Upload
from chatapp.costs.models import Feedback, Generation
from chatapp.read_aloud import offer
from chatapp.rendering import answer_html as answer_render
from chatapp.rendering import attachments
from chatapp.rendering.markdown import (
    doc_id_for,
    linkable_url,
    passage_anchor,
    showable_image_url,
)
from chatapp.streaming import live_blocks
from chatapp.tools.call_view import ToolCallView, tool_call_view

register = template.Library()


@register.filter
def partial_answer(message: Message) -> live_blocks.PartialAnswer:
    """A streaming answer as text: its blocks come rendered with the live snapshot the page asks
    for as it opens. A render here would hold the request thread every sync view shares (the
    login page's too) for as long as the render took."""
    return live_blocks.PartialAnswer("", 0, message.content)


@register.filter
def upload_words(upload: Upload) -> str:
    """What a file attached to a message is: "report.pdf (PDF, 3 pages, 80.2 KB)"."""
    return uploads.described(upload)


@register.filter
def seconds(milliseconds: int) -> str:
    """A duration in whole seconds, at least 1 ("Thought for 1 s", not "0 s")."""
    return str(max(1, round(milliseconds / 1000)))


@register.filter
def answer_html(message: Message) -> SafeString:
    """A finished answer as `render_markdown` renders it, its `[n]` linked to its citations and its
    footnote ids its own: its stored render."""
    return mark_safe(answer_render.stored_html(message))  # sanitized by nh3 when rendered


@register.filter
def error_text(generation: Generation | str) -> str:
    if not isinstance(generation, Generation):
        return ""  # an imported answer: no generation
    return presentation.error_text(generation)


@register.filter
def warning_texts(generation: Generation | str) -> list[str]:
    if not isinstance(generation, Generation):
        return []  # an imported answer: no generation
    return presentation.warning_texts(generation)


@register.filter
def meta_items(generation: Generation | str) -> list[str]:
    if not isinstance(generation, Generation):
        return []  # an imported answer: no generation
    return presentation.meta_items(generation)


@register.filter
def link_href(url: object) -> str | None:
    """A stored citation URL, checked again at the page (defence in depth), else None."""
    return linkable_url(url) if isinstance(url, str) else None


@register.filter
def remote_image_href(attachment: Mapping[str, object]) -> str | None:
    """The link to a remote image, which the page never loads: https only, as `attachments` keeps
    them (checked again here, in depth), else None."""
    url = attachment.get("url")
    href = linkable_url(url) if isinstance(url, str) else None
    return href if href is not None and href.startswith("https://") else None


@register.filter
def image_src(attachment: Mapping[str, object]) -> str | None:
    url = attachment.get("url")
    return showable_image_url(url) if isinstance(url, str) else None


@register.filter
def preview_src(attachment: Mapping[str, object]) -> str | None:
    return attachments.preview_url(attachment)


@register.filter
def playable(attachment: Mapping[str, object]) -> bool:
    return attachments.playable_type(attachment) is not None


@register.filter
def download_name(attachment: Mapping[str, object]) -> str:
    return attachments.safe_filename(attachment.get("filename"), "file")


@register.filter
def finish_note(generation: Generation | str) -> presentation.FinishNote | None:
    if not isinstance(generation, Generation):
        return None  # an imported answer: no generation
    return presentation.finish_note(generation)


@register.filter
def tool_call(call: Mapping[str, object]) -> ToolCallView:
    return tool_call_view(call)


@register.inclusion_tag("chatapp/_tool_call.html")
def blank_tool_call() -> dict[str, object]:
    """The markup of a tool call the model has only begun, flag and result included, for the
    page's `<template>`: live_render.js clones it for a call still streaming, so that it is the
    final render's markup (`_tool_call.html`), written once."""
    return {"call": {}, "blank": True}


@register.filter
def tools_ran(calls: list[Mapping[str, object]]) -> bool:
    """Whether the app ran (or settled not to run) any of an answer's tool calls."""
    return any(call.get("status") for call in calls)


@register.filter
def can_read_aloud(message: Message) -> bool:
    return offer.can_read_aloud(message)


@register.filter
def takes_feedback(message: Message) -> bool:
    return feedback.can_rate(message)


@register.simple_tag(takes_context=True)
def feedback_on(context: template.Context, message: Message) -> Feedback | None:
    """The signed-in user's feedback on `message` (read once per page: `feedback.given`)."""
    request = context.get("request")
    return feedback.given(request, message) if request is not None else None


@register.filter
def passages_summary(generation: Generation | None) -> str:
    """What an answer drew on: "3 passages from Handbook.pdf" ("" for none)."""
    return knowledge_context.summary(generation.passages) if generation else ""


@register.filter
def passage_where(record: Mapping[str, object]) -> str:
    """Where a passage is in its file: "page 3", "§ Leave" or ""."""
    return knowledge_context.where(record)


@register.simple_tag
def passage_id(message: Message, number: int) -> str:
    """The id the answer's `[number]` links to (`markdown.passage_anchor`)."""
    return passage_anchor(doc_id_for(message.pk), number)


@register.filter
def web_citations(annotations: object) -> list[dict[str, object]]:
    """A message's citations but those of passages, which show under it as passages."""
    return knowledge_context.web_citations(annotations)
