"""A gateway's model lists, read as untrusted input: size-capped, typed, entry by entry.

Two bodies are read: every gateway's `GET /models` (`parse_models`) and LiteLLM's
`GET /model/info` (`parse_model_info`), which adds each route's mode (chat, embedding, image
generation...), provider and per-token prices; `with_details` folds the second into the first,
which stays the list of what the key may use.

Each body is read while it streams and given up past its cap (`MAX_MODELS_BYTES`: a 300 MB answer
once took a server from 120 MB to 1 GB), and decoded by msgspec straight into a `{"data": [...]}`
Struct: anything else (`[]`, `{"data": 5}`) is a `ProtocolError` naming what was wrong, so the
app shows that gateway as down rather than failing the page. Nesting is bounded by the decoder,
which refuses JSON nested deeper than the interpreter's recursion limit (about a thousand) with
a `RecursionError` in C before the stack is at risk, so no pre-scan is needed; that too becomes
a `ProtocolError`. Each entry is decoded on its own, so one bad entry (an `id` that is not a
string) is skipped and the rest of the list stands.

Whether a model answers chats is derived (`ModelInfo.chat`) from what its gateway said, in order:
LiteLLM's `mode`, then OpenRouter-style `architecture.output_modalities` (OpenRouter, Numes,
llama.cpp), then, where neither is given (vLLM, Ollama), the id's words (`nomic-embed-text`,
`bge-reranker-v2-m3`, `whisper-1`, `dall-e-3`): a list of ids is all those servers give. An
entry may also say a chat model is kept for one job (`ModelInfo.purpose`: the emulator's title
model), which the app's picker leaves out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

import msgspec

from .errors import ProtocolError

__all__ = [
    "CHAT_MODES",
    "MAX_MODELS_BYTES",
    "ModelInfo",
    "TooLarge",
    "parse_model_info",
    "parse_models",
    "with_details",
]

MAX_MODELS_BYTES: Final = 4 * 1024 * 1024  # OpenRouter's full list, the largest known, is ~1 MB
"""The cap on either body (LiteLLM's `/model/info` is about 5 KB a route)."""

CHAT_MODES: Final = frozenset({"chat", "completion", "responses"})
"""LiteLLM's modes whose routes take `/chat/completions` (its others: `embedding`,
`image_generation`, `audio_transcription`, `audio_speech`, `moderation`, `rerank`...)."""

# Words of an id that name a model which makes no chat answer, for the lists that say nothing else.
# The id is split on its separators and each word looked at once: a pattern that scanned ahead
# from every separator took quadratic time on a long hostile id ("-a-a-a…"), on the event loop.
_SEPARATORS = re.compile(r"[-_/:.]")
_NOT_CHAT_PREFIXES = ("embed", "rerank")
_NOT_CHAT_WORDS = frozenset({"whisper", "moderation", "tts"})


def _names_no_chat_model(model_id: str) -> bool:
    lowered = model_id.lower()
    if "embedding" in lowered or "dall-e" in lowered:
        return True
    return any(
        word.startswith(_NOT_CHAT_PREFIXES) or word in _NOT_CHAT_WORDS
        for word in _SEPARATORS.split(lowered)
    )


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A listed model. Prices are per token in the gateway's cost unit, as the gateway wrote them
    (Numes, Nodul and OpenRouter list `pricing` as decimal strings, LiteLLM's `/model/info` as
    numbers; the others list none)."""

    id: str
    name: str | None = None
    """The gateway's display name (OpenRouter's "OpenAI: GPT-4o"); None: it gives only ids."""
    description: str | None = None
    prompt_price: str | None = None
    completion_price: str | None = None
    output_modalities: tuple[str, ...] = ()
    """What the model makes, from an OpenRouter-style `architecture.output_modalities` (Numes
    lists `["image"]` for an image model); empty when the entry does not say."""
    input_modalities: tuple[str, ...] = ()
    """What the model takes, from `architecture.input_modalities` (`"image"`: it reads images
    sent as `image_url` parts); empty when the entry does not say."""
    mode: str | None = None
    """LiteLLM's `mode` for the route (`chat`, `embedding`, `image_generation`...), lower-case;
    None where the gateway does not say."""
    provider: str | None = None
    """The provider behind the route as the gateway names it (LiteLLM's `litellm_provider`);
    None: only an id's prefix (`openai/gpt-4o`) can tell."""
    purpose: str | None = None
    """The one job the entry says the model is for, lower-case, where it is narrower than what
    it makes: the emulator lists `"title"` for its model that writes conversations' titles from
    a fixed prompt (no gateway known says one); None: it does not say."""

    @property
    def chat(self) -> bool:
        """Whether it answers chats, as far as its gateway's list tells (see the module)."""
        if self.mode is not None:
            return self.mode in CHAT_MODES
        if self.output_modalities:
            return "text" in self.output_modalities
        return not _names_no_chat_model(self.id)


class TooLarge(ProtocolError):
    """A model list was larger than `MAX_MODELS_BYTES` (the read stopped there)."""


_Price = str | int | float | None
_Text = str | None


class _Pricing(msgspec.Struct):
    prompt: _Price = None
    completion: _Price = None


class _Architecture(msgspec.Struct):
    output_modalities: list[str] = []
    input_modalities: list[str] = []


class _Entry(msgspec.Struct):
    id: str
    name: _Text = None
    description: _Text = None
    pricing: _Pricing | None = None
    architecture: _Architecture | None = None
    mode: _Text = None  # LiteLLM's `/v1/models` says it where it knows
    purpose: _Text = None  # the emulator's


class _Bare(msgspec.Struct):
    """An entry whose other fields are unreadable still names a model."""

    id: str


class _Page(msgspec.Struct):
    data: list[msgspec.Raw]


class _Details(msgspec.Struct):
    mode: _Text = None
    litellm_provider: _Text = None
    input_cost_per_token: _Price = None
    output_cost_per_token: _Price = None


class _Route(msgspec.Struct):
    """One of LiteLLM's `/model/info` entries: a route (`model_name`) and what it knows of it."""

    model_name: str
    model_info: _Details | None = None


_page = msgspec.json.Decoder(_Page)
_entry = msgspec.json.Decoder(_Entry)
_bare = msgspec.json.Decoder(_Bare)
_route = msgspec.json.Decoder(_Route)


def _decode_page(body: bytes, what: str) -> list[msgspec.Raw]:
    try:
        return _page.decode(body).data
    except msgspec.ValidationError as exc:
        raise ProtocolError(f'{what} is not {{"data": [...]}}: {exc}') from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"{what} is not JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError(f"{what} is nested too deeply to read") from None


def parse_models(body: bytes) -> list[ModelInfo]:
    """The models a `/models` body lists; `ProtocolError` when it is not a list of them."""
    return [info for raw in _decode_page(body, "the model list") if (info := _model_info(raw))]


def _model_info(raw: msgspec.Raw) -> ModelInfo | None:
    try:
        entry = _entry.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        try:
            bare = _bare.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return None
        return ModelInfo(bare.id) if bare.id else None
    if not entry.id:
        return None
    pricing = entry.pricing or _Pricing()
    architecture = entry.architecture or _Architecture()
    return ModelInfo(
        entry.id,
        entry.name or None,
        entry.description or None,
        _price(pricing.prompt),
        _price(pricing.completion),
        tuple(m.lower() for m in architecture.output_modalities),
        tuple(m.lower() for m in architecture.input_modalities),
        _lower(entry.mode),
        purpose=_lower(entry.purpose),
    )


def parse_model_info(body: bytes) -> list[ModelInfo]:
    """The routes a LiteLLM `/model/info` body describes, one `ModelInfo` per entry (id: its
    `model_name`; a route served by several deployments appears once per deployment);
    `ProtocolError` when it is not a list of them. An entry that cannot be read is skipped."""
    found = []
    for raw in _decode_page(body, "the model details"):
        try:
            route = _route.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            continue
        if not route.model_name:
            continue
        details = route.model_info or _Details()
        found.append(
            ModelInfo(
                route.model_name,
                prompt_price=_price(details.input_cost_per_token),
                completion_price=_price(details.output_cost_per_token),
                mode=_lower(details.mode),
                provider=details.litellm_provider or None,
            )
        )
    return found


def with_details(listed: list[ModelInfo], details: list[ModelInfo]) -> list[ModelInfo]:
    """`listed` (what `/models` offers) with what `details` adds for the same ids: the mode,
    the provider and, where the listing has no price, the prices (of the first deployment that
    has both). Ids only in `details` are left out: the listing says what the key may use."""
    found: dict[str, ModelInfo] = {}
    for info in details:
        known = found.get(info.id)
        if known is None:
            found[info.id] = info
        elif known.prompt_price is None or known.completion_price is None:
            found[info.id] = replace(
                info, mode=known.mode or info.mode, provider=known.provider or info.provider
            )
    merged = []
    for info in listed:
        extra = found.get(info.id)
        if extra is None:
            merged.append(info)
            continue
        priced = info.prompt_price is not None and info.completion_price is not None
        merged.append(
            replace(
                info,
                mode=extra.mode or info.mode,
                provider=extra.provider or info.provider,
                prompt_price=info.prompt_price if priced else extra.prompt_price,
                completion_price=info.completion_price if priced else extra.completion_price,
            )
        )
    return merged


def _lower(text: str | None) -> str | None:
    return text.strip().lower() or None if text else None


def _price(value: _Price) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    return repr(value) if isinstance(value, float) else str(value)
