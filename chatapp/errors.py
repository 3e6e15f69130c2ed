"""The app's one exception hierarchy (the client library's is `gateway_client.errors`)."""

from __future__ import annotations


class ChatAppError(Exception):
    """Something the app refuses or cannot do, in words a user or operator can act on."""


class LedgerIsAppendOnly(ChatAppError):
    """A generation (the cost ledger) was to be deleted: only `manage.py fold_ledger` removes
    them, after folding them into daily totals."""

    def __init__(self) -> None:
        super().__init__(
            "Generations are the cost ledger and are never deleted; "
            "`manage.py fold_ledger --before DAY` folds old ones into daily totals."
        )
