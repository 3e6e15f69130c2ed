"""One exception hierarchy for everything that can go wrong talking to a gateway.

    GatewayError                  root; `request_id`, `completion` (partial result, if any)
    ├── StatusError               non-200, or a 200 that is not an event stream (before output)
    ├── StreamFailed              the stream started, then did not finish properly
    │   ├── InBandError           the gateway sent an error event (any documented shape)
    │   ├── IncompleteStream      the body ended without `[DONE]`
    │   └── ProtocolError         bytes we cannot read as the documented protocol
    │       └── LimitExceeded     a line, event or output over its cap
    └── TransportError            the connection, not the gateway, failed
        ├── ConnectError          could not connect, or the connection dropped
        └── GatewayTimeout        a deadline passed; `phase` says which

`ErrorInfo` is the plain-data form (status, code, type, message) kept on a `Completion` and
persisted by the app; every exception can produce one with `.info`. It lives in `error_info`,
below `events` and `accumulator`, and is re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from .error_info import ErrorInfo

if TYPE_CHECKING:
    from .accumulator import Completion

__all__ = [
    "ConnectError",
    "ErrorInfo",
    "GatewayError",
    "GatewayTimeout",
    "InBandError",
    "IncompleteStream",
    "LimitExceeded",
    "Phase",
    "ProtocolError",
    "StatusError",
    "StreamFailed",
    "TransportError",
]


class GatewayError(Exception):
    """Root of every error raised by `gateway_client`."""

    status: int | None = None
    code: int | str | None = None
    type: str | None = None

    def __init__(
        self,
        message: str,
        *,
        request_id: str | None = None,
        completion: Completion | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id
        self.completion = completion

    @property
    def info(self) -> ErrorInfo:
        return ErrorInfo(self.status, self.code, self.type, self.message, self.request_id)


class StatusError(GatewayError):
    """The gateway answered with an error status (or a 200 that is not an event stream)."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: int | str | None = None,
        type: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        body_excerpt: str | None = None,
    ) -> None:
        super().__init__(message, request_id=request_id)
        self.status = status
        self.code = code
        self.type = type
        self.retry_after = retry_after
        self.body_excerpt = body_excerpt

    def __str__(self) -> str:
        # A code that only repeats the status (LiteLLM sends "503" for a 503) is said once.
        code = (
            f" {self.code}" if self.code is not None and str(self.code) != str(self.status) else ""
        )
        return f"HTTP {self.status}{code}: {self.message}"


class StreamFailed(GatewayError):
    """The stream started, then ended without a proper finish. `completion` holds the partial."""


class InBandError(StreamFailed):
    """An error event inside a 200 stream."""

    def __init__(
        self,
        info: ErrorInfo,
        *,
        completion: Completion | None = None,
    ) -> None:
        super().__init__(info.message, request_id=info.request_id, completion=completion)
        self.status = info.status
        self.code = info.code
        self.type = info.type

    def __str__(self) -> str:
        code = f" ({self.code})" if self.code is not None else ""
        return f"gateway error{code}: {self.message}"


class IncompleteStream(StreamFailed):
    """The response ended without `[DONE]`: the answer did not finish."""

    type = "incomplete"


class ProtocolError(StreamFailed):
    """The body is not the documented protocol (malformed JSON, not an event stream, ...)."""

    type = "protocol_error"


class LimitExceeded(ProtocolError):
    """A line, an event or the whole output grew past its configured cap."""

    type = "limit_exceeded"


class TransportError(GatewayError):
    """The connection failed, as opposed to the gateway reporting an error."""

    type = "transport_error"


class ConnectError(TransportError):
    """Could not connect, or the connection dropped."""

    type = "connect_error"


# Which deadline passed.
type Phase = Literal["connect", "first_token", "idle", "total"]


class GatewayTimeout(TransportError):
    """A deadline passed. `phase` is `connect`, `first_token`, `idle` or `total`."""

    type = "timeout"

    def __init__(
        self,
        message: str,
        *,
        phase: Phase,
        request_id: str | None = None,
        completion: Completion | None = None,
    ) -> None:
        super().__init__(message, request_id=request_id, completion=completion)
        self.phase = phase
        self.code = f"{phase}_timeout"
