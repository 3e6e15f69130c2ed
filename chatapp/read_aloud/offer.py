"""Whether an answer can be read aloud, and through which gateway, model and voice.

Only Numes documents `POST /audio/speech`, so a gateway offers Read aloud when it speaks Numes'
dialect (set, or guessed from its URL) and an admin gave it a speech model: when the dialect
table (`gateway_client.dialects.DIALECTS`) says its dialect has `speech`. An answer is read by
its own gateway when that one offers it, else by the default gateway: an answer from a gateway
without speech can still be heard through the one that has it.
"""

from __future__ import annotations

from dataclasses import dataclass

from chatapp.conversations.models import Message
from chatapp.gateways.configs import GatewayConfig, configs
from gateway_client.dialects import facts_for, guess_dialect

__all__ = ["SpeechSetup", "can_read_aloud", "speech_for"]


@dataclass(frozen=True, slots=True)
class SpeechSetup:
    config: GatewayConfig
    dialect: str
    model: str
    voice: str


def _offered(config: GatewayConfig | None) -> SpeechSetup | None:
    if config is None or not config.speech_model:
        return None
    facts = facts_for(config.dialect or guess_dialect(config.base_url))
    if facts is None or not facts.speech:
        return None
    return SpeechSetup(config, facts.name, config.speech_model, config.speech_voice)


def speech_for(gateway_pk: int | None) -> SpeechSetup | None:
    """How to read aloud an answer written through gateway `gateway_pk` (None: not known), or
    None when no usable gateway offers it. Database work on a cold cache: call off the loop."""
    found, default_pk = configs()
    own = None if gateway_pk is None else _offered(found.get(gateway_pk))
    return own or _offered(found.get(default_pk))


def can_read_aloud(message: Message) -> bool:
    """Whether the page offers Read aloud on `message`: a finished answer with text, and a
    gateway to read it."""
    written = getattr(message, "generation", None)
    if message.role != Message.Role.ASSISTANT or written is None or written.is_running:
        return False
    return bool(message.content.strip()) and speech_for(written.gateway_id) is not None
