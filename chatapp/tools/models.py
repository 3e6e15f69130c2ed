"""An admin's switch for a tool (`ToolSwitch`), and an MCP server an admin connected
(`McpServer`): where it is, what it is sent, who may use its tools, and the tools it last listed
(`mcp.catalog.refresh`), kept on its row so a page or a request never asks the server itself.
Registered by `chatapp.models` (app label `chatapp`)."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.core.validators import RegexValidator
from django.db import models


class ToolSwitch(models.Model):
    """An admin's switch for one tool (`chatapp/tools`), for every user: a tool without a row is
    on."""

    name = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "tool switches"

    def __str__(self) -> str:
        return f"{self.name} ({'on' if self.enabled else 'off'})"


class McpServer(models.Model):
    """A Model Context Protocol server whose tools the model may call (`chatapp/tools/mcp`).

    `headers_encrypted` is its request headers (a bearer token among them), as JSON encrypted
    with `key_vault`: written in the admin, never rendered back, sent to a browser or logged.
    `groups` empty: everyone may use its tools. `tools` is what its last `tools/list` answered
    (bounded and checked, `catalog.listed`); `problem` why it is unavailable ("" when it is not).
    """

    class Transport(models.TextChoices):
        STREAMABLE_HTTP = "streamable_http", "Streamable HTTP"
        SSE = "sse", "SSE (the older transport)"

    name = models.CharField(max_length=100, unique=True)
    prefix = models.CharField(
        max_length=24,
        unique=True,
        validators=[
            RegexValidator(
                r"^[a-z][a-z0-9_]{0,23}$",
                "Lower-case letters, digits and _, starting with a letter (at most 24).",
            )
        ],
        help_text="What the model sees before each of its tools' names: prefix__tool "
        "(e.g. deepwiki__ask_question).",
    )
    url = models.URLField(
        "URL", max_length=500, help_text="Its MCP endpoint, e.g. https://mcp.deepwiki.com/mcp"
    )
    transport = models.CharField(
        max_length=20, choices=Transport.choices, default=Transport.STREAMABLE_HTTP
    )
    enabled = models.BooleanField(default=True)
    headers_encrypted = models.TextField(blank=True, editable=False)
    groups = models.ManyToManyField(
        Group,
        blank=True,
        related_name="mcp_servers",
        help_text="Who may use its tools; none chosen: everyone.",
    )
    tools = models.JSONField(default=list, blank=True, editable=False)
    problem = models.CharField(max_length=300, blank=True, editable=False)
    checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "chatapp"
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name
