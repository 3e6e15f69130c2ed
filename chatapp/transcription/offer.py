"""Whether voice input is offered, and through which gateway and model.

A gateway transcribes when an admin gave it a transcription model (`Gateway.transcription_model`,
Admin → Gateways → Voice input): OpenAI's `POST /audio/transcriptions` is described by none of
the four documented gateways, but served by OpenAI and by LiteLLM and vLLM in front of providers
(and by the built-in emulator), so the admin's choice, not the dialect, says that one serves it.
A recording is transcribed by the conversation's gateway when that one transcribes, else by the
default gateway, else by the first that does: the microphone shows wherever any gateway can.
"""

from __future__ import annotations

from dataclasses import dataclass

from chatapp.gateways.configs import GatewayConfig, configs

__all__ = ["TranscriptionSetup", "can_transcribe", "transcription_for"]


@dataclass(frozen=True, slots=True)
class TranscriptionSetup:
    config: GatewayConfig
    model: str


def _offered(config: GatewayConfig | None) -> TranscriptionSetup | None:
    if config is None or not config.transcription_model:
        return None
    return TranscriptionSetup(config, config.transcription_model)


def transcription_for(gateway_pk: int | None) -> TranscriptionSetup | None:
    """How to transcribe a recording made in a conversation on gateway `gateway_pk` (None: a new
    chat, or not known), or None when no usable gateway transcribes. Database work on a cold
    cache: call off the loop."""
    found, default_pk = configs()
    for pk in (gateway_pk, default_pk, *sorted(found)):
        if pk is not None and (setup := _offered(found.get(pk))) is not None:
            return setup
    return None


def can_transcribe() -> bool:
    """Whether the composer offers its microphone: some usable gateway transcribes."""
    return transcription_for(None) is not None
