"""A conversation as a file to keep: JSON with everything on record, Markdown to read.

The JSON holds every message, each with its `parent`, so the branches (edited questions,
regenerated answers) survive; the Markdown is the branch on screen (`tree.shown_path`). Both
carry what the gateway reported: models, the gateway's generation ID (`upstream_id`) and request
ID, usage, and each cost with its unit and source; an imported answer, the model the other app
named (`imported_model`). Attachments are described, not included: their
bytes (and `data:` URLs) stay out, their size is given; so are the files a user attached (their
`files`), with a document's text as the model was sent it. In the Markdown an answer's own headings
move two levels down, so that its "# Title" is a section of its "## Assistant".

Amounts are exact decimals written as strings ("0.00013"), since a JSON number is read back as
a float; times are ISO 8601 with their offset, to the microsecond, so the file reads back equal
to the database.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.db.models import Prefetch
from django.utils import timezone
from django.utils.text import slugify

from chatapp.conversations import uploads
from chatapp.conversations.models import Conversation, Message, Upload
from chatapp.conversations.presentation import error_text, format_cost, token_counts
from chatapp.conversations.tree import shown_path
from chatapp.costs.models import Generation
from chatapp.gateways.units import CostUnit
from chatapp.rendering import attachments
from chatapp.rendering.settle_steps import closes_fence

__all__ = ["FORMAT", "as_data", "as_json", "as_markdown", "branch_shown", "filename", "messages_of"]

FORMAT = "gateway-chat/conversation@1"


def messages_of(conversation: Conversation) -> list[Message]:
    """Every message of `conversation`, oldest first, with its generation and gateway."""
    return list(
        conversation.messages.select_related("generation__gateway")
        .prefetch_related(Prefetch("uploads", queryset=Upload.objects.defer("data")))
        .order_by("created_at", "id")
    )


def branch_shown(conversation: Conversation, messages: list[Message]) -> list[Message]:
    """The messages of the branch on screen (`tree.shown_path`), root first."""
    by_pk = {message.pk: message for message in messages}
    return [by_pk[item.message.pk] for item in shown_path(conversation) if item.message.pk in by_pk]


def filename(conversation: Conversation, extension: str) -> str:
    """A download name from the title, ASCII only: "plan-a-trip-to-lisbon-12.md"."""
    stem = slugify(conversation.title)[:60].strip("-") or "conversation"
    return f"{stem}-{conversation.pk}.{extension}"


# --- JSON -----------------------------------------------------------------------------------------


def as_json(conversation: Conversation, messages: list[Message]) -> str:
    return json.dumps(as_data(conversation, messages), ensure_ascii=False, indent=2) + "\n"


def as_data(conversation: Conversation, messages: list[Message]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "exported_at": timezone.now().isoformat(),
        "conversation": {
            "id": conversation.pk,
            "title": conversation.title,
            "created_at": conversation.created_at.isoformat(),
            "updated_at": conversation.updated_at.isoformat(),
            "gateway": conversation.gateway.name if conversation.gateway else None,
            "model": conversation.model,
            "current_leaf": conversation.current_leaf_id,
            "settings": {
                "system_prompt": conversation.system_prompt,
                "temperature": conversation.temperature,
                "max_tokens": conversation.max_tokens,
                "reasoning_effort": conversation.reasoning_effort,
            },
        },
        "messages": [_message(message) for message in messages],
    }


def _message(message: Message) -> dict[str, Any]:
    generation = getattr(message, "generation", None)
    return {
        "id": message.pk,
        "parent": message.parent_id,
        "role": message.role,
        "created_at": message.created_at.isoformat(),
        "content": message.content,
        "reasoning": message.reasoning,
        "reasoning_details": message.reasoning_details,
        "tool_calls": message.tool_calls,
        "citations": message.annotations,
        "attachments": [_attachment(item) for item in _items(message)],
        "files": [_file(upload) for upload in message.uploads.all()],
        "generation": None if generation is None else _generation(generation),
        "imported_model": message.imported_model,
    }


def _file(upload: Upload) -> dict[str, Any]:
    """A file the user attached, without its bytes: what it is, and a document's text."""
    described: dict[str, Any] = {
        "kind": upload.kind,
        "filename": upload.filename,
        "media_type": upload.media_type,
        "bytes": upload.size,
    }
    if upload.kind == Upload.Kind.DOCUMENT:
        described.update(text=upload.text, cut=upload.cut)
    if upload.pages is not None:
        described.update(pages=upload.pages, pages_read=upload.pages_read)
    return described


