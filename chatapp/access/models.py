"""What a group's members may use (`GroupPolicy`). Registered by `chatapp.models` (app label
`chatapp`)."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import models


class GroupPolicy(models.Model):
    """What the members of one group (`auth.Group`: made in the admin, or from a sign-in
    provider's claim) may use: the models and the tools whose names match one of its patterns
    (`access.group_policies` says how patterns match and how several groups combine). A user in
    no group with a policy may use everything; the group's money budgets are `SpendingLimit`s
    with `group` set."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="chat_policy")
    model_patterns = models.TextField(
        "models",
        blank=True,
        default="*",
        help_text="One pattern a line, matched against the model's ID and against "
        '"gateway name:model ID": openai/* (those models on any gateway), Numes:* (all of one '
        "gateway), *gpt-4o*. * and ? are wildcards. Empty: no model.",
    )
    tool_patterns = models.TextField(
        "tools",
        blank=True,
        default="*",
        help_text="One tool name or pattern a line (the names the tool switches list; * for "
        "all). Empty: no tool.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["group__name"]
        verbose_name = "group policy"
        verbose_name_plural = "group policies"

    def __str__(self) -> str:
        return f"Policy of {self.group}"
