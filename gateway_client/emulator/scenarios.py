"""Scripted model behaviour: what each scenario outputs, independent of any gateway's framing.

`build_script` turns a parsed request into a `Script`: an ordered list of `Piece`s (one chunk each:
a reasoning or content token, a tool-call opening or argument fragment, citations, images), the
finish reason, and how the stream ends (normally, or by one of the failure modes). The
`max_tokens` budget is applied here, so truncation yields `finish_reason: "length"` everywhere.
Dialects decide how a piece looks on the wire; the streaming engine decides when it is sent.

`length` thinks at length, then answers: with no `max_tokens` its default budget ends the thinking
(`finish_reason: "length"` and no content, as a reasoning model does), and a budget large enough
for the whole script gets the thinking and then the answer, so a retry with a larger budget works.

`tools` calls the request's first tool; a request without tools (a plain chat client) gets a call
to `DEMO_TOOL`, `get_weather`, so a tool call can be seen without writing a tool loop. Once the
request ends with tool results it answers, quoting every result of that last round, so a test can
see they were used. The knobs (`Options`) make it misbehave as real models do: several calls in
one round with their argument fragments interleaved across indexes (`calls`), arguments that are
not JSON (`args=invalid`), `finish_reason: "stop"` after calls (`finish=stop`), and more rounds of
calls before answering (`rounds`, which at 99 is a runaway loop). Arguments come from each tool's
schema, with values that suit the app's built-in tools where a property's name says what it is
(`expression`, `time_zone`).
"""

from __future__ import annotations

import base64
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from .media import csv_bytes, png_b64, png_data_url, wav_bytes
from .options import Options
from .parsing import ChatRequest
from .text import (
    budget_reasoning,
    cited_answer,
    estimate_tokens,
    keywords,
    long_answer,
    markdown_answer,
    reasoning_text,
    split_tokens,
    title_for,
)

__all__ = ["Failure", "Piece", "Script", "build_script"]

PieceKind = Literal[
    "reasoning",
    "reasoning_end",
    "content",
    "tool_open",
    "tool_args",
    "annotations",
    "images",
    "audio",
    "artifacts",
]
Failure = Literal["error-before", "error-midstream", "stall", "drop"]

_FAILURES: frozenset[str] = frozenset({"error-before", "error-midstream", "stall", "drop"})
_WORD = re.compile(r"[^\W\d_]{3,}")
_LENGTH_DEFAULT_BUDGET = 48
_FAIL_AFTER_TOKENS = 8

DEMO_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
"""What `tools` calls when the request offers no tools."""


@dataclass(frozen=True, slots=True)
class Piece:
    """One chunk's worth of output. `tokens` is what it adds to the completion count."""

    kind: PieceKind
    text: str = ""
    tokens: int = 0
    index: int = 0
    data: Any = None


@dataclass(slots=True)
class Script:
    """What the emulated model will do for one request."""

    scenario: str
    pieces: list[Piece]
    finish_reason: str
    failure: Failure | None = None
    fail_after: int = 0
    """For mid-stream failures: the number of pieces delivered before failing."""
    ttft_s: float = 0.4
    slow_start: bool = False
    usage_estimated: bool = False
    prompt_tokens: int = 0
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def delivered(self) -> list[Piece]:
        """The pieces sent before the scripted failure, or all of them."""
        failing = self.failure in ("error-midstream", "stall", "drop")
        return self.pieces[: self.fail_after] if failing else self.pieces


def _tokens(kind: PieceKind, text: str) -> list[Piece]:
    return [Piece(kind, piece, 1) for piece in split_tokens(text)]


