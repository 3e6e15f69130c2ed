"""A gateway's `GET /models` answer, read as untrusted input: size-capped, typed, entry by entry.

The body is read while it streams and given up past `MAX_MODELS_BYTES` (a 300 MB answer once
took a server from 120 MB to 1 GB), and decoded by msgspec straight into a `{"data": [...]}`
Struct: anything else (`[]`, `{"data": 5}`) is a `ProtocolError` naming what was wrong, so the
app shows that gateway as down rather than failing the page. Nesting is bounded by the decoder,
which refuses JSON nested deeper than the interpreter's recursion limit (about a thousand) with
a `RecursionError` in C before the stack is at risk, so no pre-scan is needed; that too becomes
a `ProtocolError`. Each entry is decoded on its own, so one bad entry (an `id` that is not a
string) is skipped and the rest of the list stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import msgspec

from .errors import ProtocolError

__all__ = ["MAX_MODELS_BYTES", "ModelInfo", "TooLarge", "parse_models"]

MAX_MODELS_BYTES: Final = 4 * 1024 * 1024  # OpenRouter's full list, the largest known, is ~1 MB


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A `/models` entry. Prices are per token in the gateway's cost unit, as the gateway wrote
    them (Numes and Nodul list `pricing` as decimal strings; the others list none)."""

    id: str
    name: str | None = None
    description: str | None = None
    prompt_price: str | None = None
    completion_price: str | None = None
    output_modalities: tuple[str, ...] = ()
    """What the model makes, from an OpenRouter-style `architecture.output_modalities` (Numes
    lists `["image"]` for an image model); empty when the entry does not say."""


class TooLarge(ProtocolError):
    """The model list was larger than `MAX_MODELS_BYTES` (the read stopped there)."""


_Price = str | int | float | None
_Text = str | None


class _Pricing(msgspec.Struct):
    prompt: _Price = None
    completion: _Price = None


class _Architecture(msgspec.Struct):
    output_modalities: list[str] = []


class _Entry(msgspec.Struct):
    id: str
    name: _Text = None
    description: _Text = None
    pricing: _Pricing | None = None
    architecture: _Architecture | None = None


class _Bare(msgspec.Struct):
    """An entry whose other fields are unreadable still names a model."""

    id: str


class _Page(msgspec.Struct):
    data: list[msgspec.Raw]


_page = msgspec.json.Decoder(_Page)
_entry = msgspec.json.Decoder(_Entry)
_bare = msgspec.json.Decoder(_Bare)


def parse_models(body: bytes) -> list[ModelInfo]:
    """The models a `/models` body lists; `ProtocolError` when it is not a list of them."""
    try:
        page = _page.decode(body)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f'the model list is not {{"data": [...]}}: {exc}') from None
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"the model list is not JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError("the model list is nested too deeply to read") from None
    return [info for raw in page.data if (info := _model_info(raw)) is not None]


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
    modalities = entry.architecture.output_modalities if entry.architecture else []
    return ModelInfo(
        entry.id,
        entry.name or None,
        entry.description or None,
        _price(pricing.prompt),
        _price(pricing.completion),
        tuple(m.lower() for m in modalities),
    )


def _price(value: _Price) -> str | None:
    if value is None:
        return None
    return repr(value) if isinstance(value, float) else str(value)