def _generation(generation: Generation) -> dict[str, Any]:
    def when(value: Any) -> str | None:
        return value.isoformat() if value is not None else None

    failed = bool(generation.error_status or generation.error_code or generation.error_message)
    return {
        "gateway": generation.gateway.name if generation.gateway else None,
        "dialect": generation.dialect,
        "model": generation.model,
        "served_model": generation.served_model,
        "upstream_id": generation.upstream_id,
        "request_id": generation.request_id,
        "status": generation.status,
        "finish_reason": generation.finish_reason,
        "max_tokens": generation.max_tokens,
        "usage": {
            "prompt_tokens": generation.prompt_tokens,
            "completion_tokens": generation.completion_tokens,
            "reasoning_tokens": generation.reasoning_tokens,
            "cached_tokens": generation.cached_tokens,
            "reported": generation.usage,
        },
        "cost": {
            "amount": None if generation.cost is None else _decimal(generation.cost),
            "unit": generation.cost_unit,
            "source": generation.cost_source,
            "note": generation.cost_note,
        },
        "started_at": when(generation.started_at),
        "first_token_at": when(generation.first_token_at),
        "finished_at": when(generation.finished_at),
        "ttft_ms": generation.ttft_ms,
        "thinking_ms": generation.thinking_ms,
        "error": {
            "status": generation.error_status,
            "code": generation.error_code,
            "type": generation.error_type,
            "message": generation.error_message,
            "retry_after": generation.retry_after,
        }
        if failed
        else None,
        "warnings": generation.warnings,
    }


def _decimal(amount: Decimal) -> str:
    return format(amount.normalize(), "f") if amount else "0"


def _items(message: Message) -> list[Mapping[str, Any]]:
    items = message.attachments if isinstance(message.attachments, list) else []
    return [item for item in items if isinstance(item, Mapping)]


def _attachment(item: Mapping[str, Any]) -> dict[str, Any]:
    """What an attachment is, without its bytes: its fields but `data`, and its size."""
    described = {key: value for key, value in item.items() if key not in ("data", "url")}
    data = attachments.decoded(item)
    url = item.get("url")
    inline = attachments.data_url(url) if isinstance(url, str) else None
    if inline is not None:
        described.setdefault("media_type", inline[0])
        data = inline[1]
    elif isinstance(url, str):
        described["url"] = url
    if data is not None:
        described["bytes"] = len(data)
    return described


# --- Markdown -------------------------------------------------------------------------------------


def as_markdown(conversation: Conversation, messages: list[Message]) -> str:
    path = branch_shown(conversation, messages)
    lines = [
        f"# {conversation.title or 'Untitled'}",
        "",
        f"Exported from Gateway Chat on {_time(timezone.now())}; started "
        f"{_time(conversation.created_at)}. The branch shown: {len(path)} of {len(messages)} "
        "messages (the JSON export has every branch).",
    ]
    for message in path:
        lines += ["", *_message_lines(message)]
    return "\n".join(lines).rstrip() + "\n"


def _time(value: Any) -> str:
    return str(timezone.localtime(value).strftime("%Y-%m-%d %H:%M %Z"))


def _message_lines(message: Message) -> list[str]:
    if message.role == Message.Role.USER:
        lines = [f"## You · {_time(message.created_at)}", "", message.content]
        files = list(message.uploads.all())
        if files:
            lines += ["", "Attached:", ""]
            lines += [f"- {_inline(uploads.described(upload))}" for upload in files]
        return lines
    lines = [f"## Assistant · {_time(message.created_at)}"]
    if message.reasoning:
        quoted = [f"> {line}".rstrip() for line in message.reasoning.split("\n")]
        lines += ["", "> **Thinking**", ">", *quoted]
    if message.content:
        lines += ["", _answer_text(message.content)]
    calls = message.tool_calls if isinstance(message.tool_calls, list) else []
    for call in (call for call in calls if isinstance(call, Mapping)):
        arguments = str(call.get("arguments") or "")
        fence = _fence(arguments)
        name = _code(str(call.get("name") or "tool"))
        lines += ["", f"Tool call {name}:", "", fence, arguments, fence]
    annotations = message.annotations if isinstance(message.annotations, list) else []
    citations = [item for item in annotations if isinstance(item, Mapping)]
    if citations:
        lines += ["", "Sources:", ""]
        for number, citation in enumerate(citations, 1):
            url = str(citation.get("url") or "")
            title = _inline(str(citation.get("title") or url or "source"))
            lines.append(
                f"{number}. [{title}]({_link(url)})" if _link(url) else f"{number}. {title}"
            )
    items = _items(message)
    if items:
        lines += ["", "Attachments:", ""]
        lines += [f"- {_attachment_words(_attachment(item))}" for item in items]
    generation = getattr(message, "generation", None)
    if generation is not None:
        lines += ["", "Generation:", "", *_generation_lines(generation)]
    elif message.imported_model:
        said = f"Model: {_code(message.imported_model)}, as the app it was imported from said."
        lines += ["", said]
    return lines


