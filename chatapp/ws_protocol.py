"""The messages that travel between workers, consumers and browsers.

Browser-bound payloads are encoded once by the sender and carried as text in a channel-layer
message of type `chat.forward`, so a consumer forwards them without decoding or re-encoding
(it is thin on purpose). Payload keys are short because deltas are frequent:

- `{"t": "delta", "g": id, "seq": n, "content"?, "reasoning"?, "tool_calls"?, "annotations"?,
  "attachments"?}`: what arrived since delta `n - 1`. `attachments` names kinds only (`image`,
  `file`, `audio`); the media themselves come with the final render.
- `{"t": "snapshot", "g": id, "seq": n, "content", "reasoning", "tool_calls", ...}`: everything
  up to and including delta `n`.
- `{"t": "done", "g": id, "seq": n, "status"}`: terminal; the browser fetches the final render.
- `{"t": "updated", "g": id}`: the record changed (cost reconciled); refetch the render.

Worker-bound messages (on the generation's own channel): `generation.cancel`, and
`generation.snapshot` with `reply_to` (a consumer's channel name).
"""

from __future__ import annotations

from typing import Any

import orjson

FORWARD = "chat.forward"
CANCEL = "generation.cancel"
SNAPSHOT_REQUEST = "generation.snapshot"


def group_name(conversation_id: int) -> str:
    return f"conversation.{conversation_id}"


def group_message(payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": FORWARD, "text": orjson.dumps(payload).decode()}


def delta(generation_pk: int, fields: dict[str, Any]) -> dict[str, Any]:
    return {"t": "delta", "g": generation_pk, **fields}


def snapshot(generation_pk: int, fields: dict[str, Any]) -> dict[str, Any]:
    return {"t": "snapshot", "g": generation_pk, **fields}


def done(generation_pk: int, seq: int, status: str) -> dict[str, Any]:
    return {"t": "done", "g": generation_pk, "seq": seq, "status": status}


def updated(generation_pk: int) -> dict[str, Any]:
    return {"t": "updated", "g": generation_pk}


def cancel() -> dict[str, Any]:
    return {"type": CANCEL}


def snapshot_request(reply_to: str) -> dict[str, Any]:
    return {"type": SNAPSHOT_REQUEST, "reply_to": reply_to}


def timeout_message(phase: str, detail: str) -> str:
    match phase:
        case "first_token":
            return f"The gateway did not start answering in time ({detail})."
        case "idle":
            return f"The answer stalled: the gateway went quiet ({detail})."
        case "total":
            return f"The answer took longer than the time allowed ({detail})."
        case _:
            return f"Could not reach the gateway in time ({detail})."
