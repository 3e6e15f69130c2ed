"""What a generation is asked to do, and how it ended: the values the worker hands persistence.

A turn makes a `Job` (`turns.py`), the tool loop makes the next round's and reads a `JobEnd`, and
the worker runs it (`chatapp.streaming`): so they live here, below both, as plain values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chatapp.conversations.request_options import RequestOptions
from chatapp.costs.models import Generation
from chatapp.costs.spending_limits import SpendWatch
from chatapp.gateways.configs import GatewayConfig
from gateway_client.accumulator import Completion
from gateway_client.errors import ErrorInfo

Status = Generation.Status


@dataclass(frozen=True, slots=True)
class Job:
    """One upstream request to run. `generation_pk` is our database key, never the gateway's
    generation ID (that arrives with the stream, as `Completion.generation_id`)."""

    generation_pk: int
    message_pk: int
    conversation_pk: int
    gateway: GatewayConfig
    model: str
    messages: list[dict[str, Any]]
    owner_channel: str
    max_tokens: int | None = None
    """This generation's own output budget (a "Continue with a larger budget"), over the
    options'; None: the options' budget, else the gateway's."""
    options: RequestOptions | None = None
    """The conversation's answer settings (system prompt, temperature, ...); None: none."""
    kind: Generation.Kind = Generation.Kind.CHAT
    """What the request is: a chat completion, or an image generation (`POST /images`) whose
    prompt is the last user message of `messages`."""
    tools: tuple[dict[str, Any], ...] = ()
    """The `tools` sent upstream (their upstream schema), resolved when the turn was made."""
    tool_round: int = 1
    """Which round of its turn this generation is (`Generation.tool_round`)."""
    image_count: int = 1
    """How many images an image generation asks for (`n`); unused by the other kinds."""
    user_pk: int = 0
    """Whose turn it is: tools read this user's data only."""
    spend: SpendWatch | None = None
    """The spending limits a chat answer must keep within as it streams (`spending_limits`);
    None: none applies, or it could not be priced."""
    sources: tuple[dict[str, Any], ...] = ()
    """The citations of the passages quoted in `messages` (`knowledge_context.citations`), [1]
    first; retrieved once, before the request."""


@dataclass(frozen=True, slots=True)
class JobEnd:
    """How a job ended, as the worker judged it: a terminal `status` (from the stream's
    `Completion.outcome`, a stop or a spending limit), the gateway's `error` for the failure
    states, and the `completion` folded from everything that arrived (None if nothing did)."""

    status: Status
    error: ErrorInfo | None = None
    retry_after: float | None = None
    completion: Completion | None = None
