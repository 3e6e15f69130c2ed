"""One transcription's upstream request (`POST /audio/transcriptions`), in a task of its own.

The view waits for the task, but does not own it: when the browser goes away, Django cancels
the view, not the request the gateway may already be billing, so the transcription still ends in
one terminal state with its cost (what the person said is lost; what it cost is not). The
request beats every second while it runs, so that the sweep (of any process, which interrupts
what has not beaten for `CHAT_STALE_AFTER`) leaves it alone, and has a deadline of its own
(`TRANSCRIPTION_SECONDS`): a person is waiting.

Its cost is the usage's, in the gateway's unit; where the usage reported none, it is settled as
every kind's is (`costs.settling`: the gateway's record, where Numes and Nodul keep one, else
the reason), and the sweep settles what is still pending.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from dataclasses import dataclass

from django.conf import settings

from chatapp import records_thread
from chatapp.costs import settling
from chatapp.costs.models import Generation
from chatapp.gateways.clients import shared_client
from chatapp.streaming import persistence
from chatapp.streaming.persistence import TranscriptionEnd
from chatapp.transcription.records import TranscriptionStart, beat
from gateway_client.errors import ErrorInfo, GatewayError

__all__ = ["TRANSCRIPTION_SECONDS", "Heard", "transcribe"]

logger = logging.getLogger(__name__)

Status = Generation.Status

# A minute of speech takes a transcription model a few seconds; this long is a failure.
TRANSCRIPTION_SECONDS = 90.0


@dataclass(frozen=True, slots=True)
class Heard:
    """What became of a recording: its text, or why there is none (`error`, in words)."""

    text: str
    error: str = ""


async def transcribe(
    start: TranscriptionStart, audio: bytes, filename: str, media_type: str
) -> Heard:
    """Send `audio` once, record how it went and settle its cost; what the gateway heard."""
    task = asyncio.get_running_loop().create_task(
        _run(start, audio, filename, media_type), context=contextvars.Context()
    )
    return await asyncio.shield(task)


async def _run(start: TranscriptionStart, audio: bytes, filename: str, media_type: str) -> Heard:
    beating = asyncio.create_task(_beat(start.generation_pk))
    try:
        heard, end = await _ask(start, audio, filename, media_type)
        final = await persistence.save_transcription(start.generation_pk, end)
    finally:
        beating.cancel()
    client = shared_client(start.setup.config)
    await settling.settle(client, start.generation_pk, start.user_pk, final)
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


async def _beat(generation_pk: int) -> None:
    while True:
        await asyncio.sleep(settings.CHAT_FLUSH_INTERVAL)
        try:
            await records_thread.on_record_thread(beat, generation_pk)
        except Exception:  # a missed beat is retried in a second; the sweep waits 15
            logger.warning("Transcription %s missed a heartbeat", generation_pk, exc_info=True)
