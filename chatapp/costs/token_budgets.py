"""Token budgets: the completion tokens (`max_tokens`) an answer may ask for.

An answer that ran out of its token budget is continued as a retry with a larger one: the Osmexo
docs say to raise the budget and retry when thinking used it all, with 4,096 "a safe default" for a
reasoning model. So `larger_budget` asks for twice what the answer used, at least 4,096. Turns ask
for it (`conversations/turns.py`) and the page offers it (`conversations/presentation.py`); the
spending limits reserve the same safe default for an answer that sets no budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatapp.costs.models import Generation

__all__ = ["MAX_BUDGET", "SAFE_BUDGET", "larger_budget"]

SAFE_BUDGET = 4_096  # Osmexo's "safe default" max_tokens for a reasoning model
MAX_BUDGET = 32_768


def larger_budget(generation: Generation) -> int | None:
    """The `max_tokens` for another try at an answer that ran out of its budget: twice what it
    used (its budget, else its completion tokens, reasoning included), at least `SAFE_BUDGET`, at
    most `MAX_BUDGET`; None when that would be no larger."""
    used = generation.max_tokens or generation.completion_tokens
    budget = min(MAX_BUDGET, max(SAFE_BUDGET, 2 * (used or 0)))
    return budget if used is None or budget > used else None
