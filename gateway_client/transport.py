"""The HTTP transport under every `GatewayClient`: httpx's API on aiohttp's C HTTP parser.

Reading the upstream is the steady-state cost of a server streaming many answers: at 50
concurrent streams httpcore, h11 and anyio (a timeout scope and an epoll register/unregister per
read) took about a third of the app server's CPU. `httpx-aiohttp` keeps httpx as the client API
and parses with aiohttp; measured end to end (issue 8, `python -m benchmarks load`), the server's
CPU at 50 streams fell from 76-81 % to 59-60 % of a core and the p99 gap between deltas from
434-564 ms to 314-336 ms.

Three things differ from the stock `AiohttpTransport`:
- no connection cap: one client serves a whole server process, and a stream holds its
  connection for minutes (aiohttp's default is 100, past which a request waits unbounded);
- the failure names: the package maps every `aiohttp.ClientConnectionError` it does not know to
  `httpx.ConnectTimeout`, so a gateway that drops the connection before answering would read as
  "could not connect within 10 s". Here only a connect that timed out is a `ConnectTimeout`; a
  refused or unresolvable connect is a `ConnectError`, anything later a `ReadError`;
- a kept-alive connection the server closed while idle: reused just as the server's FIN was on
  its way (under load the loop reads it late), the request fails with `ServerDisconnectedError`
  before any byte of a response. That request is sent once more, on a new connection, as browsers
  do: nothing of an answer was received, so nothing is duplicated (seen once in 200 streams at
  the load benchmark's burst, after the warm-up's connection idled past the emulator's 5 s
  keep-alive). The resend is drawn from the request's `RetryBudget` (its answer's, which the
  client's own retries share: `retries`), so a server that hangs up on every request is asked
  twice in all. Idle connections are also dropped after 4 s, under the usual servers' 5 s.
"""

from __future__ import annotations

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from .retries import EXTENSION, RetryBudget

__all__ = ["GatewayTransport"]

KEEPALIVE = 4.0  # seconds an idle connection is kept: under uvicorn's and Node's 5 s


class GatewayTransport(AiohttpTransport):
    def __init__(self) -> None:
        super().__init__(limits=httpx.Limits(max_connections=None, keepalive_expiry=KEEPALIVE))
        # A callable, called on the first request: an aiohttp session must be made on the loop
        # that uses it.
        self.client = self._new_session

    def _new_session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=KEEPALIVE, ssl=self.ssl_context)
        return aiohttp.ClientSession(connector=connector)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        budget = request.extensions.get(EXTENSION)
        if not isinstance(budget, RetryBudget):
            budget = RetryBudget()  # a request of no answer's: a budget of its own
        while True:
            try:
                return await super().handle_async_request(request)
            except httpx.ConnectTimeout as exc:
                cause = exc.__cause__
                if cause is None or isinstance(cause, TimeoutError | aiohttp.ServerTimeoutError):
                    raise
                if isinstance(cause, aiohttp.ClientConnectorError):
                    raise httpx.ConnectError(str(cause), request=request) from cause
                if isinstance(cause, aiohttp.ServerDisconnectedError) and budget.spend():
                    continue  # a stale kept-alive connection (see above): once more
                reason = str(cause) or type(cause).__name__
                raise httpx.ReadError(reason, request=request) from cause
