"""One transcription's upstream request (`POST /audio/transcriptions`), in a task of its own.

The view waits for the task, but does not own it: when the browser goes away, Django cancels
the view, not the request the gateway may already be billing, so the transcription still ends in
one terminal state with its cost (what the person said is lost; what it cost is not). The
request beats while it runs, so that another process's sweep leaves it alone, and has a deadline
of its own (`TRANSCRIPTION_SECONDS`): a person is waiting.

Its cost is the usage's, in the gateway's unit; where the usage reported none, the gateway's
record is asked (Numes and Nodul send a generation ID) and the sweep settles what is still
pending, as for a read aloud.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from dataclasses import dataclass

from django.conf import settings

from chatapp.costs import reconcile, spend_push
from chatapp.gateways.clients import shared_client
from chatapp.models import Generation
from chatapp.streaming import persistence
from chatapp.transcription.records import TranscriptionEnd, TranscriptionStart, beat
from gateway_client.errors import ErrorInfo, GatewayError

__all__ = ["TRANSCRIPTION_SECONDS", "Heard", "running_pks", "transcribe"]

logger = logging.getLogger(__name__)

Status = Generation.Status

# A minute of speech takes a transcription model a few seconds; this long is a failure.
TRANSCRIPTION_SECONDS = 90.0

_running: set[int] = set()


@dataclass(frozen=True, slots=True)
class Heard:
    """What became of a recording: its text, or why there is none (`error`, in words)."""

    text: str
    error: str = ""


def running_pks() -> set[int]:
    """Transcriptions running in this process (the sweep leaves them alone)."""
    return set(_running)


async def transcribe(
    start: TranscriptionStart, audio: bytes, filename: str, media_type: str
) -> Heard:
    """Send `audio` once, record how it went and settle its cost; what the gateway heard."""
    task = asyncio.get_running_loop().create_task(
        _run(start, audio, filename, media_type), context=contextvars.Context()
    )
    return await asyncio.shield(task)


async def _run(start: TranscriptionStart, audio: bytes, filename: str, media_type: str) -> Heard:
    _running.add(start.generation_pk)
    beating = asyncio.create_task(_beat(start.generation_pk))
    try:
        heard, end = await _ask(start, audio, filename, media_type)
        final = await persistence.save_transcription(start.generation_pk, end)
    finally:
        beating.cancel()
        _running.discard(start.generation_pk)
    await _settle(start, final)
    return heard


async def _ask(
    start: TranscriptionStart, audio: bytes, filename: str, media_type: str
) -> tuple[Heard, TranscriptionEnd]:
    """Never raises: what was heard, and how the request ended."""
    client = shared_client(start.setup.config)
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        async with asyncio.timeout(TRANSCRIPTION_SECONDS):
            result = await client.transcribe(
                model=start.setup.model, audio=audio, filename=filename, media_type=media_type
            )
    except GatewayError as exc:
        logger.warning("Transcription %s failed: %s", start.generation_pk, exc)
        end = TranscriptionEnd(Status.FAILED, "", exc.request_id or "", None, None, exc.info)
        return Heard("", _refusal_words(exc)), end
    except TimeoutError:
        said = f"The gateway did not answer within {TRANSCRIPTION_SECONDS:g} s."
        error = ErrorInfo(None, "timeout", "timeout", said)
        return Heard("", said), TranscriptionEnd(Status.FAILED, "", "", None, None, error)
    ttft_ms = round((loop.time() - began) * 1000)
    end = TranscriptionEnd(
        Status.COMPLETED, result.generation_id, result.request_id, ttft_ms, result.usage
    )
    return Heard(result.text.strip()), end


def _refusal_words(exc: GatewayError) -> str:
    if exc.status in (404, 405):
        return (
            "This gateway does not transcribe speech (it has no /audio/transcriptions): an admin "
            "can choose another gateway's transcription model."
        )
    return f"The gateway could not transcribe the recording: {exc.info.message}"


async def _settle(start: TranscriptionStart, final: persistence.FinalState) -> None:
    """The transcription's cost, when its usage reported none: the gateway's record, else the
    reason (`costing`); the sweep retries what stays pending. The user's spend line is told."""
    if final.cost_pending:
        try:
            lookup = await reconcile.look_up(
                shared_client(start.setup.config),
                final.upstream_id,
                expected=final.record_expected,
            )
            await persistence.settle_cost(start.generation_pk, lookup)
        except Exception:  # the sweep settles it later
            logger.exception("Settling the cost of transcription %s failed", start.generation_pk)
    await spend_push.cost_settled(start.user_pk)


async def _beat(generation_pk: int) -> None:
    while True:
        await asyncio.sleep(settings.CHAT_FLUSH_INTERVAL)
        try:
            await persistence.on_record_thread(beat, generation_pk)
        except Exception:  # a missed beat is retried in a second; the sweep waits 15
            logger.warning("Transcription %s missed a heartbeat", generation_pk, exc_info=True)
