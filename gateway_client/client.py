"""`GatewayClient`: the async httpx client for gateway streams.

    async with GatewayClient(base_url, api_key) as gw:
        async with gw.stream_chat(model=..., messages=[...]) as stream:
            async for event in stream:
                ...

Entering a stream sends the request and checks status and content type before parsing; an error
response raises `StatusError`. A refused request is sent again only before any output, only where
the gateway advises it and has not retried already (`retries.retry_wait`), and only as far as the
answer's `RetryBudget` allows (one resend in all, shared with the transport's, and 5 s of waiting;
a stream makes one unless given its answer's). Once output has started nothing is ever retried: a
failure raises a `StreamFailed` or `TransportError` carrying the partial `completion`. Leaving the
block closes the connection, which is the only cancel the gateways know.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, Self

import httpx
import orjson

from .dialects import (
    Limits,
    Timeouts,
    default_timeouts,
    detect_dialect,
    facts_for,
    guess_dialect,
    header_request_id,
)
from .embeddings import Embeddings, embed
from .errors import ConnectError, GatewayError, GatewayTimeout, ProtocolError, StatusError
from .generation_record import GenerationRecord, parse_generation_record
from .model_list import (
    MAX_MODELS_BYTES,
    ModelInfo,
    TooLarge,
    parse_model_info,
    parse_models,
    with_details,
)
from .redaction import Redactor
from .retries import EXTENSION, RetryBudget, retry_wait
from .speech import SpeechStream
from .stream import EventStream
from .stream_parser import parse_retry_after, status_error
from .transcription import Transcription, transcribe
from .transport import GatewayTransport

__all__ = ["GatewayClient", "GenerationRecord", "ModelInfo", "Transcription"]

_USER_AGENT = "gateway-chat/0.1 (+gateway_client)"


class GatewayClient:
    """One gateway, by base URL (e.g. `https://api.numes.ai/api/v1`) and API key."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        dialect: str | None = None,
        timeouts: Timeouts | None = None,
        limits: Limits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if not api_key:
            raise ValueError("an API key is required")
        self.base_url = base_url.rstrip("/")
        self.dialect = dialect or guess_dialect(self.base_url)
        self.dialect_is_explicit = dialect is not None
        self.timeouts_are_explicit = timeouts is not None
        self.timeouts = timeouts or default_timeouts(self.dialect)
        self.limits = limits or Limits()
        self.redactor = Redactor(api_key)  # a gateway may quote the key back in an error
        self._http = httpx.AsyncClient(
            transport=transport or GatewayTransport(),
            headers={
                "Authorization": f"Bearer {api_key}",
                "User-Agent": _USER_AGENT,
                **(headers or {}),
            },
            # Read deadlines are ours (first token, idle, total); httpx only bounds the connect.
            timeout=httpx.Timeout(None, connect=self.timeouts.connect),
            # The pool (uncapped: one client serves a whole server process) is the transport's.
            follow_redirects=False,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # Streams -----------------------------------------------------------------------------

    def stream_chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        reasoning: dict[str, Any] | None = None,
        retries: RetryBudget | None = None,
        **extra: Any,
    ) -> EventStream:
        """A chat completion (`/chat/completions`); `retries`: the answer's budget, shared by
        whatever else may send it again (a fresh one when None)."""
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
        if tools:
            body["tools"] = tools
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if reasoning is not None:
            body["reasoning"] = reasoning
        body.setdefault("stream_options", {"include_usage": True})
        body.update(extra)
        return self._stream("chat/completions", body, retries)

    def stream_completion(
        self,
        *,
        model: str,
        prompt: str,
        max_tokens: int | None = None,
        retries: RetryBudget | None = None,
        **extra: Any,
    ) -> EventStream:
        """A text completion (`/completions`): `text_completion` chunks with a `text` field."""
        body: dict[str, Any] = {"model": model, "prompt": prompt, "stream": True}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        body.update(extra)
        return self._stream("completions", body, retries)

    def stream_images(
        self,
        *,
        model: str,
        prompt: str,
        n: int = 1,
        retries: RetryBudget | None = None,
        **extra: Any,
    ) -> EventStream:
        """An image stream (`/images`): `ImageOutput` previews and finals, `Usage`, errors."""
        body: dict[str, Any] = {"model": model, "prompt": prompt, "n": n, "stream": True}
        body.update(extra)
        return self._stream("images", body, retries)

    def stream_speech(
        self,
        *,
        model: str,
        input: str,
        voice: str | None = None,
        retries: RetryBudget | None = None,
        **extra: Any,
    ) -> SpeechStream:
        """Speech (`/audio/speech`): raw audio bytes, no SSE."""
        body: dict[str, Any] = {"model": model, "input": input}
        if voice:
            body["voice"] = voice
        body.update(extra)
        return SpeechStream(self, self._url("audio/speech"), body, retries)

    async def transcribe(
        self,
        *,
        model: str,
        audio: bytes,
        filename: str,
        media_type: str,
        language: str | None = None,
    ) -> Transcription:
        """Speech to text (`/audio/transcriptions`): one multipart request, one JSON answer
        (`transcription`)."""
        return await transcribe(
            self,
            self._http,
            self._url("audio/transcriptions"),
            model=model,
            audio=audio,
            filename=filename,
            media_type=media_type,
            language=language,
        )

    async def embed(
        self,
        *,
        model: str,
        inputs: list[str],
        retries: RetryBudget | None = None,
        **extra: Any,
    ) -> Embeddings:
        """Vectors for `inputs` (`/embeddings`), one request: see `embeddings` for its bounds."""
        url = self._url("embeddings")
        return await embed(self, url, model=model, inputs=inputs, retries=retries, **extra)

    def _stream(self, path: str, body: dict[str, Any], retries: RetryBudget | None) -> EventStream:
        return EventStream(self, self._url(path), body, retries)

    # Requests and lookups -----------------------------------------------------------------

    async def open(
        self,
        url: str,
        body: dict[str, Any],
        *,
        accept: str,
        deadline: float | None,
        retries: RetryBudget,
    ) -> httpx.Response:
        """POST and wait for the response head, sending again where the gateway advises it and
        `retries` allows (see `retries`).

        Returns a 2xx streaming response; raises `StatusError` for anything else.
        """
        content = orjson.dumps(body)
        loop = asyncio.get_running_loop()
        while True:
            response = await self._send(
                url, content, accept=accept, deadline=deadline, retries=retries
            )
            if response.status_code == 200:
                return response
            dialect = self.dialect
            if not self.dialect_is_explicit:
                dialect = detect_dialect(response.headers, dialect)
            error = await self.read_status_error(response)
            wait = retry_wait(error, response.headers, dialect)
            if wait is None or (deadline is not None and loop.time() + wait >= deadline):
                raise error
            if not retries.spend(wait):  # spent already, or a `Retry-After` past what is left
                raise error
            await asyncio.sleep(wait)

    async def _send(
        self,
        url: str,
        content: bytes,
        *,
        accept: str,
        deadline: float | None,
        retries: RetryBudget,
    ) -> httpx.Response:
        request = self._http.build_request(
            "POST",
            url,
            content=content,
            headers={"Content-Type": "application/json", "Accept": accept},
            extensions={EXTENSION: retries},  # the transport's resends draw on it too
        )
        try:
            async with asyncio.timeout_at(deadline):
                return await self._http.send(request, stream=True)
        except TimeoutError:
            raise GatewayTimeout(
                "no response from the gateway before the first-token deadline",
                phase="first_token",
            ) from None
        except httpx.ConnectTimeout as exc:
            raise GatewayTimeout(
                f"could not connect to {request.url.host} within {self.timeouts.connect:g} s",
                phase="connect",
            ) from exc
        except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
            # Connected, then dropped before any response: not "could not reach".
            raise ConnectError(
                f"{request.url.host} closed the connection before answering: {_reason(exc)}"
            ) from exc
        except httpx.TransportError as exc:
            raise ConnectError(f"could not reach {request.url.host}: {_reason(exc)}") from exc

    async def read_status_error(self, response: httpx.Response) -> StatusError:
        """Read a bounded part of an error response and close it."""
        body = bytearray()
        try:
            async for piece in response.aiter_bytes():
                body += piece
                if len(body) >= self.limits.max_error_body_bytes:
                    break
        except httpx.HTTPError:
            pass  # what arrived is enough to describe the error
        finally:
            await response.aclose()
        return status_error(
            response.status_code,
            response.headers.get("content-type"),
            self.redactor.bytes(bytes(body)),
            request_id=header_request_id(response.headers, self.dialect),
            retry_after=parse_retry_after(response.headers.get("retry-after")),
        )

    async def get_generation(
        self, generation_id: str, *, attempts: int = 6, first_wait: float = 0.25
    ) -> GenerationRecord:
        """The gateway's generation record (`GET /generation?id=`), the authority on cost.

        Retries while the record says `in_progress` or is not found yet (it appears shortly
        after a stream ends), with doubling waits; returns the last `in_progress` record if it
        never settles, and raises `StatusError` if the gateway has none.
        """
        wait = first_wait
        record: GenerationRecord | None = None
        for attempt in range(attempts):
            try:
                response = await self._http.get(
                    self._url("generation"), params={"id": generation_id}
                )
            except httpx.TransportError as exc:
                raise ConnectError(f"could not reach the gateway: {_reason(exc)}") from exc
            last = attempt == attempts - 1
            if response.status_code == 200:
                record = parse_generation_record(generation_id, response.json())
                if record.outcome != "in_progress" or last:
                    return record
            else:
                error = status_error(
                    response.status_code,
                    response.headers.get("content-type"),
                    self.redactor.bytes(response.content[: self.limits.max_error_body_bytes]),
                    request_id=header_request_id(response.headers, self.dialect),
                )
                if response.status_code not in (404, 429, 502, 503) or last:
                    if record is not None:
                        return record
                    raise error
            await asyncio.sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")

    async def list_models(self) -> list[ModelInfo]:
        """The gateway's `/models`, read as untrusted (`model_list`): at most `MAX_MODELS_BYTES`
        are read, and a body that is not a list of models is a `ProtocolError`. Where the
        dialect serves more about each model (`prices_path`: LiteLLM's `/model/info`, with each
        route's mode and prices), that is asked too, one request more; its failure leaves the
        list as `/models` gave it."""
        listed = parse_models(await self._get_list(self._url("models"), "model list"))
        facts = facts_for(self.dialect)
        if facts is None or facts.prices_path is None:
            return listed
        # Under the server's root: the base URL without the dialect's API root (LiteLLM serves
        # `/models` both there and at `/v1`).
        root = self.base_url.removesuffix(facts.base_path)
        try:
            body = await self._get_list(root + facts.prices_path, "model details")
            details = parse_model_info(body)
        except GatewayError:
            return listed
        return with_details(listed, details)

    async def _get_list(self, url: str, what: str) -> bytes:
        """GET a model list's body: asked for and read unencoded (one read of a compressed body
        could expand far past the cap before it was counted), `TooLarge` past the cap."""
        headers = {"Accept-Encoding": "identity"}
        try:
            async with self._http.stream("GET", url, headers=headers, timeout=30.0) as response:
                content_type = response.headers.get("content-type")
                encoding = response.headers.get("content-encoding", "identity").strip().lower()
                if response.status_code != 200:
                    cap = self.limits.max_error_body_bytes
                    body = await _read_capped(response, cap, raw=encoding != "identity")
                    raise status_error(
                        response.status_code, content_type, self.redactor.bytes(body)
                    )
                if encoding != "identity":
                    raise ProtocolError(f"the {what} came {encoding[:40]}-encoded, unasked")
                body = await _read_capped(response, MAX_MODELS_BYTES, raw=True)
        except httpx.TransportError as exc:
            raise ConnectError(f"could not reach the gateway: {_reason(exc)}") from exc
        if len(body) > MAX_MODELS_BYTES:
            raise TooLarge(f"the {what} is larger than {MAX_MODELS_BYTES // 2**20} MiB")
        return body

    async def get_capped(
        self, url: str, *, cap: int = 64 * 1024, seconds: float = 5.0
    ) -> tuple[int, httpx.Headers, bytes]:
        """GET `url` (with this gateway's key: only ever a URL under its own server) and return
        its status, headers and at most `cap` bytes of its body, unencoded; `ConnectError` when
        it cannot be reached, or does not answer within `seconds`."""
        headers = {"Accept-Encoding": "identity"}
        try:
            async with asyncio.timeout(seconds):
                async with self._http.stream("GET", url, headers=headers) as response:
                    body = await _read_capped(response, cap, raw=True)
                    return response.status_code, response.headers, body[:cap]
        except TimeoutError:
            raise ConnectError(f"no answer from {url} within {seconds:g} s") from None
        except httpx.TransportError as exc:
            raise ConnectError(f"could not reach {url}: {_reason(exc)}") from exc

    def _url(self, path: str) -> str:
        return f"{self.base_url}/{path}"


async def _read_capped(response: httpx.Response, cap: int, *, raw: bool = False) -> bytes:
    """The body up to `cap` bytes and one more (so that the caller can tell it went over); the
    rest is never read: leaving the `stream` block closes the connection. `raw`: as sent, not
    decoded."""
    body = bytearray()
    async for piece in response.aiter_raw() if raw else response.aiter_bytes():
        body += piece
        if len(body) > cap:
            return bytes(body[: cap + 1])
    return bytes(body)


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
