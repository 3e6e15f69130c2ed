"""Reasoning written inline: `<think>…</think>` (or `<thinking>…</thinking>`) at the start of
the content, as DeepSeek-R1, Qwen and others emit it through vLLM, Ollama and llama.cpp when no
reasoning parser runs. The thought becomes `ReasoningDelta`s and the rest the answer, wherever the
deltas happen to split the tags.

Only a tag that opens the content (after whitespace) counts: a `<think>` later in an answer is
the answer's own text. Text is held back only while it may still be a tag (at most the length of
`<thinking>` at the start, or of the closing tag at the end of a piece of thought), so the stream
keeps flowing; `close` gives back whatever is held when the stream ends (an unclosed thought stays
reasoning).

The line breaks that only lay the tags out (right after `<think>`, right before `</think>`) are
not part of the thought, as the providers' own apps show it: line breaks at the end of a piece of
thought are held until what follows them says which they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from .events import Event, ReasoningDelta, TextDelta

__all__ = ["ThinkTags", "partial_suffix"]

_OPENERS = {"<think>": "</think>", "<thinking>": "</thinking>"}
_LINE_BREAKS = "\r\n"

State = Literal["start", "thinking", "after", "answer"]


class ThinkTags:
    def __init__(self) -> None:
        self.state: State = "start"
        self._held = ""
        self._closer = ""
        self._opened = False  # the thought has begun: no more line breaks to trim at its start

    def feed(self, events: Iterable[Event]) -> list[Event]:
        if self.state == "answer":  # the common case once decided: nothing to look at
            return events if isinstance(events, list) else list(events)
        out: list[Event] = []
        for event in events:
            if isinstance(event, TextDelta):
                self._text(event.text, out)
            else:
                out.extend(self._release())  # keep the order: held text came first
                out.append(event)
        return out

    def close(self) -> list[Event]:
        return self._release()

    def _release(self) -> list[Event]:
        held, self._held = self._held, ""
        if not held:
            return []
        if self.state == "thinking":
            return [ReasoningDelta(held)]
        if self.state == "start":
            self.state = "answer"  # a stream that ended (or changed kind) before deciding
        return [TextDelta(held)] if self.state == "answer" else []

    def _text(self, text: str, out: list[Event]) -> None:
        if self.state == "answer":
            out.append(TextDelta(text))
            return
        text = self._held + text
        self._held = ""
        if self.state == "start":
            text = self._start(text, out)
        if self.state == "thinking":
            text = self._thinking(text, out)
        if self.state == "after":
            text = text.lstrip()
            if not text:
                return
            self.state = "answer"
        if self.state == "answer" and text:
            out.append(TextDelta(text))

    def _start(self, text: str, out: list[Event]) -> str:
        """Decide whether the content opens with a think tag; returns what is left to read."""
        stripped = text.lstrip()
        if not stripped:
            self._held = text  # only whitespace so far
            return ""
        for opener, closer in _OPENERS.items():
            if stripped.startswith(opener):
                self.state = "thinking"
                self._closer = closer
                return stripped[len(opener) :]
        if any(opener.startswith(stripped) for opener in _OPENERS):
            self._held = text  # "<thi": may still become a tag
            return ""
        self.state = "answer"
        return text

    def _thinking(self, text: str, out: list[Event]) -> str:
        if not self._opened:
            text = text.lstrip(_LINE_BREAKS)
            self._opened = bool(text)
        end = text.find(self._closer)
        if end >= 0:
            thought = text[:end].rstrip(_LINE_BREAKS)
            if thought:
                out.append(ReasoningDelta(thought))
            self.state = "after"
            return text[end + len(self._closer) :]
        keep = partial_suffix(text, self._closer)
        before = text[: len(text) - keep]
        keep += len(before) - len(before.rstrip(_LINE_BREAKS))
        if len(text) > keep:
            out.append(ReasoningDelta(text[: len(text) - keep]))
        self._held = text[len(text) - keep :]
        return ""


def partial_suffix(text: str, tag: str) -> int:
    """The length of the longest end of `text` that is a beginning of `tag`."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