def _value_for(schema: Any, word: str, depth: int = 0) -> Any:
    """A plausible value for a JSON-schema fragment, built from a prompt word."""
    if not isinstance(schema, dict):
        return word
    if "default" in schema:
        return schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    match kind:
        case "integer":
            return 3
        case "number":
            return 2.5
        case "boolean":
            return True
        case "null":
            return None
        case "array":
            return [] if depth > 2 else [_value_for(schema.get("items"), word, depth + 1)]
        case "object":
            props = schema.get("properties")
            if depth > 2 or not isinstance(props, dict):
                return {}
            return {k: _value_for(v, word, depth + 1) for k, v in props.items()}
    return word


_NAMED: dict[str, tuple[str, ...]] = {
    "expression": ("6*7", "2**10", "355/113", "sqrt(2)"),
    "time_zone": ("Europe/Lisbon", "Asia/Tokyo", "America/New_York", "UTC"),
}
"""String values for properties whose name says what they hold, one per call of a round."""


def tool_arguments(tool: dict[str, Any], prompt: str, call: int = 0) -> str:
    """JSON arguments for `tool`, one value per property of its parameter schema; `call`, the
    call's place in its round, varies them."""
    function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    params = function.get("parameters") if isinstance(function, dict) else None
    props = params.get("properties") if isinstance(params, dict) else None
    words = keywords(prompt)
    args: dict[str, Any] = {}
    if isinstance(props, dict):
        for i, (name, schema) in enumerate(props.items()):
            value = _value_for(schema, words[(i + call) % len(words)])
            named = _NAMED.get(name)
            if named and isinstance(value, str) and not _fixed(schema):
                value = named[call % len(named)]
            args[name] = value
    return orjson.dumps(args).decode()


def _fixed(schema: Any) -> bool:
    """The schema picks the value itself (a default or an enum)."""
    return isinstance(schema, dict) and ("default" in schema or "enum" in schema)


