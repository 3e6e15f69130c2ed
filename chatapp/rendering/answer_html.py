"""An answer's final HTML: rendered once, in the render pool, and kept on its `Message`.

The worker renders an answer as it ends (`LiveState.finish_render`, through the pool from the
loop) and `persistence.save_final` stores it with its `render_key`: a digest of the renderer's
`RENDERER_VERSION`, the content, the citations and the `doc_id` its footnote ids carry, so a
stored render is used only for exactly
what it rendered, whatever changed the row since. A page view only reads it (`stored_html`). A
row without a matching one (an answer the sweep interrupted, an older row, a renderer since
changed) is rendered through the pool from the view's thread, and stored.

A render that ran out of its deadline, or crashed, is kept as its plain-text fallback: the same
answer would only run out again, on every view (an answer of 12,500 task items once took 25 s per
view). One the pool was too busy for is shown as plain text but not kept: the next view tries.

Messages stand above rendering (`conversations`), so an answer is read here by the fields a render
keeps (`StoredAnswer`), and a render finished after its page gave up is stored through the app's
model registry rather than an import of `Message`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from django.apps import apps
from django.conf import settings
from django.db import connection

from chatapp.rendering import pool as render_pool
from chatapp.rendering import pool_jobs
from chatapp.rendering.markdown import RENDERER_VERSION, doc_id_for, plain_text_html
from chatapp.rendering.pool import Runner

type Citations = Sequence[Mapping[str, object]]


class StoredAnswer(Protocol):
    """An answer as it is kept (`conversations.models.Message`): what its render is of, and the
    render with its key."""

    html: str
    html_key: str

    @property
    def pk(self) -> Any: ...

    @property
    def content(self) -> str: ...

    @property
    def annotations(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class RenderedAnswer:
    """The HTML of `text` with `citations` under `doc_id`; `keep` unless it is a fallback for a
    busy pool."""

    text: str
    citations: list[dict[str, object]]
    doc_id: str
    html: str
    keep: bool


def _rendered(text: str, citations: Citations, doc_id: str, result: object) -> RenderedAnswer:
    cited = [dict(item) for item in citations]
    if isinstance(result, str):
        return RenderedAnswer(text, cited, doc_id, result, keep=True)
    kind = result.kind if isinstance(result, render_pool.Failure) else "crashed"
    html = plain_text_html(text, kind)
    return RenderedAnswer(text, cited, doc_id, html, keep=kind != "busy")


def render_answer_sync(text: str, citations: Citations, doc_id: str) -> RenderedAnswer:
    if not text:
        return RenderedAnswer(text, [dict(c) for c in citations], doc_id, "", keep=True)
    result = render_pool.run_sync(pool_jobs.render, text, list(citations), doc_id)
    return _rendered(text, citations, doc_id, result)


async def render_answer(
    text: str, citations: Citations, doc_id: str, run: Runner | None = None
) -> RenderedAnswer:
    """`render_answer_sync` for the loop; `run` is the pool's (`render_pool.run`) unless given."""
    if not text:
        return RenderedAnswer(text, [dict(c) for c in citations], doc_id, "", keep=True)
    result = await (run or render_pool.run)(pool_jobs.render, text, list(citations), doc_id)
    return _rendered(text, citations, doc_id, result)


def citations_of(message: StoredAnswer) -> list[dict[str, object]]:
    """A stored answer's citations, as its render is given them."""
    stored = message.annotations if isinstance(message.annotations, list) else []
    return [item if isinstance(item, dict) else {} for item in stored]


def render_key(text: str, citations: Citations, doc_id: str) -> str:
    """What a render is of: the renderer's version, the text, what it reads of citations, and
    the `doc_id` its footnote ids carry (two messages of the same text render differently)."""
    cited = [[item.get("url"), item.get("title")] for item in citations]
    digest = hashlib.sha256(orjson.dumps([RENDERER_VERSION, text, cited, doc_id], default=str))
    return digest.hexdigest()


def keep(message: StoredAnswer, rendered: RenderedAnswer | None) -> None:
    """Set `message.html` from `rendered` if it is the render of what the message now holds
    (else clear it: the next view renders it); the caller saves the message."""
    key = render_key(message.content, citations_of(message), doc_id_for(message.pk))
    if (
        rendered is not None
        and rendered.keep
        and render_key(rendered.text, rendered.citations, rendered.doc_id) == key
    ):
        message.html, message.html_key = rendered.html, key
    else:
        message.html, message.html_key = "", ""


def stored_html(message: StoredAnswer) -> str:
    """The answer's final HTML: the stored render, or one made now if there is none of what it
    holds by this renderer. A page waits for that at most `CHAT_RENDER_PAGE_WAIT` seconds: every
    sync view (the login page's too) runs on one thread, which a slow render would hold. Past
    it, the answer shows as plain text for now, and its render is stored once done, for the
    next view."""
    citations = citations_of(message)
    key = render_key(message.content, citations, doc_id_for(message.pk))
    if message.html_key == key:
        return message.html
    job = _rendering(message.pk, message.content, citations, key)
    try:
        rendered = job.future.result(timeout=settings.CHAT_RENDER_PAGE_WAIT)
    except TimeoutError:
        with _lock:
            job.abandoned = not job.future.done()
        if job.abandoned:
            return plain_text_html(message.content, "pending")
        rendered = job.future.result()
    _store(message.pk, key, rendered)
    message.html, message.html_key = rendered.html, key
    return rendered.html


@dataclass(slots=True)
class _Job:
    """A render a page asked for; `abandoned` once no page waits for it (it stores itself)."""

    future: Future[RenderedAnswer]
    abandoned: bool = False


_background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="render-store")
_under_way: dict[str, _Job] = {}  # by render key
_lock = threading.Lock()
MAX_UNDER_WAY = 256


def _rendering(pk: int, text: str, citations: Citations, key: str) -> _Job:
    """The render of this answer under way (one per key), started if need be."""
    with _lock:
        found = _under_way.get(key)
        if found is not None:
            return found
        job = _Job(Future())
        if len(_under_way) >= MAX_UNDER_WAY:
            job.future.set_result(
                _rendered(text, citations, doc_id_for(pk), render_pool.Failure("busy"))
            )
            return job
        _under_way[key] = job

    def render() -> None:
        try:
            rendered = render_answer_sync(text, citations, doc_id_for(pk))
        except BaseException as exc:
            job.future.set_exception(exc)
            raise
        finally:
            with _lock:
                _under_way.pop(key, None)
                abandoned = job.abandoned
        job.future.set_result(rendered)
        if abandoned:
            try:
                _store(pk, key, rendered)
            finally:
                connection.close()  # this thread's own

    _background.submit(render)
    return job


def _store(pk: int, key: str, rendered: RenderedAnswer) -> None:
    if rendered.keep and render_key(rendered.text, rendered.citations, rendered.doc_id) == key:
        messages = apps.get_model("chatapp", "Message")._default_manager
        messages.filter(pk=pk, content=rendered.text).update(html=rendered.html, html_key=key)
