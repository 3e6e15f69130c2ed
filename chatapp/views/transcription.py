"""The endpoint the composer posts a recording to: its text back, or why there is none, in words.

One POST per recording (`multipart/form-data`: `audio`, the `seconds` the browser measured, and
the `conversation` it was made in, if any). The recording is checked before anything is spent:
its size (`CHAT_VOICE_MAX_BYTES`, within the server's body bound for any form,
`access/body_limits.FORM`, which refuses a larger body while it arrives), its length
(`CHAT_VOICE_MAX_SECONDS`: a WAV's read from its header, else the browser's measure, which the
size bounds anyway) and its type. Then the ledger row and the spending limits
(`records.create_transcription`), then the one upstream request (`requests.transcribe`). Every
refusal is JSON `{"error": ...}` with a status, which the composer shows by the microphone.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.views.decorators.http import require_POST

from chatapp.access.body_limits import size_words
from chatapp.access.rate_limits import RateLimited
from chatapp.records_thread import on_record_thread_from_view
from chatapp.transcription import records, requests
from chatapp.transcription.records import TranscriptionRefused
from gateway_client.transcription import wav_seconds

if TYPE_CHECKING:
    from django.core.files.uploadedfile import UploadedFile

    from chatapp.authenticated import AuthenticatedRequest

__all__ = ["FILENAMES", "too_long", "transcribe"]

# The audio types a transcription endpoint takes (OpenAI's list), and the name each is sent as:
# the gateway may read the type from the name's extension.
FILENAMES = {
    "audio/webm": "voice.webm",
    "audio/ogg": "voice.ogg",
    "audio/mp4": "voice.mp4",
    "audio/mpeg": "voice.mp3",
    "audio/wav": "voice.wav",
    "audio/x-wav": "voice.wav",
    "audio/wave": "voice.wav",
    "audio/flac": "voice.flac",
}


def _refused(text: str, status: int) -> JsonResponse:
    return JsonResponse({"error": text}, status=status)


def _duration_words(seconds: float) -> str:
    whole = math.ceil(seconds)
    minutes, rest = divmod(whole, 60)
    if not minutes:
        return f"{whole} s"
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def too_long(seconds: float) -> str:
    limit = settings.CHAT_VOICE_MAX_SECONDS
    return (
        f"The recording is {_duration_words(seconds)} long; voice input takes at most "
        f"{_duration_words(limit)}. Record a shorter one."
    )


def _too_large(size: int) -> str:
    return (
        f"The recording is {size_words(size)}; voice input takes at most "
        f"{size_words(settings.CHAT_VOICE_MAX_BYTES)}. Record a shorter one."
    )


def _number(value: str | None) -> float | None:
    try:
        number = float(value or "")
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _media_type(upload: UploadedFile[bytes]) -> str:
    return (upload.content_type or "").split(";")[0].strip().lower()


@login_required
@require_POST
async def transcribe(request: AuthenticatedRequest) -> JsonResponse:
    """The text of the posted recording, for the message box."""
    upload = request.FILES.get("audio")
    if upload is None:
        return _refused("No recording arrived; try again.", 400)
    size = upload.size or 0
    if size > settings.CHAT_VOICE_MAX_BYTES:
        return _refused(_too_large(size), 413)
    media_type = _media_type(upload)
    filename = FILENAMES.get(media_type)
    if filename is None:
        return _refused(
            f"This browser recorded {media_type or 'an unknown type'}, which voice input cannot "
            "send: try Chromium or Firefox.",
            415,
        )
    data = upload.read()
    if not data:
        return _refused("The recording is empty: nothing was heard.", 400)
    seconds = wav_seconds(data) or _number(request.POST.get("seconds"))
    if seconds is not None and seconds > settings.CHAT_VOICE_MAX_SECONDS + 1:
        return _refused(too_long(seconds), 413)
    conversation_pk = _number(request.POST.get("conversation"))
    user = await request.auser()
    try:
        start = await on_record_thread_from_view(
            records.create_transcription,
            user,
            None if conversation_pk is None else int(conversation_pk),
        )
    except TranscriptionRefused as exc:
        return _refused(str(exc), 409)
    except RateLimited as exc:
        response = _refused(str(exc), 429)
        response["Retry-After"] = str(math.ceil(exc.retry_after))
        return response
    heard = await requests.transcribe(start, data, filename, media_type)
    if heard.error:
        return _refused(heard.error, 502)
    if not heard.text:
        return _refused("The gateway heard no words in the recording.", 422)
    return JsonResponse({"text": heard.text})
