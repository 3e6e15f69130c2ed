"""Which models generate images, how many images a user may ask for, and what the prompt is.

A model is an image model when its `/models` entry says it outputs images (OpenRouter-style
`architecture.output_modalities`) and its gateway's dialect serves `POST /images` (`images` in the
dialect table, `gateway_client.dialects.DIALECTS`): of the four gateways only Numes does, so
elsewhere the same model ID stays a chat model (an image inside a chat answer). The count is the
composer's small "Images" select, posted as `images`; anything else posted falls back to one image
rather than failing the turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from gateway_client import ModelInfo
from gateway_client.dialects import facts_for, guess_dialect

if TYPE_CHECKING:
    from chatapp.gateways.configs import GatewayConfig

IMAGE_COUNTS: Final = (1, 2, 4)


def serves_images(config: GatewayConfig) -> bool:
    """Whether the gateway's dialect has `POST /images`."""
    facts = facts_for(config.dialect or guess_dialect(config.base_url))
    return facts is not None and facts.images


def generates_images(config: GatewayConfig, info: ModelInfo) -> bool:
    return "image" in info.output_modalities and serves_images(config)


def makes_images(config: GatewayConfig, model: str, listed: Iterable[ModelInfo]) -> bool:
    """Whether a turn with `model` on `config` is an image generation (an image model of the
    gateway's `listed` models) rather than a chat answer."""
    return any(info.id == model and generates_images(config, info) for info in listed)


def image_count(posted: str) -> int:
    """The composer's `images` value as a count the picker offers (1 for anything else)."""
    return int(posted) if posted.isdigit() and int(posted) in IMAGE_COUNTS else 1


def image_prompt(messages: list[dict[str, Any]]) -> str:
    """The prompt of an image generation: the text of the last user message of its context."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            return content
        if message.get("role") == "user" and isinstance(content, list) and content:
            return str(content[0].get("text") or "")  # its text, before the files attached
    return ""
