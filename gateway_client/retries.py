"""`RetryBudget`: how often, and how long, one answer's request may still be sent again.

An answer makes one budget and hands it to every layer that could send its request again: the
transport (a kept-alive connection the server had closed, `transport`) and the client (a status
the gateway advises retrying, `GatewayClient.open`). The layers' retries add up instead of
multiplying: one resend in all, and at most 5 s of waiting for it, so that an error reaches the
user at once after the gateway's final answer. A request of no answer's (a lookup) gets a budget
of its own.

Whether a refused request is worth sending again is `retry_wait`'s rule, from the gateways' own
advice, and only ever before any output (a stream that has begun is never sent again):
- 429 or 503 with a `Retry-After`: after that wait, if the budget has that much left; a longer
  one is final at once, and the error carries it for the user;
- 503 without `Retry-After`: after 1 s, unless the gateway retries failed calls itself
  (`DialectFacts.retries_itself`, LiteLLM): its 5xx without `Retry-After` came after its retries.
  LiteLLM 1.108.7's 503 after its retries (`tests/fixtures/gateways/litellm/`) says nothing of
  them, but its `x-litellm-call-id` names the gateway; its `llm_provider-retry-after` is the
  provider's header relayed, not advice of LiteLLM's, and is not read;
- any error from a gateway that says it retried already (a header counting its attempted retries
  or fallbacks above 0, as LiteLLM's `x-litellm-attempted-retries` on a 200) is final: a retry of
  ours would repeat all of its retries (LiteLLM's two, then our one, then its two again: six
  upstream calls, 11.6 s).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from .dialects import facts_for
from .errors import StatusError

__all__ = ["EXTENSION", "RetryBudget", "retried_already", "retry_wait"]

EXTENSION = "gateway_client.retry_budget"
"""The httpx request extension that carries a request's budget down to the transport."""

UNAVAILABLE_WAIT = 1.0  # seconds before resending a 503 that gave no `Retry-After`


@dataclass(slots=True)
class RetryBudget:
    """What one answer may still spend on sending its request again, shared by every layer."""

    resends: int = 1
    """Times the request may still be sent again, in all."""
    wait: float = 5.0
    """Seconds that may still be waited before resends, in all."""

    def spend(self, wait: float = 0.0) -> bool:
        """Take one resend after `wait` seconds if the budget has both; whether it did."""
        if self.resends < 1 or wait > self.wait:
            return False
        self.resends -= 1
        self.wait -= wait
        return True


def retry_wait(error: StatusError, headers: httpx.Headers, dialect: str | None) -> float | None:
    """Seconds to wait before sending a refused request again, or None: the error is final.

    `headers` are the error response's, `dialect` the gateway's as far as it is known."""
    if retried_already(headers):
        return None
    if error.status in (429, 503) and error.retry_after is not None:
        return error.retry_after
    if error.status == 503:
        facts = facts_for(dialect)
        return None if facts is not None and facts.retries_itself else UNAVAILABLE_WAIT
    return None


def retried_already(headers: httpx.Headers) -> bool:
    """Whether the response says the gateway retried the request itself before answering, or
    sent it on to a fallback."""
    for name, value in headers.items():
        if name.lower().endswith(("attempted-retries", "attempted-fallbacks")):
            try:
                if int(value.strip()) > 0:
                    return True
            except ValueError:
                continue
    return False
