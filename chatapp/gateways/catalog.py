"""The model picker: every gateway's models, listed briefly cached, and the check that a turn's
model is one its gateway offers.

A turn may be answered by a chat model (`ModelInfo.chat`: not an embedding, rerank, speech,
moderation or image-only route) or made by an image model the gateway serves `POST /images` for
(`image_models`); a turn's model is checked against that rule (`listed_models`). The picker
groups them by what they do, as the gateway's `/models` entries say: chat models, then the image
models in a section of their own ("Gateway · images"); a chat model listed for one job only
(`ModelInfo.purpose`: the emulator's title model) is left out, unless it is the model a shown
conversation already uses (`catalog(in_use=...)`), which stays selectable. A model that answers a
chat with audio (the emulator's `emulator/audio`, also its speech model) is a chat model.

Labels are the gateway's names where it gives them, else ids; a gateway whose chat models come
from more than one provider (LiteLLM's `litellm_provider`, else an id's prefix: `openai/gpt-4o`,
`Qwen/Qwen2.5-7B-Instruct`) has a section per provider, "Gateway · provider", and an id's prefix
is dropped from its label there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from chatapp.gateways import detected, pricing
from chatapp.gateways.clients import shared_client
from chatapp.gateways.configs import GatewayConfig, GatewayUnavailable, aconfigs, unusable
from chatapp.gateways.image_models import generates_images
from gateway_client import ModelInfo, emulator
from gateway_client.errors import GatewayError

logger = logging.getLogger(__name__)

MODELS_TTL = 60.0
MODELS_RETRY = 10.0  # seconds before a gateway whose list failed is asked again

_models_cache: dict[GatewayConfig, tuple[float, list[ModelInfo]]] = {}
_models_failed: dict[GatewayConfig, tuple[float, str]] = {}
_models_fetching: dict[
    tuple[asyncio.AbstractEventLoop, GatewayConfig],
    asyncio.Future[tuple[list[ModelInfo], str | None]],
] = {}


@dataclass(frozen=True, slots=True)
class ModelChoice:
    value: str  # what the picker posts: `choice_value(gateway, model)`
    model: str
    label: str
    hint: str
    generates_images: bool = False  # an image model (`image_models`): the turn is `POST /images`
    takes_images: bool = False  # its entry lists image input: attached images are sent to it
    wants_tools: bool = False  # known to answer by calling tools (`wants_tools`)


@dataclass(frozen=True, slots=True)
class ModelSection:
    """One `<optgroup>` of the picker: a gateway's models, or those of one of its providers."""

    label: str
    choices: list[ModelChoice]


@dataclass(frozen=True, slots=True)
class GatewayModels:
    """A gateway's part of the model picker: its sections, or why it has none."""

    config: GatewayConfig
    sections: list[ModelSection]
    error: str | None

    @property
    def choices(self) -> list[ModelChoice]:
        return [choice for section in self.sections for choice in section.choices]


def choice_value(gateway_pk: int, model: str) -> str:
    return f"g{gateway_pk}:{model}"


def parse_choice(value: str) -> tuple[int | None, str]:
    """A picker value → (gateway pk, model); a bare model ID means the default gateway."""
    if value.startswith("g"):
        head, sep, model = value[1:].partition(":")
        if sep and head.isdigit():
            return int(head), model
    return None, value


class ModelUnavailable(GatewayUnavailable):
    """The gateway does not list the model asked for, or its list cannot be read."""


async def list_models(config: GatewayConfig) -> tuple[list[ModelInfo], str | None]:
    """The gateway's models (cached briefly) and an error message when it could not say (the
    last list it gave, if any, with it). One request at a time per gateway, however many pages
    ask (each may read up to 4 MiB: `gateway_client.model_list`), and a failure is remembered
    for `MODELS_RETRY`, so a gateway that is down or hostile is not asked again by every page."""
    if await detected.ensure_detected(config):  # a blank dialect, now known: list as that
        config = (await aconfigs())[0].get(config.pk, config)
    cached = _models_cache.get(config)
    failed = _models_failed.get(config)
    now = time.monotonic()
    if cached and now - cached[0] < MODELS_TTL:
        return cached[1], None
    if failed and now - failed[0] < MODELS_RETRY:
        return (cached[1] if cached else []), failed[1]
    key = (asyncio.get_running_loop(), config)
    fetching = _models_fetching.get(key)
    if fetching is None:
        fetching = _models_fetching[key] = asyncio.ensure_future(_fetch_models(config))
        fetching.add_done_callback(lambda _: _models_fetching.pop(key, None))
    return await asyncio.shield(fetching)


