"""An answer's final HTML: rendered once, in the render pool, and kept on its `Message`.

The worker renders an answer as it ends (`LiveState.take_last_delta`, through the pool from the
loop) and `persistence.save_final` stores it with its `render_key`: a digest of the renderer's
`RENDERER_VERSION`, the content and the citations, so a stored render is used only for exactly
what it rendered, whatever changed the row since. A page view only reads it (`stored_html`). A
row without a matching one (an answer the sweep interrupted, an older row, a renderer since
changed) is rendered through the pool from the view's thread, and stored.

A render that ran out of its deadline, or crashed, is kept as its plain-text fallback: the same
answer would only run out again, on every view (an answer of 12,500 task items once took 25 s per
view). One the pool was too busy for is shown as plain text but not kept: the next view tries.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import orjson

from . import live_blocks, render_jobs, render_pool
from .live_blocks import Runner
from .models import Message
from .rendering import RENDERER_VERSION, doc_id_for, plain_text_html

type Citations = Sequence[Mapping[str, object]]


@dataclass(frozen=True, slots=True)
class RenderedAnswer:
    """The HTML of `text` with `citations`; `keep` unless it is a fallback for a busy pool."""

    text: str
    citations: list[dict[str, object]]
    html: str
    keep: bool


def _rendered(text: str, citations: Citations, result: object) -> RenderedAnswer:
    cited = [dict(item) for item in citations]
    if isinstance(result, str):
        return RenderedAnswer(text, cited, result, keep=True)
    kind = result.kind if isinstance(result, render_pool.Failure) else "crashed"
    return RenderedAnswer(text, cited, plain_text_html(text, kind), keep=kind != "busy")


def render_answer_sync(text: str, citations: Citations, doc_id: str) -> RenderedAnswer:
    if not text:
        return RenderedAnswer(text, [dict(c) for c in citations], "", keep=True)
    result = render_pool.run_sync(render_jobs.render, text, list(citations), doc_id)
    return _rendered(text, citations, result)


async def render_answer(
    text: str, citations: Citations, doc_id: str, run: Runner | None = None
) -> RenderedAnswer:
    """`render_answer_sync` for the loop; `run` is the pool's (`render_pool.run`) unless given."""
    if not text:
        return RenderedAnswer(text, [dict(c) for c in citations], "", keep=True)
    result = await (run or render_pool.run)(render_jobs.render, text, list(citations), doc_id)
    return _rendered(text, citations, result)


def citations_of(message: Message) -> list[dict[str, object]]:
    """A stored answer's citations, as its render is given them."""
    stored = message.annotations if isinstance(message.annotations, list) else []
    return [item if isinstance(item, dict) else {} for item in stored]


def render_key(text: str, citations: Citations) -> str:
    """What a render is of: the renderer's version, the text and what it reads of citations."""
    cited = [[item.get("url"), item.get("title")] for item in citations]
    digest = hashlib.sha256(orjson.dumps([RENDERER_VERSION, text, cited], default=str))
    return digest.hexdigest()


def keep(message: Message, rendered: RenderedAnswer | None) -> None:
    """Set `message.html` from `rendered` if it is the render of what the message now holds
    (else clear it: the next view renders it); the caller saves the message."""
    key = render_key(message.content, citations_of(message))
    if (
        rendered is not None
        and rendered.keep
        and render_key(rendered.text, rendered.citations) == key
    ):
        message.html, message.html_key = rendered.html, key
    else:
        message.html, message.html_key = "", ""


def stored_html(message: Message) -> str:
    """The answer's final HTML: the stored render, or one made now (and stored) if there is
    none of what it holds by this renderer."""
    citations = citations_of(message)
    key = render_key(message.content, citations)
    if message.html_key == key:
        return message.html
    rendered = render_answer_sync(message.content, citations, doc_id_for(message.pk))
    if rendered.keep:
        Message.objects.filter(pk=message.pk, content=message.content).update(
            html=rendered.html, html_key=key
        )
        message.html, message.html_key = rendered.html, key
    return rendered.html


def partial_html(message: Message) -> live_blocks.PartialAnswer:
    """A streaming answer's settled blocks and its tail, rendered in the pool; all text when
    the pool gives no result (the live snapshot that follows renders it)."""
    text = message.content
    if not text:
        return live_blocks.PartialAnswer("", 0, text)
    result = render_pool.run_sync(
        render_jobs.partial, text, citations_of(message), doc_id_for(message.pk)
    )
    if isinstance(result, live_blocks.PartialAnswer):
        return result
    return live_blocks.PartialAnswer("", 0, text)
