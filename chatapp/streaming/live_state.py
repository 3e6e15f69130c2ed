"""What browsers were sent of a running answer, up to `seq`, and what is pending.

The stream's `Accumulator` is the one fold of everything the gateway said (usage, cost, finish
reason, reasoning details, IDs, media); the worker reads it as `stream.completion`, or
`exc.completion` after a failure. This keeps only what that fold cannot: the visible part split at
the last delta sent. Events only append to `pending` (cheap, per token). Every ~50 ms the worker
takes them as one sequence-numbered delta, coalesced by a throwaway `Accumulator` and folded into
`sent`, so the channel layer carries a few messages a second whatever the token rate, and never
the whole message. A snapshot is the sent part with its `seq`: a browser that applies later deltas
on top of it sees no gap and no duplicate. Nothing here knows Django, so it is tested as a pure
fold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chatapp.messaging.socket_messages import frame_count
from chatapp.rendering.attachments import MediaKind, image_url_attachment
from chatapp.rendering.image_checks import (
    MAX_PREVIEW_BYTES,
    MAX_PREVIEW_IMAGES,
    ImageRefused,
    checked_image,
)
from chatapp.rendering.markdown import citation
from chatapp.streaming.live_blocks import BlockSettler, SettledChunk
from gateway_client.accumulator import Accumulator, Completion
from gateway_client.events import (
    Annotation,
    Artifact,
    AudioOutput,
    Event,
    ImageOutput,
    Meta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)

if TYPE_CHECKING:
    from chatapp.rendering.answer_html import RenderedAnswer

# A delta goes out once it has this many characters of text, or its oldest part is this old (s), or
# it is the answer's first output, or it carries more than text (a tool call, a citation, media).
MIN_DELTA_TEXT = 16
MAX_DELTA_DELAY = 0.075


@dataclass(slots=True)
class LiveState:
    seq: int = 0
    pending: list[Event] = field(default_factory=list)
    sent: Accumulator = field(default_factory=Accumulator)
    blocks: BlockSettler = field(default_factory=BlockSettler)
    thinking_since: float | None = None  # when the first reasoning arrived (the `apply` clock)
    thinking_until: float | None = None  # when the answer after it began
    _audio_seen: bool = False
    _pending_text: int = 0  # characters of text and reasoning waiting in `pending`
    _pending_since: float = 0.0
    _pending_rich: bool = False
    # The runs of the answer's tool calls (`tool_loop.CallRun.to_dict()` by index), once the
    # stream has ended: all of them for a snapshot, those changed since the last delta for it.
    tool_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    _pending_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    final_render: RenderedAnswer | None = None  # the answer's render, once it has ended
    # The last settled chunk, once `finish_render` has settled the rest; meanwhile no delta
    # takes a chunk of its own, as the settler is finishing.
    _last_chunk: SettledChunk | None = None
    _finishing: bool = False
    # The citations of the passages the answer's context quotes (`knowledge_context.citations`),
    # [1] first: known before it starts, so its marks link from the first chunk rendered.
    sources: tuple[dict[str, Any], ...] = ()

    def citations(self) -> list[dict[str, Any]]:
        """The answer's citations so far: its passages', then those the stream has carried."""
        return [*self.sources, *(citation(a) for a in self.sent.annotations)]

    def ready(self, now: float) -> bool:
        """Whether the pending part should go out at `now` (seconds, any monotonic clock).

        Text is coalesced for up to `MAX_DELTA_DELAY` so that each message carries enough of it to
        outweigh its envelope (at 50 tokens/s a 50 ms delta held ~10 bytes of text in ~15 of
        framing); the first output and anything but text go at once. A late tick sends more text,
        never more messages.
        """
        if not self._finishing and self.blocks.poll(now):
            return True  # a parse ended: its settled chunk or draft goes out without waiting
        if not self.pending and not self._pending_runs:
            return False
        return (
            self.seq == 0
            or self._pending_rich
            or self._pending_text >= MIN_DELTA_TEXT
            or now - self._pending_since >= MAX_DELTA_DELAY
        )

    def apply(self, event: Event, now: float = 0.0) -> bool:
        """Queue `event` for browsers if they are shown it; True when it was queued."""
        match event:
            case TextDelta(text=text) | ReasoningDelta(text=text):
                if not text:
                    return False
                self._pending_text += len(text)
                if isinstance(event, ReasoningDelta):
                    if self.thinking_since is None:
                        self.thinking_since = now
                elif self.thinking_since is not None and self.thinking_until is None:
                    self.thinking_until = now
            case ImageOutput(url=None, b64=str(b64)):
                # An image stream's picture replaces the one before it for its index. It waits in
                # `previews`, not `pending`: folded, it would count among the answer's attachments
                # (whose bytes come with the final render), so a no-op event stands in for it.
                if not self.preview_image(event.index, b64, partial=event.partial):
                    return False
                event = Meta(None, None)
                self._pending_rich = True
            case ImageOutput():
                if image_url_attachment(event) is None:  # previews, SVG, unsafe URLs: never shown
                    return False
                self._pending_rich = True
            case ToolCallDelta() | Annotation() | Artifact():
                self._pending_rich = True
            case AudioOutput():
                # The clip is the stream's to join; browsers only learn, once, that it is coming.
                if self._audio_seen:
                    return False
                self._audio_seen = True
                event = AudioOutput("", "", event.format)
                self._pending_rich = True
            case _:
                return False
        if not self.pending:
            self._pending_since = now
        self.pending.append(event)
        return True

    def set_tool_run(self, run: dict[str, Any], now: float = 0.0) -> None:
        """A tool call's run began or ended: browsers get it with the next delta, at once."""
        if not self.pending and not self._pending_runs:
            self._pending_since = now
        self.tool_runs[run["index"]] = run
        self._pending_runs[run["index"]] = run
        self._pending_rich = True

    @classmethod
    def for_answer(cls, doc_id: str, sources: tuple[dict[str, Any], ...] = ()) -> LiveState:
        """The state of an answer whose blocks render as its final render will (`doc_id`, and
        its citations: the passages' `sources` and those arrived so far)."""
        from chatapp.rendering import pool as render_pool

        render_pool.warm()  # its processes start while the gateway thinks
        state = cls(sources=sources)
        state.blocks = BlockSettler(doc_id, state.citations)
        return state

    def take_delta(self) -> dict[str, object] | None:
        """Move what is pending to `sent` and return it as the next numbered delta, if any.

        A delta also carries the HTML of the blocks settled since the last one (`live_blocks`):
        their parse runs in the render pool meanwhile, so a delta never waits for it.
        """
        delta = self._take_fields(last=False)
        if self._finishing:
            return self._numbered(delta, None)
        chunk = self.blocks.ready()
        changed, draft = self.blocks.take_draft()
        return self._numbered(delta, chunk, draft, redraft=changed)

    async def finish_render(self) -> None:
        """Once the answer has ended: settle all the rest and render the answer as a whole
        (`final_render`, which `persistence.save_final` stores), for `take_last_delta`. It takes
        the render pool's time, so nothing a snapshot needs waits for it."""
        from chatapp.rendering.answer_html import render_answer

        self._finishing = True
        self._last_chunk = await self.blocks.finish()
        citations = self.citations()
        blocks = self.blocks
        self.final_render = await render_answer(
            self.content, citations, blocks.doc_id, blocks.runner
        )

    def take_last_delta(self) -> dict[str, object] | None:
        """`take_delta` after `finish_render`: the rest of the answer's fields and its last
        settled blocks."""
        delta = self._take_fields(last=True)
        chunk, self._last_chunk = self._last_chunk, None
        return self._numbered(delta, chunk)

    def _numbered(
        self,
        delta: dict[str, object] | None,
        chunk: SettledChunk | None,
        draft: SettledChunk | None = None,
        *,
        redraft: bool = False,
    ) -> dict[str, object] | None:
        if chunk is not None:
            delta = delta if delta is not None else {}
            delta["settled"] = chunk.to_wire()
        if redraft and (draft is not None or chunk is None):  # a settle drops a draft by itself
            delta = delta if delta is not None else {}
            delta["draft"] = draft.to_wire() if draft is not None else None
        if not delta:
            return None
        # A delta with more text than a frame holds goes as several, each numbered
        # (`socket_messages.delta_frames`): its number is the last one's.
        self.seq += frame_count(delta)
        return {"seq": self.seq, **delta}

    def _take_fields(self, *, last: bool) -> dict[str, object] | None:
        events = self.pending
        runs = self._pending_runs
        if not events and not runs and not last:
            return None
        rich = self._pending_rich
        self.pending = []
        self._pending_runs = {}
        self._pending_text = 0
        self._pending_rich = False
        sent = self.sent
        delta: dict[str, object]
        if not rich:
            # The common delta, text and reasoning only, skips the throwaway fold (the ticker
            # takes thousands a second under load), and goes into `sent` as one piece of each.
            content = "".join([e.text for e in events if type(e) is TextDelta])
            reasoning = "".join([e.text for e in events if type(e) is ReasoningDelta])
            delta = {}
            if content:
                delta["content"] = content
                sent.add(TextDelta(content))
            if reasoning:
                delta["reasoning"] = reasoning
                sent.add(ReasoningDelta(reasoning))
        else:
            batch = Accumulator()
            for event in events:
                batch.add(event)
                sent.add(event)
            delta = _visible(batch.completion, sparse=True)
        text = delta.get("content")
        if isinstance(text, str):
            self.blocks.feed(text)
        if runs:
            delta["tool_runs"] = list(runs.values())
        delta.update(self.preview_delta())
        return delta

    def sent_part(self) -> Completion:
        return self.sent.completion

    @property
    def content(self) -> str:
        return self.sent.content

    @property
    def reasoning(self) -> str:
        return self.sent.reasoning

    def tool_calls(self) -> list[dict[str, Any]]:
        return [call.to_dict() for call in self.sent.tool_calls]

    def thinking_ms(self, now: float) -> int | None:
        """How long the model has reasoned (until its answer began, else until `now`)."""
        if self.thinking_since is None:
            return None
        until = now if self.thinking_until is None else self.thinking_until
        return max(0, round((until - self.thinking_since) * 1000))

    def snapshot(self, now: float = 0.0) -> dict[str, object]:
        """Everything sent so far, numbered: a browser may replace its copy with this."""
        settled = [0, self.blocks.settled, self.blocks.html]
        fields = {"seq": self.seq, **_visible(self.sent_part(), sparse=False), "settled": settled}
        draft = None if self._finishing else self.blocks.draft
        if draft is not None:
            fields["draft"] = draft.to_wire()
        if self.tool_runs:
            fields["tool_runs"] = list(self.tool_runs.values())
        fields.update(self.preview_snapshot())
        thinking = self.thinking_ms(now)
        if thinking is not None:  # a page shows "Thinking… N s", or "Thought for N s"
            fields["thinking"] = [thinking, self.thinking_until is not None]
        return fields

    # An image stream's newest picture of each image, `[index, data URL, partial]` by index: all
    # of them for a snapshot (a reload mid-generation shows them), those changed for a delta.
    previews: dict[int, list[object]] = field(default_factory=dict)
    previews_due: set[int] = field(default_factory=set)

    def preview_image(self, index: int, b64: str, *, partial: bool) -> bool:
        """Keep `b64` as image `index`'s newest picture for browsers (a progress preview, or the
        final one while the answer streams); False when it is not shown: not a raster image, or
        over `MAX_PREVIEW_BYTES` (the channel layer carries it to every watching browser), or
        beyond the first `MAX_PREVIEW_IMAGES` images (the index is the stream's to choose)."""
        if not 0 <= index < MAX_PREVIEW_IMAGES:
            return False
        try:
            image = checked_image(b64, MAX_PREVIEW_BYTES)
        except ImageRefused:
            return False
        self.previews[index] = [index, image.data_url(), partial]
        self.previews_due.add(index)
        return True

    def preview_delta(self) -> dict[str, object]:
        """The pictures changed since the last delta, each once (the newest), for the next."""
        due, self.previews_due = self.previews_due, set()
        return {"previews": [self.previews[index] for index in sorted(due)]} if due else {}

    def preview_snapshot(self) -> dict[str, object]:
        if not self.previews:
            return {}
        return {"previews": [self.previews[index] for index in sorted(self.previews)]}


def _visible(part: Completion, *, sparse: bool) -> dict[str, object]:
    """What a browser shows of `part` while it streams; `sparse` leaves out empty fields."""
    media: list[MediaKind] = ["image"] * len(part.images)
    media += ["file"] * len(part.artifacts)
    if part.audio is not None:
        media.append("audio")
    fields: dict[str, object] = {
        "content": part.content,
        "reasoning": part.reasoning,
        "tool_calls": [call.to_dict() for call in part.tool_calls],
        "annotations": [citation(annotation) for annotation in part.annotations],
        "attachments": media,
    }
    if sparse:
        return {key: value for key, value in fields.items() if value}
    return fields
