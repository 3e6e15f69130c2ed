"""A faithful offline emulator of the four LLM gateways the app talks to.

Numes, Osmexo, tiny-3b and Nodul, each with its documented wire format: headers, first chunk,
keep-alive comments, reasoning fields, usage chunk (or none), error shapes before and after the
stream starts, and `[DONE]` (or not). It is the app's default upstream when offline and every
test's adversary. The model name picks a scripted scenario (`emulator/chat`, `emulator/stall`,
...; see `SCENARIOS`).

    app = create_app(tokens_per_second=40, ttft_ms=400, prefix="/emulator")  # pure ASGI 3
    with serve_in_thread(tokens_per_second=2000, ttft_ms=5) as url:           # "http://127.0.0.1:N"
        ...  # f"{url}/numes/api/v1", f"{url}/osmexo/v1", f"{url}/tiny/v1", f"{url}/nodul/api/v1"
        url.app.records.get(generation_id)                                    # EmulatorRecord

Knobs (`create_app` keywords, `Options` fields; per request also as URL query parameters or a
model suffix, e.g. `emulator/slow-start?slow_start_s=1.5`, but only in an app created with
`request_options=True`, as tests do: otherwise only whoever starts it sets them; the command
line's `--request-options`): `tokens_per_second`, `ttft_ms`,
`keepalive_interval_s` (15), `slow_start_s` (8), `slow_start_keepalive_s` (1), `stall_limit_s`
(None: each gateway's documented limit), `tiny_stall_s` (2), `finalize_delay_ms` (300),
`long_tokens` (3000); for the `tools` scenario `calls` (1), `rounds` (1), `args` (`valid` or
`invalid`) and `finish` (`tool_calls` or `stop`), e.g. `emulator/tools?calls=2&rounds=3`.

It never imports Django.
"""

from __future__ import annotations

from .app import EmulatorApp
from .embeddings import EMBEDDING_MODEL as _EMBEDDING_MODEL
from .options import Options
from .parsing import CALLS_TOOLS, SCENARIOS
from .records import EmulatorRecord, Registry
from .server import EmulatorURL, create_app, serve_in_thread

SPEECH_MODEL = "emulator/audio"
"""The model to ask its Numes `POST /audio/speech` for (any scenario speaks; this one is named
for it), as the app's Read aloud does."""

TRANSCRIPTION_MODEL = "emulator/audio"
"""The model to ask its `POST /audio/transcriptions` for (any scenario transcribes), as the app's
voice input does (`Gateway.transcription_model`)."""

EMBEDDING_MODEL = _EMBEDDING_MODEL
"""The model its `POST /embeddings` serves under (every dialect), the emulated gateways' default
embedding model (`Gateway.embedding_model`)."""

TITLE_MODEL = "emulator/title"
"""The model the app's emulated gateways write titles with (`Gateway.title_model`)."""

__all__ = [
    "CALLS_TOOLS",
    "EMBEDDING_MODEL",
    "SCENARIOS",
    "SPEECH_MODEL",
    "TITLE_MODEL",
    "TRANSCRIPTION_MODEL",
    "EmulatorApp",
    "EmulatorRecord",
    "EmulatorURL",
    "Options",
    "Registry",
    "create_app",
    "serve_in_thread",
]
