"""The dialect of a gateway whose admin left it blank, asked of the gateway once and kept.

`gateway_client.detection` probes it (URL, headers, endpoints only one server answers); what it
finds is stored on the row (`detected_dialect`, `detection_note`, shown in the admin) and then used
as the gateway's dialect: its cost unit, request-ID header, effort field and prices follow. A
detected dialect also brings the dialect's cost unit, unless an operator chose one: a unit that is
still the one assumed before (credits, for an unknown gateway) is replaced, any other stands.
Asked at most once per `RETRY_AFTER` while the gateway cannot be reached, or tells nothing;
saving or deleting a gateway row makes it be asked again.
"""

from __future__ import annotations

import logging
import time

from asgiref.sync import sync_to_async
from django.conf import settings

from chatapp.gateways import configs
from chatapp.gateways.clients import shared_client
from chatapp.gateways.configs import GatewayConfig
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import default_unit
from gateway_client.detection import Detection, detect
from gateway_client.dialects import facts_for
from gateway_client.errors import GatewayError

logger = logging.getLogger(__name__)

RETRY_AFTER = 60.0

_asked: dict[tuple[int, str], float] = {}  # (gateway pk, base URL) -> when last asked


async def ensure_detected(config: GatewayConfig) -> bool:
    """Detect `config`'s dialect if it has none and it was not asked lately; True when a new
    dialect was stored (the caller's `config` is then stale: `configs` are reloaded)."""
    if config.dialect is not None or config.emulated:
        return False
    key = (config.pk, config.base_url)
    asked = _asked.get(key)
    if asked is not None and time.monotonic() - asked < RETRY_AFTER:
        return False
    _asked[key] = time.monotonic()
    try:
        found = await detect(shared_client(config))
    except GatewayError as exc:
        logger.info("Could not ask %s which gateway it is: %s", config.name, exc)
        return False
    logger.info(
        "Gateway %s detected as %s: %s", config.name, found.dialect or "unknown", found.evidence
    )
    stored = await sync_to_async(_store)(config, found)
    if stored:
        configs.forget_configs()
    return stored


def _store(config: GatewayConfig, found: Detection) -> bool:
    row = Gateway.objects.filter(pk=config.pk, dialect="").first()
    if row is None:
        return False
    row.detected_dialect = found.dialect or ""
    row.detection_note = found.evidence[:300]
    fields = ["detected_dialect", "detection_note"]
    chosen = row.name == configs.DEFAULT_NAME and settings.LLM_COST_UNIT
    if found.dialect is not None and not chosen and row.cost_unit == default_unit(None):
        row.cost_unit = default_unit(found.dialect)
        fields.append("cost_unit")
    # An update, not a save: a save's signal would forget that this gateway was just asked.
    Gateway.objects.filter(pk=row.pk).update(**{name: getattr(row, name) for name in fields})
    return found.dialect is not None


def forget_asked(**_: object) -> None:
    """Forget which gateways were asked lately (a gateway was saved or deleted: ask it again)."""
    _asked.clear()


def described(row: Gateway) -> str:
    """The detection as the admin's dialect picker says it: "detected: LiteLLM (x-litellm-…)"."""
    if row.dialect:
        return ""
    if not row.detection_note:
        return "not asked yet: it is asked when its models are first listed"
    facts = facts_for(row.detected_dialect)
    what = facts.title if facts is not None else "none of the known gateways"
    return f"detected: {what} ({row.detection_note})"
