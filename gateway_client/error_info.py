"""`ErrorInfo`: an error as plain data, the one shape it keeps from the client to the database.

It sits below everything that carries one (events, `Completion`, the exception hierarchy in
`errors`, which re-exports it), so that none of them has to import another to name it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ErrorInfo"]


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """An error as the gateway (or the client, for transport failures) described it.

    `code` keeps its JSON type: Numes and Nodul send ints, Osmexo and tiny-3b strings.
    """

    status: int | None
    code: int | str | None
    type: str | None
    message: str
    request_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "code": self.code,
            "type": self.type,
            "message": self.message,
        }
