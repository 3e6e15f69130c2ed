"""What a new chat starts from: a user's chat defaults (`ChatDefaults`), an assistant
(`Assistant`), and the saved prompts typed into its first message (`Prompt`); the answer settings
they share with a conversation (`AnswerSettings`, which a conversation copies when it starts).
Registered by `chatapp.models` (app label `chatapp`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from chatapp.access.shared_or_own import SharedOrOwn
from chatapp.gateways.models import Gateway


class AnswerSettings(models.Model):
    """What a conversation asks of its answers: a system prompt and the sampling parameters.
    Empty values leave them to the gateway (`request_options.py` says how each is sent)."""

    class ReasoningEffort(models.TextChoices):
        DEFAULT = "", "the model's default"
        NONE = "none", "none"
        LOW = "low", "low"
        MEDIUM = "medium", "medium"
        HIGH = "high", "high"

    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_effort = models.CharField(max_length=16, choices=ReasoningEffort.choices, blank=True)
    # Names of the tools the model may call (`chatapp/tools`); those an admin turned off are not
    # offered whatever this says.
    tools = models.JSONField(default=list, blank=True)

    class Meta:
        abstract = True


class ChatDefaults(AnswerSettings):
    """A user's settings for new conversations (each conversation then keeps its own copy)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_defaults"
    )

    class Meta:
        verbose_name_plural = "chat defaults"

    def __str__(self) -> str:
        return f"Defaults of {self.user}"


class Assistant(AnswerSettings, SharedOrOwn):
    """A way to start a chat (LibreChat's presets, Open WebUI's models): a name, a model and the
    answer settings a new conversation copies when it is chosen (its system prompt, sampling and
    tools), as a user's `ChatDefaults` are copied otherwise."""

    name = models.CharField(max_length=100)
    description = models.CharField(max_length=200, blank=True)
    # The model picked with it (None and "": whatever the picker shows); a gateway deleted
    # leaves the default one.
    gateway = models.ForeignKey(
        Gateway, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    model = models.CharField(max_length=200, blank=True)
    # What every answer in a chat started with it draws on, as if chosen with `#`: those of
    # them the user may use (`conversations/knowledge_choice.py`).
    collections = models.ManyToManyField(
        "chatapp.Collection",
        blank=True,
        related_name="+",
        help_text="Collections every answer in a chat started with it draws on.",
    )

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class Prompt(SharedOrOwn):
    """A saved prompt, inserted by typing `/name` in an empty message box; its `{{variables}}`
    are asked for first (`assistants/prompt_text.py`)."""

    name = models.SlugField(
        max_length=50, help_text="Typed as /name: letters, digits, - and _ (e.g. summarize)."
    )
    text = models.TextField(help_text="{{name}} marks a variable, asked for when it is inserted.")

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="one_prompt_name_per_owner"),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(owner__isnull=True),
                name="one_shared_prompt_name",
            ),
        ]

    def __str__(self) -> str:
        return f"/{self.name}"
