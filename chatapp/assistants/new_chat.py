"""How a new chat was started, beyond its settings: with which assistant, and whether it is
temporary. `turns.create_turn` and `comparison.create_comparison` write it on the conversation
they make; a conversation's later turns do not change it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils import timezone


@dataclass(frozen=True, slots=True)
class StartedWith:
    """The assistant chosen (None: none) and its name then, and whether the chat is temporary
    (`conversations/temporary.py`)."""

    assistant_pk: int | None = None
    assistant_name: str = ""
    temporary: bool = False

    def row_values(self) -> dict[str, Any]:
        """As the field values of a new `Conversation`. A temporary one counts as left until a
        page's socket watches it, so that one whose tab closed before that is swept too."""
        return {
            "assistant_id": self.assistant_pk,
            "assistant_name": self.assistant_name,
            "temporary": self.temporary,
            "left_at": timezone.now() if self.temporary else None,
        }
