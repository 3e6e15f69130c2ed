"""Parse and validate request bodies into the few facts the emulated model acts on.

A body that is not a JSON object, or lacks what its endpoint needs (`messages`, `prompt`,
`input`), or sets `temperature` or `reasoning` to what no gateway takes, raises `BadRequest`,
which the app turns into the dialect's 400 envelope. What a chat request asked for (budget,
temperature, system message, reasoning) goes on its record, so tests read what arrived. The
model name picks the scenario: `emulator/<scenario>` (optionally `?knob=value` overrides); any
other name behaves like `chat` and is echoed back unchanged. For tool calling, what matters is
what followed the last user message: how many rounds of `tool` messages, and the results of the
last round when the request ends with it.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from .options import split_model_options

__all__ = [
    "CALLS_TOOLS",
    "SCENARIOS",
    "BadRequest",
    "ChatRequest",
    "MediaRequest",
    "UnknownModel",
    "parse_chat",
    "parse_completion",
    "parse_media",
    "scenario_of",
]

SCENARIOS: dict[str, str] = {
    "chat": "A markdown answer (heading, list, code, table) about the last user message.",
    "reasoning": "Visible reasoning in the gateway's field, then the answer.",
    "tools": (
        "Calls the first tool with arguments from its schema (with no tools in the request, a demo"
        " get_weather(city, unit)); answers from the tool results, quoting each. Knobs: calls=N"
        " (the first N tools, cycling, arguments interleaved across indexes), rounds=N (calls"
        " again until N rounds of results follow the last user message), args=invalid"
        " (arguments cut short), finish=stop (finish_reason stop after the calls)."
    ),
    "citations": "An answer with url_citation annotations.",
    "image": "An answer with a small PNG in delta.images.",
    "audio": (
        "Numes: a spoken answer in delta.audio pieces (base64 of a real WAV, transcript"
        " fragments, format wav); the other gateways answer with text."
    ),
    "files": (
        "Numes: a short answer with a CSV and a PNG in delta.artifacts (filename, media_type,"
        " base64 data); the other gateways answer with text."
    ),
    "error-before": "The gateway's error response before the stream starts.",
    "error-midstream": "A few tokens, then the gateway's in-band error.",
    "stall": "A few tokens, then silence with the connection open (tiny-3b: upstream_stall).",
    "drop": "A few tokens, then the connection closes without [DONE].",
    "slow-start": "A long wait for the first token, with the gateway's keep-alive comments.",
    "length": "Thinks past max_tokens (default 48): finish_reason length, no content; answers in"
    " full when the budget allows.",
    "long": "A few thousand tokens of markdown.",
    "echo": "Answers with the last user message verbatim.",
    "title": (
        "A conversation's title, as the app asks for one: the content words of the question"
        " after the last user message's 'Question:' line. Its /models entry says so"
        " (purpose: title)."
    ),
    "vision": (
        "Takes images (its /models entry lists image input): answers about the parts of the"
        " last user message, their count, types and sizes (text parts in characters, images in"
        " bytes). The other scenarios refuse image parts, as a gateway does for a text model."
    ),
}

CALLS_TOOLS = frozenset({"tools"})
"""The scenarios that answer by calling a tool: a request that offers none gets a call to the
demo `get_weather`, which a client cannot run."""
"""Scenario name (the model is `emulator/<name>`) -> what it does."""

_PREFIX = "emulator/"
IMAGE_INPUT: frozenset[str] = frozenset({"vision"})
"""The scenarios that take `image_url` parts; a request with one to any other is refused."""
_IMAGE_CHARS = 4_000  # what an image part counts as in the prompt (about 1,000 tokens)


class BadRequest(Exception):
    """The body is unusable; the message goes into the dialect's 400 envelope."""


class UnknownModel(Exception):
    """`emulator/<name>` with a name that is not a scenario."""


