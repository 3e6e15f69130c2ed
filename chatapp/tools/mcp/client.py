"""Talking to one MCP server through the official `mcp` SDK: a session per use, its bytes capped.

A session lives only as long as one listing or one call, on the event loop of whoever asks (the
worker running a turn, or the admin's refresh): nothing is shared between Daphne processes or
loops, a server that restarted between two calls is simply met again, and no idle connection is
held. On loopback a session costs an `initialize` round trip and its acknowledgement, a few ms
(`tests/chatapp/tools/mcp/test_mcp_tools.py` measures it).

Every byte the server sends in a session counts against `CHAT_MCP_MAX_BYTES` (`_CappedTransport`):
the SDK reads whole responses, so the cap is where a server sending gigabytes is cut off. Headers
(a bearer token among them) go to the server and nowhere else: not into a log line, nor into a
reason shown to anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from django.conf import settings
from mcp import ClientSession, McpError, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.session import RequestResponder

from chatapp.errors import ChatAppError

__all__ = ["Budget", "ServerAccess", "TooLarge", "Unreachable", "raced", "reason", "session"]

logger = logging.getLogger(__name__)

type ListChanged = Callable[[], Awaitable[None]]


class Unreachable(ChatAppError):
    """The server could not be talked to: the reason, in words fit for an admin and a model."""


class Garbled(ChatAppError):
    """The server answered with what the SDK could not read as MCP."""


class TooLarge(ChatAppError):
    """The server sent more than `CHAT_MCP_MAX_BYTES` in one session."""


@dataclass(frozen=True, slots=True)
class ServerAccess:
    """What a session needs of an `McpServer`: its URL, transport and decrypted headers (never
    logged: `__repr__` leaves them out)."""

    pk: int
    name: str
    url: str
    transport: str
    headers: dict[str, str] = field(repr=False)


@dataclass(slots=True)
class Budget:
    """A session's watch on its transport: the bytes it may still receive (`spent_out` once a
    response went past them), and the first failure of a request's POST (`failure`, with
    `failed` set). The SDK (1.30) logs such a failure and leaves the request waiting for an
    answer that cannot come (a server killed mid-call, a response cut off); `raced` ends the
    wait at once instead of at the deadline."""

    left: int
    spent_out: bool = False
    failure: BaseException | None = None
    failed: asyncio.Event = field(default_factory=asyncio.Event)

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            self.failed.set()


async def raced[T](work: Awaitable[T], budget: Budget) -> T:
    """`work`'s result, or the transport's failure raised as soon as it happens. Cancelling the
    caller cancels `work` too."""
    task = asyncio.ensure_future(work)
    failed = asyncio.ensure_future(budget.failed.wait())
    try:
        await asyncio.wait({task, failed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        failed.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    if task.done() and not task.cancelled():
        return task.result()
    assert budget.failure is not None
    raise budget.failure


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, budget: Budget, watched: bool) -> None:
        self._inner = inner
        self._budget = budget
        self._watched = watched

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                self._budget.left -= len(chunk)
                if self._budget.left < 0:
                    self._budget.spent_out = True
                    cap = settings.CHAT_MCP_MAX_BYTES
                    raise TooLarge(f"the server sent more than {cap:,} bytes")
                yield chunk
        except Exception as exc:
            if self._watched or isinstance(exc, TooLarge):
                self._budget.fail(exc)
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, each response's body counted against one `Budget`, and the
    failures of POSTs (requests and their answers) reported to it. The long-lived GET stream of
    server notifications is not watched: the SDK reconnects it itself."""

    def __init__(self, budget: Budget) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._budget = budget

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        watched = request.method == "POST"
        try:
            response = await self._inner.handle_async_request(request)
        except Exception as exc:
            if watched:
                self._budget.fail(exc)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self._budget, watched)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _http_client(access: ServerAccess, budget: Budget) -> httpx.AsyncClient:
    timeout = httpx.Timeout(settings.CHAT_MCP_CONNECT_TIMEOUT, read=settings.CHAT_MCP_TIMEOUT)
    return httpx.AsyncClient(
        headers=access.headers, timeout=timeout, transport=_CappedTransport(budget)
    )


def _message_handler(budget: Budget, on_list_changed: ListChanged | None) -> Any:
    async def handle(
        message: RequestResponder[types.ServerRequest, types.ClientResult]
        | types.ServerNotification
        | Exception,
    ) -> None:
        if isinstance(message, Exception):
            # What the SDK could not read (a web page where JSON-RPC was expected, a message
            # that is not one): no answer will come, so the session ends at once.
            budget.fail(Garbled(f"it answered with what is not MCP ({str(message)[:80]})"))
            return
        if (
            on_list_changed is not None
            and isinstance(message, types.ServerNotification)
            and isinstance(message.root, types.ToolListChangedNotification)
        ):
            await on_list_changed()

    return handle


@contextlib.asynccontextmanager
async def session(
    access: ServerAccess, budget: Budget, on_list_changed: ListChanged | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized session with the server, closed (and ended on the server) on exit. The
    caller bounds the time (`asyncio.timeout`); the bytes are bounded by `budget`."""
    async with contextlib.AsyncExitStack() as stack:
        if access.transport == "sse":

            def factory(
                headers: dict[str, str] | None = None,
                timeout: httpx.Timeout | None = None,
                auth: httpx.Auth | None = None,
            ) -> httpx.AsyncClient:
                return _http_client(access, budget)

            read, write = await stack.enter_async_context(
                sse_client(
                    access.url,
                    timeout=settings.CHAT_MCP_CONNECT_TIMEOUT,
                    sse_read_timeout=settings.CHAT_MCP_TIMEOUT,
                    httpx_client_factory=factory,
                )
            )
        else:
            http = await stack.enter_async_context(_http_client(access, budget))
            read, write, _ = await stack.enter_async_context(
                streamable_http_client(access.url, http_client=http)
            )
        client = await stack.enter_async_context(
            ClientSession(
                read,
                write,
                message_handler=_message_handler(budget, on_list_changed),
                client_info=types.Implementation(name="chatapp", version="1"),
            )
        )
        try:
            await raced(client.initialize(), budget)
        except McpError as exc:
            # The SDK's word for a 404 to a POST: before a session exists, no endpoint here.
            if exc.error.message == "Session terminated":
                raise Unreachable("it answered HTTP 404 (is this its MCP endpoint?)") from exc
            raise
        yield client


def reason(exc: BaseException, budget: Budget | None = None) -> str:
    """Why talking to a server failed, in a line for the admin, the pane and the model (never
    the headers: an httpx error names the URL and status only)."""
    if budget is not None and budget.spent_out:
        return f"it sent more than {settings.CHAT_MCP_MAX_BYTES:,} bytes"
    group = getattr(exc, "exceptions", None)
    if isinstance(group, tuple) and group:  # the SDK's task groups wrap what went wrong
        return reason(group[0], budget)
    if isinstance(exc, httpx.HTTPStatusError):
        return f"it answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx.ConnectError):
        return "it could not be reached (connection refused or no such host)"
    if isinstance(exc, httpx.TimeoutException):
        return "it did not answer in time"
    if isinstance(exc, httpx.HTTPError):
        return f"the connection failed ({type(exc).__name__})"
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    text = str(exc).strip() or type(exc).__name__
    return text[:200]