def _fragments(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _place(prompt: str) -> str:
    """The last capitalised word of `prompt` but the first (a city, usually), else Lisbon."""
    words = _WORD.findall(prompt)[1:]
    return next((w for w in reversed(words) if w[0].isupper()), "Lisbon")


def _function_name(tool: dict[str, Any]) -> str:
    function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
    return str(function.get("name", "tool")) if isinstance(function, dict) else "tool"


def _named_tools(request: ChatRequest) -> list[dict[str, Any]]:
    """The request's tools whose names the last user message says, in the order it says them
    ("use docs__lookup"): how a test picks one tool among many (an MCP server's, say)."""
    said = [(request.last_user.find(_function_name(t)), t) for t in request.tools]
    return [tool for at, tool in sorted(said, key=lambda pair: pair[0]) if at >= 0]


def _call_pieces(request: ChatRequest, call: int, invalid: bool) -> list[Piece]:
    """Call number `call` of a round: its opening, then its arguments in fragments."""
    if request.tools:
        tools = _named_tools(request) or request.tools
        tool = tools[call % len(tools)]
        arguments = tool_arguments(tool, request.last_user, call)
    else:
        tool = DEMO_TOOL
        arguments = orjson.dumps({"city": _place(request.last_user), "unit": "celsius"}).decode()
    if invalid:  # any proper prefix of an object's JSON is not JSON
        arguments = arguments[: max(1, len(arguments) * 2 // 3)]
    opening = {"id": "call_" + secrets.token_hex(12), "name": _function_name(tool)}
    pieces = [Piece("tool_open", tokens=1, index=call, data=opening)]
    for fragment in _fragments(arguments):
        pieces.append(Piece("tool_args", fragment, estimate_tokens(fragment), index=call))
    return pieces


def _tool_pieces(request: ChatRequest, options: Options) -> list[Piece]:
    """A round of `options.calls` calls, their pieces interleaved: every call's opening, then
    every call's first fragment, and so on, as a client must accumulate them by index."""
    calls = [_call_pieces(request, n, options.args == "invalid") for n in range(options.calls)]
    return [
        call[step] for step in range(max(map(len, calls))) for call in calls if step < len(call)
    ]


def _answer_from(results: list[str]) -> str:
    """An answer that quotes every result of the last round of calls."""
    if len(results) == 1:
        return f"The tool returned:\n\n> {results[0]}\n\nSo, in short: {results[0]}"
    quoted = "\n\n".join(f"> {result}" for result in results)
    return f"The tools returned:\n\n{quoted}\n\nSo, in short: {'; '.join(results)}"


def _citation_pieces(request: ChatRequest) -> list[Piece]:
    first, second, _, _ = keywords(request.last_user)
    claims = [
        (f"{first.capitalize()} is well documented", f"https://en.wikipedia.org/wiki/{first}"),
        (
            f"practical notes on {second} exist too",
            f"https://example.org/notes?topic={second}&lang=en",
        ),
    ]
    text = ""
    annotations: list[dict[str, Any]] = []
    for number, (claim, url) in enumerate(claims, start=1):
        text += ("; " if text else "") + claim
        start = len(text) - len(claim)
        annotations.append(
            {
                "type": "url_citation",
                "url_citation": {
                    "url": url,
                    "title": f"Source {number}: {claim}",
                    "content": f"An excerpt about {claim}.",
                    "start_index": start,
                    "end_index": len(text),
                },
            }
        )
        text += f" [{number}]"
    text += ".\n\nBoth sources are linked above."
    return [*_tokens("content", text), Piece("annotations", data=annotations)]


def _audio_pieces(request: ChatRequest) -> list[Piece]:
    """A spoken answer: each piece a transcript fragment and the next slice of one real WAV."""
    first = keywords(request.last_user)[0]
    words = split_tokens(f"Here is a short spoken answer about {first}, one beep per word.")
    clip = wav_bytes("".join(words))
    size = -(-len(clip) // len(words))
    return [
        Piece("audio", word, 1, data=clip[i * size : (i + 1) * size])
        for i, word in enumerate(words)
    ]


def _file_pieces(request: ChatRequest) -> list[Piece]:
    first, second, third, fourth = keywords(request.last_user)
    rows = [["word", "letters", "reversed"]]
    rows += [[w, str(len(w)), w[::-1]] for w in (first, second, third, fourth)]
    name = first.lower()
    files = [
        {
            "type": "file",
            "filename": f"{name}.csv",
            "media_type": "text/csv",
            "data": base64.b64encode(csv_bytes(rows)).decode("ascii"),
        },
        {
            "type": "image",
            "filename": f"{name}.png",
            "media_type": "image/png",
            "data": png_b64(request.last_user),
        },
    ]
    intro = _tokens("content", f"I made two files about **{first}**: a table and a picture.")
    return [*intro, Piece("artifacts", data=files), *_tokens("content", "\n\nBoth are attached.")]


def _answer_pieces(
    request: ChatRequest,
    options: Options,
    *,
    reasoning: bool,
    hosted_tools: bool,
    media_output: bool,
) -> list[Piece]:
    prompt = request.last_user
    scenario = request.scenario
    if request.text_completion and scenario == "tools":
        scenario = "chat"
    if (request.text_completion or not hosted_tools) and scenario in ("citations", "image"):
        scenario = "chat"
    if (request.text_completion or not media_output) and scenario in ("audio", "files"):
        scenario = "chat"
    match scenario:
        case "reasoning" if reasoning:
            steps = _tokens("reasoning", reasoning_text(prompt))
            return [*steps, Piece("reasoning_end"), *_tokens("content", markdown_answer(prompt))]
        case "length" if reasoning:
            thinking = _tokens("reasoning", budget_reasoning(prompt))
            return [*thinking, Piece("reasoning_end"), *_tokens("content", markdown_answer(prompt))]
        case "length":  # thinking aloud, in the answer itself
            return _tokens("content", budget_reasoning(prompt) + "\n\n" + markdown_answer(prompt))
        case "long":
            return _tokens("content", long_answer(prompt, options.long_tokens))
        case "echo":
            return _tokens("content", prompt)
        case "title":
            return _tokens("content", title_for(prompt))
        case "vision":
            return _tokens("content", parts_answer(request.parts))
        case "tools" if request.tool_results and request.tool_rounds >= options.rounds:
            return _tokens("content", _answer_from(request.tool_results))
        case "tools":
            return _tool_pieces(request, options)
        case "citations":
            return _citation_pieces(request)
        case "image":
            first = keywords(prompt)[0]
            url = png_data_url(prompt)
            intro = _tokens("content", f"Here is a picture of **{first}**:")
            image = Piece("images", data=[{"url": url}])
            return [*intro, image, *_tokens("content", "\n\nMade with a few pixels.")]
        case "audio":
            return _audio_pieces(request)
        case "files":
            return _file_pieces(request)
    if request.sources:
        return _tokens("content", cited_answer(prompt, request.sources))
    return _tokens("content", markdown_answer(prompt))


def parts_answer(parts: list[dict[str, Any]] | None) -> str:
    """What `vision` says of the last user message's parts: how many, and each one's type and
    size, so a test (or a person offline) sees what arrived."""
    if parts is None:
        return "Your message is plain text: no images or files came with it."
    images = sum(1 for part in parts if part["type"] == "image_url")
    lines = [
        f"Your message came in {len(parts)} part{'' if len(parts) == 1 else 's'}, "
        f"{images} of {'it' if len(parts) == 1 else 'them'} image{'' if images == 1 else 's'}:",
        "",
    ]
    for number, part in enumerate(parts, 1):
        if part["type"] == "text":
            first = part["first_line"].replace("`", "'")
            lines.append(f"{number}. text, {part['chars']:,} characters: `{first}`")
        elif part["type"] == "image_url" and "bytes" in part:
            lines.append(f"{number}. image, {part['media_type']}, {part['bytes']:,} bytes")
        elif part["type"] == "image_url":
            lines.append(f"{number}. image at a URL")
        else:
            lines.append(f"{number}. a {part['type']} part")
    return "\n".join(lines)


def _apply_budget(pieces: list[Piece], budget: int | None) -> tuple[list[Piece], bool]:
    if budget is None:
        return pieces, False
    used = 0
    for i, piece in enumerate(pieces):
        if piece.tokens and used + piece.tokens > budget:
            return pieces[:i], True
        used += piece.tokens
    return pieces, False


def build_script(
    request: ChatRequest,
    options: Options,
    *,
    reasoning: bool,
    hosted_tools: bool = True,
    media_output: bool = False,
) -> Script:
    """The script for `request`. `reasoning`: the dialect streams reasoning; `hosted_tools`: it
    can return citations and images; `media_output`: audio and files (otherwise those scenarios
    answer with plain text)."""
    scenario = request.scenario
    pieces = _answer_pieces(
        request,
        options,
        reasoning=reasoning,
        hosted_tools=hosted_tools,
        media_output=media_output,
    )
    budget = request.max_tokens
    if scenario == "length" and budget is None:
        budget = _LENGTH_DEFAULT_BUDGET
    pieces, truncated = _apply_budget(pieces, budget)
    if truncated:
        finish = "length"
    elif any(p.kind == "tool_open" for p in pieces):
        finish = "stop" if options.finish == "stop" else "tool_calls"
    else:
        finish = "stop"
    failure: Failure | None = scenario if scenario in _FAILURES else None  # type: ignore[assignment]
    return Script(
        scenario=scenario,
        pieces=pieces,
        finish_reason=finish,
        failure=failure,
        fail_after=min(_FAIL_AFTER_TOKENS, max(1, len(pieces) - 1)),
        ttft_s=options.slow_start_s if scenario == "slow-start" else options.ttft_ms / 1000,
        slow_start=scenario == "slow-start",
        usage_estimated=scenario == "long",
        prompt_tokens=max(1, (request.prompt_chars + 3) // 4),
    )