async def _fetch_models(config: GatewayConfig) -> tuple[list[ModelInfo], str | None]:
    cached = _models_cache.get(config)
    try:
        models = sorted(await shared_client(config).list_models(), key=lambda m: m.id)
    except GatewayError as exc:
        logger.warning("Could not list models from %s: %s", config.name, exc)
        error = f"Could not load the model list: {exc}"
        _models_failed[config] = (time.monotonic(), error)
        return (cached[1] if cached else []), error
    _models_failed.pop(config, None)
    _models_cache[config] = (time.monotonic(), models)
    await pricing.remember_listed(config, models)
    return models, None


async def listed_models(config: GatewayConfig, model: str) -> list[ModelInfo]:
    """The gateway's models, when they list `model` as one that answers a turn (`answers_turns`:
    one the picker leaves out for its purpose does, so a conversation on it goes on); else
    `ModelUnavailable` in words. A turn with a model the gateway does not list is refused, not
    sent: it would reach the ledger under any name a user typed; one listed as no chat model
    (an embedding route) would only fail upstream. When the list cannot be read the turn is
    refused too, saying so: the model cannot be checked, and a gateway that cannot list its
    models rarely answers chats."""
    models, error = await list_models(config)
    wanted = _without_emulator_options(config, model)
    found = [info for info in models if info.id == wanted]
    if any(answers_turns(config, info) for info in found):
        return models
    if found:
        info = found[0]
        why = info.mode or " and ".join(info.output_modalities) or "by its name"
        raise ModelUnavailable(
            f"{config.name} lists {model[:200]!r}, but not as a chat model ({why})."
        )
    if error is not None and not models:
        raise ModelUnavailable(f"{config.name}: {error}; try again in a moment.")
    raise ModelUnavailable(f"{config.name} does not offer the model {model[:200]!r}.")


def _without_emulator_options(config: GatewayConfig, model: str) -> str:
    """`model` without the knobs the emulator reads from its name (`emulator/long?long_tokens=50`,
    when `CHAT_EMULATOR_REQUEST_OPTIONS`), only where an emulator reads them: the built-in one,
    or a served one (the tests'), whose models are its scenarios; `gpt-4?x` stays unlisted."""
    if not settings.CHAT_EMULATOR_REQUEST_OPTIONS:
        return model
    name = model.partition("?")[0]
    prefix, _, scenario = name.partition("/")
    if config.emulated or (prefix == "emulator" and scenario in emulator.SCENARIOS):
        return name
    return model


def takes_images(config: GatewayConfig, model: str) -> bool:
    """Whether `model`'s entry in the last list `config`'s gateway gave lists image input
    (`architecture.input_modalities`), however old that list: every path that starts a turn
    has listed the models just before (`listed_models`). No list, or no such entry: False."""
    lists = [found for cached, found in list(_models_cache.items()) if cached.pk == config.pk]
    if not lists:
        return False
    _, models = max(lists, key=lambda found: found[0])
    return takes_images_in(config, model, models)


def takes_images_in(config: GatewayConfig, model: str, models: list[ModelInfo]) -> bool:
    """Whether `model`'s entry in `models`, a list `config`'s gateway gave, lists image input:
    for a send, from the list `listed_models` read for it (the catalog asked once)."""
    wanted = _without_emulator_options(config, model)
    return any(info.id == wanted and "image" in info.input_modalities for info in models)


def answers_turns(config: GatewayConfig, info: ModelInfo) -> bool:
    """Whether a turn may go to `info`: a chat model, or an image model `config` serves."""
    return info.chat or generates_images(config, info)


def offered(config: GatewayConfig, info: ModelInfo) -> bool:
    """Whether the picker offers `info`: one that answers turns and is listed for no one job."""
    return answers_turns(config, info) and info.purpose is None


