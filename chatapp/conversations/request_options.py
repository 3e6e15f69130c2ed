"""What a conversation asks of its answers (`AnswerSettings`), as one value, and how each gateway
is sent it.

`RequestOptions` is made from an `AnswerSettings` row, a conversation or a user's `ChatDefaults`
(`options_for`), travels in the worker's `Job`, and becomes `GatewayClient.stream_chat`'s keywords
in `stream_arguments`. A new conversation copies the user's defaults (`defaults_for`), or the
settings chosen beside its first message (`row_values`); afterwards it keeps its own settings.

The four gateways speak the OpenAI request body (Osmexo: "any SSE-capable OpenAI client works
unchanged"; tiny-3b: "Any OpenAI client reads it without modification"; Numes and Nodul are used
through the OpenAI SDKs in their docs), so every dialect, and a gateway of unknown dialect, gets
the system prompt as a leading `{"role": "system"}` message, `temperature` and `max_tokens`. Only
Numes documents a reasoning control among the four, the `reasoning` object (`reasoning: {"exclude":
true}`, and "Reasoning covers the controls"), so Numes is sent `reasoning: {"effort": ...}`, as
OpenRouter is; LiteLLM, vLLM and Ollama take OpenAI's `reasoning_effort`. Osmexo and Nodul only
describe the reasoning they stream back, tiny-3b streams none, and llama.cpp documents none.
Which dialect takes an effort, and which takes tools, is the dialect table's
(`gateway_client.dialects.DIALECTS`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from chatapp import shared_cache, tools
from chatapp.assistants.models import AnswerSettings, ChatDefaults
from chatapp.gateways import configs
from gateway_client.dialects import DIALECTS, facts_for, guess_dialect, titles

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = [
    "EFFORT_SENT_TO",
    "FIELDS",
    "RequestOptions",
    "default_options",
    "defaults_for",
    "dialect_of",
    "options_for",
    "row_values",
    "stream_arguments",
    "summary",
    "upstream_tools",
]

Effort = AnswerSettings.ReasoningEffort

EFFORT_SENT_TO = titles(facts for facts in DIALECTS.values() if facts.effort_field)
"""The gateways a reasoning effort is sent to, in words ("Numes")."""


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """A conversation's answer settings; empty values leave each one to the gateway. The field
    names are `AnswerSettings`'s, so a row's values make one and one's values fill a row."""

    system_prompt: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str = ""
    tools: tuple[str, ...] = ()
    """The names of the tools the model is offered (`chatapp/tools`), as chosen: those an admin
    turned off are dropped when the request is made."""

    @property
    def is_default(self) -> bool:
        return self == RequestOptions()


FIELDS = tuple(field.name for field in fields(RequestOptions))
"""The `AnswerSettings` fields, in the order forms and summaries show them."""


def options_for(settings_row: AnswerSettings) -> RequestOptions:
    """The options of a conversation or of a user's defaults."""
    values = {name: getattr(settings_row, name) for name in FIELDS}
    values["tools"] = tuple(name for name in values["tools"] or () if isinstance(name, str))
    return RequestOptions(**values)


def chat_defaults(user: User) -> ChatDefaults | None:
    """`user`'s `ChatDefaults` (None: they set none), kept until they change them
    (`shared_cache`): not to be changed. Database work: call off the event loop."""
    return shared_cache.cached(
        ("chat_defaults", user.pk), lambda: ChatDefaults.objects.filter(user=user).first()
    )


def default_options(user: User) -> RequestOptions:
    """The options a new conversation of `user` starts with: their `ChatDefaults`, or the
    gateway's defaults when they set none. Database work: call off the event loop."""
    row = chat_defaults(user)
    return options_for(row) if row is not None else RequestOptions()


def row_values(options: RequestOptions) -> dict[str, Any]:
    """`options` as the field values of an `AnswerSettings` row."""
    values = {name: getattr(options, name) for name in FIELDS}
    values["tools"] = list(options.tools)  # a JSON list on the row
    return values


def defaults_for(user: User) -> dict[str, Any]:
    """`default_options` as the field values of a new conversation's row."""
    return row_values(default_options(user))