def _generation_lines(generation: Generation) -> list[str]:
    model = _code(generation.model)
    if generation.served_model and generation.served_model != generation.model:
        model += f" (served as {_code(generation.served_model)})"
    if generation.gateway:
        model += f" via {_inline(generation.gateway.name)}"
    lines = [f"- Model: {model}", f"- Status: {generation.status}"]
    if generation.finish_reason:
        lines.append(f"- Finish reason: {_code(generation.finish_reason)}")
    error = error_text(generation)
    if error:
        lines.append(f"- Error: {_inline(error)}")
    if generation.upstream_id:
        lines.append(f"- Generation ID: {_code(generation.upstream_id)}")
    if generation.request_id:
        lines.append(f"- Request ID: {_code(generation.request_id)}")
    tokens = token_counts(generation, ", ")
    if tokens:
        lines.append(f"- Tokens: {tokens}")
    cost = format_cost(generation)
    if generation.cost is not None:
        unit = generation.cost_unit
        label = CostUnit(unit).label if unit in CostUnit.values else unit
        cost += f" ({label}; {Generation.CostSource(generation.cost_source).label})"
        if generation.cost_note:
            cost += f": {generation.cost_note}"
    lines.append(f"- Cost: {_inline(cost)}")
    return lines


def _attachment_words(described: Mapping[str, Any]) -> str:
    kind = str(described.get("kind") or "attachment")
    words = _inline("image" if kind == "image_url" else kind)  # a reader sees an image either way
    if described.get("filename"):
        words += f" {_code(str(described['filename']))}"
    link = _link(str(described.get("url") or ""))
    if link:
        words += f" {link}"
    details = [_inline(str(described["media_type"]))] if described.get("media_type") else []
    if "bytes" in described:
        details.append(f"{described['bytes']:,} bytes")
    return words + (f" ({', '.join(details)})" if details else "")


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_BREAK = re.compile(r" {0,3}([*_])(?:[ \t]*\1){2,}[ \t]*$")
_CONTAINER = re.compile(r" {0,3}(?:>|[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$))| {4}|\t")
HEADINGS_DOWN = 2  # an answer's "# Title" is a section of its "## Assistant": "### Title"


def _answer_text(text: str) -> str:
    """An answer's text as a part of the file: its headings, ATX and setext, moved down under
    its "## Assistant" (never past `######`, never in code), and a code fence left open (an
    answer cut off mid-block) closed, so what follows it in the file is not read as code."""
    lines: list[str] = []
    # The lines of the paragraph under way, which a setext underline makes a heading; None in a
    # list, a quote or indented code, where an underline is not one.
    paragraph: list[str] | None = []
    opened = ""
    for line in text.split("\n"):
        fence = _FENCE.match(line)
        if opened:
            if closes_fence(line.rstrip("\r"), opened):
                opened = ""
            lines.append(line)
            continue
        heading = _ATX.match(line)
        underline = _SETEXT.match(line)
        if fence is not None:
            opened, paragraph = fence[1], []
        elif not line.strip():
            paragraph = []
        elif heading is not None:
            line = _heading(len(heading[1]), line[heading.end() :].strip())
            paragraph = []
        elif underline is not None and paragraph:
            del lines[-len(paragraph) :]
            level = 1 if underline[1][0] == "=" else 2
            line = _heading(level, " ".join(part.strip() for part in paragraph))
            paragraph = []
        elif underline is not None or _BREAK.match(line):
            paragraph = []
        elif paragraph is not None:
            paragraph = None if not paragraph and _CONTAINER.match(line) else [*paragraph, line]
        lines.append(line)
    return "\n".join([*lines, opened] if opened else lines)


def _heading(level: int, text: str) -> str:
    return f"{'#' * min(6, level + HEADINGS_DOWN)} {text}".rstrip()


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _code(text: str) -> str:
    """`text` as inline code, on one line."""
    text = " ".join(text.split())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _link(url: str) -> str:
    """An http(s) URL as a Markdown link destination, or "" for anything else."""
    return f"<{url}>" if re.fullmatch(r"https?://[^\s<>]+", url) else ""


def _inline(text: str) -> str:
    """Words on one line, with Markdown's markup characters escaped."""
    return re.sub(r"([\\`*_\[\]<>])", r"\\\1", " ".join(text.split()))