def wants_tools(info: ModelInfo) -> bool:
    """Whether `info` is known to answer by calling a tool, so that with none offered its answer
    is a call nothing runs: the emulator's tool scenarios (`emulator.CALLS_TOOLS`). A gateway's
    list says which models take tools, never which need them."""
    prefix, _, scenario = info.id.partition("/")
    return prefix == "emulator" and scenario in emulator.CALLS_TOOLS


def provider_of(info: ModelInfo) -> str:
    """The provider the gateway names for `info`, else its id's prefix (`Qwen/Qwen2.5-7B` →
    `Qwen`); "" when neither tells."""
    prefix, slash, rest = info.id.partition("/")
    return info.provider or (prefix if slash and prefix and rest else "")


def sections_for(
    config: GatewayConfig, models: list[ModelInfo], in_use: str = ""
) -> list[ModelSection]:
    """The picker's sections for `config`'s offered `models`, and `in_use` where it answers
    turns (see the module)."""
    shown = [
        info
        for info in models
        if offered(config, info) or (info.id == in_use and answers_turns(config, info))
    ]
    images = [info for info in shown if generates_images(config, info)]
    chats = [info for info in shown if not generates_images(config, info)]
    sections = []
    providers = {provider_of(info) for info in chats}
    if len(providers) <= 1:
        if chats:
            sections.append(ModelSection(config.name, _choices(config, chats, by_provider=False)))
    else:
        for provider in sorted(providers, key=str.lower):  # "" (none named) first
            of_provider = [info for info in chats if provider_of(info) == provider]
            label = f"{config.name} · {provider}" if provider else config.name
            sections.append(ModelSection(label, _choices(config, of_provider, by_provider=True)))
    if images:
        label = f"{config.name} · images"
        sections.append(ModelSection(label, _choices(config, images, by_provider=False)))
    return sections


def _choices(
    config: GatewayConfig, models: list[ModelInfo], *, by_provider: bool
) -> list[ModelChoice]:
    choices = []
    for info in models:
        label = info.name or info.id
        provider = provider_of(info)
        if by_provider and not info.name and provider and info.id.startswith(provider + "/"):
            label = info.id[len(provider) + 1 :]  # the section names the prefix
        choices.append(
            ModelChoice(
                choice_value(config.pk, info.id),
                info.id,
                label,
                info.description or (info.id if label != info.id else ""),
                generates_images(config, info),
                "image" in info.input_modalities,
                wants_tools(info),
            )
        )
    return sorted(choices, key=lambda choice: choice.label.lower())


def narrowed(found: list[GatewayModels], allows: Callable[[str, str], bool]) -> list[GatewayModels]:
    """The picker `found` with only the models `allows(gateway name, model)`: a section left
    empty goes, and a gateway with no model left goes, its error with it (a user who may use
    none of its models has no use for why it is down)."""
    kept = []
    for gateway in found:
        sections = [
            ModelSection(section.label, choices)
            for section in gateway.sections
            if (choices := [c for c in section.choices if allows(gateway.config.name, c.model)])
        ]
        if sections:
            kept.append(GatewayModels(gateway.config, sections, gateway.error))
    return kept


async def catalog(in_use: tuple[int | None, str] | None = None) -> list[GatewayModels]:
    """The model picker: every usable enabled gateway's models, the default gateway first; a
    gateway that is down, or a row that cannot be used (`configs.unusable`), is a group with its
    reason, and the others still work. `in_use`, the (gateway pk, None for the default, model)
    of the conversation shown, is offered on its gateway even where it would be left out."""
    found, default_pk = await aconfigs(checked=True)  # a gateway saved by another process too
    ordered = sorted(found.values(), key=lambda c: (c.pk != default_pk, c.name.lower()))
    listed = await asyncio.gather(*(list_models(config) for config in ordered))
    broken = sorted(unusable(), key=lambda config: config.name.lower())
    used_pk, used_model = in_use or (None, "")
    return [
        GatewayModels(
            config,
            sections_for(
                config, models, used_model if (used_pk or default_pk) == config.pk else ""
            ),
            error,
        )
        for config, (models, error) in zip(ordered, listed, strict=True)
    ] + [GatewayModels(config, [], f"Not usable: {config.unusable}.") for config in broken]