def _effort_field(dialect: str | None) -> str | None:
    """The request field an effort goes in on a gateway of `dialect`; None: not sent (also to a
    gateway of unknown dialect, as the field is not one every gateway takes)."""
    facts = facts_for(dialect)
    return facts.effort_field if facts is not None else None


def _takes_tools(dialect: str | None) -> bool:
    """Whether a gateway of `dialect` is offered tools: when the table says its docs describe tool
    calls, and when its dialect is unknown, since every OpenAI-compatible gateway takes `tools`."""
    facts = facts_for(dialect)
    return facts is None or facts.tools


def stream_arguments(
    options: RequestOptions | None,
    dialect: str | None,
    messages: list[dict[str, Any]],
    max_tokens: int | None = None,
    tools: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """`GatewayClient.stream_chat`'s keywords (all but `model`) for `messages` under `options` on
    a gateway of `dialect` (None or "": unknown, so only what every gateway takes). `max_tokens`,
    a generation's own budget (a "Continue with a larger budget"), overrides the options';
    `tools` are the `upstream_tools` resolved when the turn was made."""
    options = options or RequestOptions()
    if options.system_prompt:
        messages = [{"role": "system", "content": options.system_prompt}, *messages]
    arguments: dict[str, Any] = {
        "messages": messages,
        "max_tokens": max_tokens if max_tokens is not None else options.max_tokens,
    }
    if options.temperature is not None:
        arguments["temperature"] = options.temperature
    effort_field = _effort_field(dialect)
    if options.reasoning_effort and effort_field is not None:
        field, _, member = effort_field.partition(".")  # `reasoning.effort`: an object's member
        effort = options.reasoning_effort
        arguments[field] = {member: effort} if member else effort
    if tools:
        arguments["tools"] = list(tools)
    return arguments


def upstream_tools(
    options: RequestOptions, dialect: str, user_pk: int | None
) -> tuple[dict[str, Any], ...]:
    """The `tools` a request of user `user_pk` under `options` offers on a gateway of `dialect`:
    the tools chosen that an admin has not turned off and the user's groups allow (and, of an MCP
    server, that the user may use and that can be called now), in the gateways' schema. Database
    work."""
    if not options.tools or not _takes_tools(dialect):
        return ()
    return tuple(tools.upstream_tools(tools.offered(options.tools, user_pk)))


def dialect_of(gateway_pk: int | None) -> str:
    """The dialect requests to gateway `gateway_pk` are sent in, as its client decides it (set on
    the gateway, else guessed from its URL); "" when unknown. Database work, cached briefly."""
    config = configs.configs()[0].get(gateway_pk) if gateway_pk is not None else None
    if config is None:
        return ""
    return config.dialect or guess_dialect(config.base_url) or ""


def summary(options: RequestOptions, dialect: str | None, user_pk: int | None) -> str:
    """What applies, in one short line: "System prompt · temperature 0.7 · max 2,048 tokens ·
    effort high · tools: calculator, date and time", or "Gateway defaults". On a gateway of
    `dialect` ("": unknown) an effort or tools it is not sent say so; None: no gateway in
    particular (a user's defaults). Tools an admin turned off, or `user_pk`'s groups do not allow,
    are left out: reads the database."""
    parts = []
    if options.system_prompt:
        parts.append("System prompt")
    if options.temperature is not None:
        parts.append(f"temperature {options.temperature:g}")
    if options.max_tokens is not None:
        parts.append(f"max {options.max_tokens:,} tokens")
    if options.reasoning_effort:
        effort = f"effort {Effort(options.reasoning_effort).label}"
        if dialect is not None and _effort_field(dialect) is None:
            facts = facts_for(dialect)
            taker = "an unknown gateway" if facts is None else facts.title
            effort += f" (not sent: {taker} takes none)"
        parts.append(effort)
    if options.tools and (offered := tools.offered(options.tools, user_pk)):
        listed = "tools: " + ", ".join(tool.title.lower() for tool in offered)
        facts = facts_for(dialect)
        if facts is not None and not facts.tools:
            listed += f" (not sent: {facts.title} takes none)"
        parts.append(listed)
    return " · ".join(parts) or "Gateway defaults"
