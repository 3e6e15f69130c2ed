"""What one request reads once: a memo that lives as long as the request.

A page asks several parts for the same facts (the user's group policy for the picker, for the
tools, for the Settings' tools; the tools they may choose, twice): each asked the database again.
`remember(key, compute)` computes a fact once per request and hands the same value to every later
caller. The middleware `chatapp.middleware.RequestMemo` opens the memo around each request; its
context variable holds a dict that the view's `sync_to_async` threads share (they run in a copy
of the context, which holds the same dict). Outside a request (a consumer, the worker, a test
calling a function directly) nothing is remembered and every call computes, as before.

Only facts that a request cannot change for itself belong here (what an admin set).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from contextvars import ContextVar, Token
from typing import Any

__all__ = ["begin", "end", "remember"]

_memo: ContextVar[dict[Hashable, Any] | None] = ContextVar("chatapp_request_memo", default=None)


def begin() -> Token[dict[Hashable, Any] | None]:
    """A fresh memo for the request starting in this context."""
    return _memo.set({})


def end(token: Token[dict[Hashable, Any] | None]) -> None:
    _memo.reset(token)


def remember[T](key: Hashable, compute: Callable[[], T]) -> T:
    """`compute()`, once per request for `key` (every call outside a request)."""
    memo = _memo.get()
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    value: T = memo[key]
    return value
