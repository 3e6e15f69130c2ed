"""Model prices per token, in the gateway's cost unit: what a cost estimate multiplies by.

A price comes from the gateway where it serves one (Numes, Nodul and OpenRouter list `pricing`
in `/models`; LiteLLM serves each route's prices at `/model/info`, which the client folds into the
same list: `GatewayClient.list_models`), refreshed whenever the list is fetched, or from a row an
admin entered; an admin's row is never overwritten by a listing. Either way it is marked
`gateway` or `admin`, and an estimate says which (`costs.costing.estimate_or_explain`). Prices
are what a gateway lists, kept beside its rows; `costs` multiplies by them.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async

from chatapp.gateways.models import ModelPrice

if TYPE_CHECKING:
    from chatapp.gateways.configs import GatewayConfig
    from gateway_client import ModelInfo


def _decimal(text: str | None) -> Decimal | None:
    if text is None:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() and value >= 0 else None


def _remember(gateway_pk: int, models: list[ModelInfo]) -> None:
    admin_set = set(
        ModelPrice.objects.filter(
            gateway_id=gateway_pk, source=ModelPrice.Source.ADMIN
        ).values_list("model", flat=True)
    )
    for info in models:
        prompt, completion = _decimal(info.prompt_price), _decimal(info.completion_price)
        if prompt is None or completion is None or info.id in admin_set:
            continue
        ModelPrice.objects.update_or_create(
            gateway_id=gateway_pk,
            model=info.id,
            defaults={
                "prompt": prompt,
                "completion": completion,
                "source": ModelPrice.Source.GATEWAY,
            },
        )


async def remember_listed(config: GatewayConfig, models: list[ModelInfo]) -> None:
    """Keep the prices a model list gave (`/models`, with LiteLLM's `/model/info`; it is fetched
    at most once a minute)."""
    if any(info.prompt_price is not None for info in models):
        await sync_to_async(_remember)(config.pk, models)


def price_for(gateway_pk: int | None, model: str) -> ModelPrice | None:
    """`model`'s price, or its base model's when the ID carries options after `?` (the
    emulator's `emulator/long?tokens_per_second=200` is priced as `emulator/long`)."""
    if gateway_pk is None:
        return None
    base = model.partition("?")[0]
    prices = {
        price.model: price
        for price in ModelPrice.objects.filter(gateway_id=gateway_pk, model__in={model, base})
    }
    return prices.get(model) or prices.get(base)
