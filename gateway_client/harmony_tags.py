"""Reasoning written inline in gpt-oss's harmony format: `<|channel|>analysis<|message|>…`, then
`<|start|>assistant<|channel|>final<|message|>…`, as llama.cpp's `llama-server` streams it in the
content when no reasoning format is set. An `analysis` or `commentary` message becomes
`ReasoningDelta`s, a `final` one (or one with no channel) the answer, and the tags, role and
channel names are never shown, wherever the deltas happen to split them.

As with `think_tags`, only a tag that opens the content (after whitespace) counts: a `<|channel|>`
later in an ordinary answer is the answer's own text. Text is held back only while it may still be
a tag (at most the longest tag, inside a message) or a header (bounded: a name longer than
`_MAX_NAME` or a header longer than `_MAX_HEADER` is not one, and is given back as the answer).
`close` gives back whatever is held: an unfinished message as what it was, an unfinished first
header as the answer; an unfinished header after a message is markup and is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from .events import Event, ReasoningDelta, TextDelta
from .think_tags import partial_suffix

__all__ = ["HarmonyTags"]

_HEADS = ("<|channel|>", "<|start|>")  # the tags that begin a message's header
_ENDS = ("<|end|>", "<|return|>", "<|call|>")
_TAGS = (*_HEADS, *_ENDS, "<|message|>", "<|constrain|>")
_REASONING_CHANNELS = frozenset({"analysis", "commentary"})
_MAX_NAME = 64
_MAX_HEADER = 256

State = Literal["start", "header", "message", "between", "answer"]


class HarmonyTags:
    def __init__(self) -> None:
        self.state: State = "start"
        self._held = ""
        self._reasoning = False  # the current message's channel is a reasoning one
        self._seen_message = False  # a whole header was read: this is harmony

    def feed(self, events: Iterable[Event]) -> list[Event]:
        if self.state == "answer":  # the common case once decided: nothing to look at
            return events if isinstance(events, list) else list(events)
        out: list[Event] = []
        for event in events:
            if isinstance(event, TextDelta):
                self._text(self._held + event.text, out)
            else:
                out.extend(self._release())  # keep the order: held text came first
                out.append(event)
        return out

    def close(self) -> list[Event]:
        return self._release()

    def _release(self) -> list[Event]:
        if self.state == "header" and self._seen_message:
            return []  # a later header is markup: held while it may finish, else dropped
        held, self._held = self._held, ""
        if not held:
            return []
        if self.state == "message":
            return [self._delta(held)]
        self.state = "answer" if self.state in ("start", "header") else "message"
        self._reasoning = False
        return [TextDelta(held)]

    def _delta(self, text: str) -> Event:
        return ReasoningDelta(text) if self._reasoning else TextDelta(text)

    def _text(self, text: str, out: list[Event]) -> None:
        self._held = ""
        while text:
            match self.state:
                case "answer":
                    out.append(TextDelta(text))
                    return
                case "start":
                    text = self._start(text)
                case "header":
                    text = self._header(text, out)
                case "message":
                    text = self._message(text, out)
                case "between":
                    text = self._between(text)

    def _start(self, text: str) -> str:
        """Decide whether the content opens with a harmony tag; returns what is left to read."""
        stripped = text.lstrip()
        if any(stripped.startswith(head) for head in _HEADS):
            self.state = "header"
            return text  # the header keeps the whitespace, to give it all back if it is not one
        if len(text) <= _MAX_HEADER and (
            not stripped or any(head.startswith(stripped) for head in _HEADS)
        ):
            self._held = text  # only whitespace, or "<|chan": may still become a tag
            return ""
        self.state = "answer"
        return text

    def _header(self, text: str, out: list[Event]) -> str:
        """Read a header up to `<|message|>`, holding it until then; returns what is left."""
        end = text.find("<|message|>")
        header = text if end < 0 else text[:end]
        if not _may_be_header(header):
            self.state = "answer"
            out.append(TextDelta(text))
            return ""
        if end < 0:
            self._held = text
            return ""
        self._reasoning = _channel(header) in _REASONING_CHANNELS
        self._seen_message = True
        self.state = "message"
        return text[end + len("<|message|>") :]

    def _message(self, text: str, out: list[Event]) -> str:
        """Pass a message on up to its next tag; returns what is left after it."""
        start = 0
        while (found := text.find("<|", start)) >= 0:
            tag = next((tag for tag in _TAGS if text.startswith(tag, found)), None)
            if tag is None:
                start = found + 2
                continue
            if found:
                out.append(self._delta(text[:found]))
            if tag in _HEADS:
                self.state = "header"
                return text[found:]
            if tag in _ENDS:
                self.state = "between"
            return text[found + len(tag) :]  # a stray `<|message|>` or `<|constrain|>`: dropped
        keep = max(partial_suffix(text, tag) for tag in _TAGS)
        if len(text) > keep:
            out.append(self._delta(text[: len(text) - keep]))
        self._held = text[len(text) - keep :]
        return ""

    def _between(self, text: str) -> str:
        """After a message's end: whitespace is dropped until the next header."""
        text = text.lstrip()
        if not text:
            return ""
        if any(text.startswith(head) for head in _HEADS):
            self.state = "header"
            return text
        if any(tag.startswith(text) for tag in _TAGS):
            self._held = text
            return ""
        self.state = "message"  # text outside any message is shown, as the answer
        self._reasoning = False
        return text


def _may_be_header(header: str) -> bool:
    """Whether `header` (from its first tag, `<|message|>` not included) is or may become one."""
    if len(header) > _MAX_HEADER or any(tag in header for tag in _ENDS):
        return False
    words = header
    for tag in _TAGS:
        words = words.replace(tag, " ")
    return all(len(word) <= _MAX_NAME for word in words.split())


def _channel(header: str) -> str:
    """The channel a whole header names ("" if none): its first word after `<|channel|>`."""
    _, tag, rest = header.partition("<|channel|>")
    words = rest.split("<|", 1)[0].split()
    return words[0] if tag and words else ""
