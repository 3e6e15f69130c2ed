"""Async client for OpenAI-compatible gateway streams: framework-free, typed, fast.

Layers, each usable alone: `sse` (bytes → events), `chunks` (a chunk → typed `events`),
`accumulator` (events → `Completion`), `stream_parser` (all three, plus `[DONE]` and terminal
state), `client` (`GatewayClient` over httpx, with deadlines, caps and cancel by closing), `retries`
(one `RetryBudget` per answer, which every layer that could send it again draws on).
"""

from __future__ import annotations

from .accumulator import Accumulator, Completion, ToolCall
from .client import GatewayClient, GenerationRecord, ModelInfo, Transcription
from .dialects import Limits, Timeouts
from .embeddings import Embeddings
from .errors import (
    ConnectError,
    ErrorInfo,
    GatewayError,
    GatewayTimeout,
    InBandError,
    IncompleteStream,
    LimitExceeded,
    ProtocolError,
    StatusError,
    StreamFailed,
    TransportError,
)
from .retries import RetryBudget
from .speech import SpeechStream
from .sse import ServerSentEvent, SSEDecoder
from .stream import EventStream
from .stream_parser import EventStreamParser

__all__ = [
    "Accumulator",
    "Completion",
    "ConnectError",
    "Embeddings",
    "ErrorInfo",
    "EventStream",
    "EventStreamParser",
    "GatewayClient",
    "GatewayError",
    "GatewayTimeout",
    "GenerationRecord",
    "InBandError",
    "IncompleteStream",
    "LimitExceeded",
    "Limits",
    "ModelInfo",
    "ProtocolError",
    "RetryBudget",
    "SSEDecoder",
    "ServerSentEvent",
    "SpeechStream",
    "StatusError",
    "StreamFailed",
    "Timeouts",
    "ToolCall",
    "Transcription",
    "TransportError",
]
