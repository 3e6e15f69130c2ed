"""Collections, their files and the chunks a file is read into. Registered with
`chatapp.models` (imported there), in the `chatapp` app.

A file's bytes are kept with it so that it can be read again (re-indexing, a new embedding
model, a worker that died mid-file) without asking the user for it. Vectors and the full-text
index live in the store (`stores/`), keyed by chunk, file and collection; deleting a file deletes
its chunks here and its vectors there (`files.remove_file`). No ledger row points here in a way
that a delete could take with it: embedding generations outlive the files they embedded.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from chatapp.access.shared_or_own import SharedOrOwn


class Collection(SharedOrOwn):
    """A named set of documents answers can draw on: a user's own, or one an admin shares with
    everyone or with groups, as assistants are (`access/shared_or_own.py`)."""

    name = models.CharField(max_length=100)
    description = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class KnowledgeFile(models.Model):
    """One document in a collection and how far its indexing got.

    `state` moves queued → reading → embedding → ready, or to failed with `error` saying why in
    words a user can act on. `done`/`total` count a PDF's pages read while it is read, then
    chunks embedded of chunks read (0/0 before the file is read). `embedding_model` and
    `embedding_gateway` are what its vectors were made with: a question is embedded with the
    same, or its vectors could not be compared.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        READING = "reading", "reading"
        EMBEDDING = "embedding", "embedding"
        READY = "ready", "ready"
        FAILED = "failed", "failed"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="files")
    # Who added it: the user whose spend its embedding calls are (None once they are deleted).
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    name = models.CharField(max_length=255)
    content_type = models.CharField(max_length=100)
    size = models.PositiveIntegerField(help_text="Bytes, as uploaded.")
    sha256 = models.CharField(max_length=64)
    data = models.BinaryField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    # A PDF's pages (None: not a PDF, or not read yet).
    pages = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    embedding_gateway = models.ForeignKey(
        "chatapp.Gateway",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["collection", "name", "id"]
        indexes = [models.Index(fields=["state"], name="knowledge_file_state")]

    def __str__(self) -> str:
        return self.name

    @property
    def busy(self) -> bool:
        """Whether its state will still change without anyone asking."""
        return self.state in {self.State.QUEUED, self.State.READING, self.State.EMBEDDING}


class Chunk(models.Model):
    """A passage of a file, the unit that is embedded, searched and cited: its text, where it
    stands in the file (`ordinal`, and the page or the heading it falls under) and its size in
    tokens (estimated, `chunking.py`), which the context's token budget counts."""

    file = models.ForeignKey(KnowledgeFile, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    page = models.PositiveIntegerField(null=True, blank=True)
    heading = models.CharField(max_length=300, blank=True)
    token_count = models.PositiveIntegerField()

    class Meta:
        ordering = ["file", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["file", "ordinal"], name="one_chunk_per_place")
        ]

    def __str__(self) -> str:
        return f"{self.file_id}#{self.ordinal}"
