"""What changing a gateway's embedding model costs, said before it is done, and starting it.

Vectors of two models cannot be compared, so a new embedding model means every document
embedded with the gateway's old one is embedded again. The admin is told first what that will
cost: the chunks' token counts (`Chunk.token_count`, as they were read) at the new model's
prompt price in the gateway's unit (`pricing`: listed by the gateway or set by an admin); with
no price known, the tokens alone and that the cost is known only once the gateway reports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Sum
from django.template.defaultfilters import pluralize

from chatapp.gateways import pricing
from chatapp.gateways.units import CostUnit, Money
from chatapp.knowledge.files import reembed
from chatapp.knowledge.models import Chunk, KnowledgeFile

__all__ = ["ReembeddingEstimate", "documents", "estimate", "start_reembedding"]


def documents(count: int) -> str:
    """A count of documents in words: 1 document, 7 documents."""
    return f"{count:,} document{pluralize(count)}"


@dataclass(frozen=True, slots=True)
class ReembeddingEstimate:
    files: int
    chunks: int
    tokens: int
    model: str
    cost: Money | None
    """None: no price is known for `model` on the gateway."""

    def __str__(self) -> str:
        if not self.files:
            return f"No document was embedded through this gateway: {self.model} costs nothing yet."
        what = (
            f"Changing the embedding model to {self.model} embeds {documents(self.files)} again "
            f"({self.chunks:,} passage{pluralize(self.chunks)}, {self.tokens:,} tokens)"
        )
        if self.cost is None:
            return (
                f"{what}. No price is known for {self.model} here, so what it costs is known "
                "only once the gateway reports it (set one under Model prices to see it first)."
            )
        return f"{what}: about {self.cost.rounded()} at {self.model}'s price."


def _embedded_with(gateway_pk: int) -> list[int]:
    """The files whose vectors were made through the gateway (whatever their state now)."""
    return list(
        KnowledgeFile.objects.filter(embedding_gateway_id=gateway_pk)
        .exclude(embedding_model="")
        .values_list("pk", flat=True)
    )


def estimate(gateway_pk: int, cost_unit: str, model: str) -> ReembeddingEstimate:
    """What embedding the gateway's documents again with `model` would cost."""
    files = _embedded_with(gateway_pk)
    counted = Chunk.objects.filter(file_id__in=files).aggregate(
        chunks=Count("pk"), tokens=Sum("token_count")
    )
    tokens = int(counted["tokens"] or 0)
    price = pricing.price_for(gateway_pk, model)
    cost = None
    if price is not None:
        unit = CostUnit(cost_unit) if cost_unit in CostUnit.values else CostUnit.CREDITS
        cost = Money(Decimal(tokens) * price.prompt, unit)
    return ReembeddingEstimate(len(files), int(counted["chunks"] or 0), tokens, model, cost)


def start_reembedding(gateway_pk: int) -> list[int]:
    """Queue every document embedded through the gateway to be embedded again (with the model
    its row now names); the pks queued. Its chunks stay: only their vectors are made again."""
    files = _embedded_with(gateway_pk)
    reembed(files)
    return files
