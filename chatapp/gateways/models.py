"""The gateways' rows: a configured OpenAI-compatible endpoint (`Gateway`) and the prices of its
models (`ModelPrice`), in the gateway's cost unit. Registered by `chatapp.models` (app label
`chatapp`)."""

from __future__ import annotations

from django.db import models

from chatapp.gateways.units import CostUnit
from gateway_client.dialects import DIALECTS


class Gateway(models.Model):
    """One OpenAI-compatible gateway a user can chat through.

    The API key is stored encrypted (`key_vault`), or named as an environment variable; it is
    never rendered back in a form, sent to a browser or logged. `emulated` is the built-in
    emulator, whose URL is only known once it runs: its `base_url` is a path under it.
    """

    # django-stubs types only the class syntax, not the functional one that builds from a table.
    Dialect: type[models.TextChoices] = models.TextChoices(  # type: ignore[call-overload]
        "Dialect",
        [("AUTO", ("", "auto-detect"))]
        + [(name.upper(), (name, facts.title)) for name, facts in DIALECTS.items()],
    )
    """Blank for auto-detect, then each dialect of `gateway_client.dialects.DIALECTS`."""

    name = models.CharField(max_length=100, unique=True)
    base_url = models.CharField(
        "base URL", max_length=500, help_text="e.g. https://api.numes.ai/api/v1"
    )
    dialect = models.CharField(
        max_length=16,
        choices=Dialect.choices,
        blank=True,
        help_text="Blank: detected from what the gateway sends (shown below once it is asked).",
    )
    detected_dialect = models.CharField(
        max_length=16, choices=Dialect.choices, blank=True, editable=False
    )
    """What `gateway_client.detection` found when `dialect` is blank; used in its place."""
    detection_note = models.CharField(max_length=300, blank=True, editable=False)
    """How it was found, or why nothing was ("" while it has not been asked)."""
    cost_unit = models.CharField(
        max_length=16,
        choices=CostUnit.choices,
        help_text="What the gateway's usage.cost counts in for this key (Numes: USD credits, "
        "or satoshis for a BTC key). Osmexo's x_llm_cost_micro is always micro-USD.",
    )
    enabled = models.BooleanField(default=True)
    speech_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The model Read aloud asks for (POST /audio/speech, Numes only); empty: none.",
    )
    speech_voice = models.CharField(max_length=100, blank=True, help_text="Empty: the model's.")
    transcription_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The model voice input asks for (POST /audio/transcriptions, OpenAI's "
        "speech-to-text); empty: this gateway does not transcribe.",
    )
    title_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The model that writes a new conversation's title from its first exchange "
        "(a generation of its own in the ledger); empty: the conversation's own model.",
    )
    embedding_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The model knowledge collections are embedded with (POST /embeddings): their "
        "documents when added, each question asked of them. Changing it re-embeds every "
        "document embedded with the old one, at its price; empty: this gateway embeds nothing.",
    )
    emulated = models.BooleanField(default=False, editable=False)
    api_key_encrypted = models.TextField(blank=True, editable=False)
    api_key_env = models.CharField(
        "API key environment variable",
        max_length=100,
        blank=True,
        help_text="Read the key from this environment variable instead of storing it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ModelPrice(models.Model):
    """A model's price per token, in its gateway's cost unit: what estimates multiply by."""

    class Source(models.TextChoices):
        ADMIN = "admin", "set by an admin"
        GATEWAY = "gateway", "the gateway's price list"

    gateway = models.ForeignKey(Gateway, on_delete=models.CASCADE, related_name="prices")
    model = models.CharField(max_length=200)
    prompt = models.DecimalField("per prompt token", max_digits=24, decimal_places=15)
    completion = models.DecimalField("per completion token", max_digits=24, decimal_places=15)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.ADMIN)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["gateway", "model"]
        constraints = [
            models.UniqueConstraint(fields=["gateway", "model"], name="one_price_per_model")
        ]

    def __str__(self) -> str:
        return f"{self.model} @ {self.gateway}"