@dataclass(slots=True)
class ChatRequest:
    """A chat or text completion request, reduced to what scenarios need."""

    model: str
    """As sent, including any `?` suffix: echoed back in chunks."""
    scenario: str
    model_query: str
    stream: bool
    text_completion: bool
    last_user: str
    last_role: str
    tool_results: list[str]
    """The contents of the `tool` messages that end the request (the last round's results);
    empty when it does not end with one."""
    tool_rounds: int = 0
    """The runs of `tool` messages after the last user message: the rounds of calls answered."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int | None = None
    prompt_chars: int = 0
    temperature: float | None = None
    system: str | None = None
    """The text of the leading system (or developer) message, if the request has one."""
    reasoning: dict[str, Any] | None = None
    """The `reasoning` object as sent (Numes' controls: `effort`, `max_tokens`, `exclude`)."""
    parts: list[dict[str, Any]] | None = None
    """The last user message's content parts, described (`describe_parts`); None when its
    content is a string."""
    sources: int = 0
    """The numbered sources its system messages quote (`<source id="n">`: documents retrieved
    for the question), which the `chat` scenario's answer cites."""


@dataclass(slots=True)
class MediaRequest:
    """An image or speech request: the text to render and whether to stream."""

    model: str
    scenario: str
    model_query: str
    text: str
    stream: bool
    count: int = 1


def load_json(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"Request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("Request body must be a JSON object.")
    return data


def scenario_of(model: Any) -> tuple[str, str, str]:
    """A request's `model` → (the model, the scenario it picks, its option query)."""
    if not isinstance(model, str) or not model.strip():
        raise BadRequest("`model` is required and must be a non-empty string.")
    name, query = split_model_options(model)
    if name.startswith(_PREFIX):
        scenario = name[len(_PREFIX) :]
        if scenario not in SCENARIOS:
            raise UnknownModel(f"Model {name!r} does not exist.")
        return model, scenario, query
    return model, "chat", query


def content_text(content: Any) -> str:
    """The text of a message `content`: a string, or the `text` of its text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        ]
        return "\n".join(texts)
    return ""


def describe_parts(content: Any) -> list[dict[str, Any]] | None:
    """Content parts as the emulator records them: `{"type": "text", "chars", "first_line"}`,
    `{"type": "image_url", "media_type", "bytes"}` for a `data:` URL (else its `url`), and
    `{"type": <other>}`. None for a string `content`."""
    if not isinstance(content, list):
        return None
    found: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text"):
            text = str(part.get("text", ""))
            found.append(
                {"type": "text", "chars": len(text), "first_line": text.split("\n")[0][:80]}
            )
        elif kind == "image_url":
            found.append(_image_part(part.get("image_url")))
        else:
            found.append({"type": str(kind)})
    return found


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "image_url" for part in content
    )


def _image_part(image: Any) -> dict[str, Any]:
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        raise BadRequest("An `image_url` part needs `image_url.url`.")
    head, comma, data = url.partition(",")
    if not url.startswith("data:"):
        return {"type": "image_url", "url": url[:200]}
    if not comma or not head.endswith(";base64"):
        raise BadRequest("An image `data:` URL must be base64.")
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        raise BadRequest("An image `data:` URL holds invalid base64.") from None
    return {"type": "image_url", "media_type": head[5:].partition(";")[0], "bytes": size}


def _prompt_chars(messages: list[dict[str, Any]]) -> int:
    """The prompt's size as billed: its JSON, an image part counted as `_IMAGE_CHARS`."""
    images = 0
    plain = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            kept = [
                p for p in content if not (isinstance(p, dict) and p.get("type") == "image_url")
            ]
            images += len(content) - len(kept)
            message = {**message, "content": kept}
        plain.append(message)
    return len(orjson.dumps(plain)) + images * _IMAGE_CHARS


def _max_tokens(data: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _temperature(data: dict[str, Any]) -> float | None:
    value = data.get("temperature")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 2:
        raise BadRequest("`temperature` must be a number from 0 to 2.")
    return float(value)


_EFFORTS = ("xhigh", "high", "medium", "low", "minimal", "none")


def _reasoning(data: dict[str, Any]) -> dict[str, Any] | None:
    value = data.get("reasoning")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadRequest("`reasoning` must be an object.")
    if "effort" in value and value["effort"] not in _EFFORTS:
        raise BadRequest(f"`reasoning.effort` must be one of {', '.join(_EFFORTS)}.")
    return value


_SOURCE = re.compile(r'<source id="([0-9]{1,3})"')


def _sources(messages: list[dict[str, Any]]) -> int:
    """How many numbered sources the system messages quote."""
    numbers = {
        match
        for message in messages
        if message["role"] in ("system", "developer")
        for match in _SOURCE.findall(content_text(message.get("content")))
    }
    return len(numbers)


def _tool_rounds(messages: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """The rounds of tool results after the last user message, and the last round's results if
    the messages end with it."""
    users = [i for i, message in enumerate(messages) if message["role"] == "user"]
    rounds, previous = 0, ""
    results: list[str] = []
    for message in messages[users[-1] + 1 if users else 0 :]:
        if message["role"] == "tool":
            if previous != "tool":
                rounds, results = rounds + 1, []
            results.append(content_text(message.get("content")))
        previous = message["role"]
    return rounds, results if previous == "tool" else []


def parse_chat(body: bytes) -> ChatRequest:
    data = load_json(body)
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("`messages` is required and must be a non-empty array.")
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest("Each message must be an object with a `role`.")
    model, scenario, query = scenario_of(data.get("model"))
    users = [m for m in messages if m["role"] == "user"]
    last = messages[-1]
    tools = data.get("tools")
    rounds, results = _tool_rounds(messages)
    parts = describe_parts(users[-1].get("content")) if users else None
    if scenario not in IMAGE_INPUT and any(_has_image(m.get("content")) for m in messages):
        raise BadRequest(f"Model {model.partition('?')[0]!r} does not take image input.")
    return ChatRequest(
        model=model,
        scenario=scenario,
        model_query=query,
        stream=data.get("stream") is True,
        text_completion=False,
        last_user=content_text(users[-1].get("content")) if users else "",
        last_role=last["role"],
        tool_results=results,
        tool_rounds=rounds,
        tools=[t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else [],
        max_tokens=_max_tokens(data),
        prompt_chars=_prompt_chars(messages) + (len(orjson.dumps(tools)) if tools else 0),
        temperature=_temperature(data),
        system=(
            content_text(messages[0].get("content"))
            if messages[0]["role"] in ("system", "developer")
            else None
        ),
        reasoning=_reasoning(data),
        parts=parts,
        sources=_sources(messages),
    )


def parse_completion(body: bytes) -> ChatRequest:
    data = load_json(body)
    prompt = data.get("prompt")
    if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt) and prompt:
        prompt = "\n".join(prompt)
    if not isinstance(prompt, str):
        raise BadRequest("`prompt` is required and must be a string.")
    model, scenario, query = scenario_of(data.get("model"))
    return ChatRequest(
        model=model,
        scenario=scenario,
        model_query=query,
        stream=data.get("stream") is True,
        text_completion=True,
        last_user=prompt,
        last_role="user",
        tool_results=[],
        max_tokens=_max_tokens(data),
        prompt_chars=len(prompt),
    )


def parse_media(body: bytes, *, text_field: str) -> MediaRequest:
    """Parse an images (`text_field="prompt"`) or speech (`text_field="input"`) request."""
    data = load_json(body)
    text = data.get(text_field)
    if not isinstance(text, str) or not text.strip():
        raise BadRequest(f"`{text_field}` is required and must be a non-empty string.")
    model, scenario, query = scenario_of(data.get("model"))
    count = data.get("n", 1)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 4:
        raise BadRequest("`n` must be an integer from 1 to 4.")
    return MediaRequest(
        model=model,
        scenario=scenario,
        model_query=query,
        text=text,
        stream=data.get("stream") is True,
        count=count,
    )
