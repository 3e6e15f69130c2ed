"""An answer's image kept as its URL is tagged `image_url`, apart from an image kept as bytes
(`image`), which had the same tag: the two are stored, served and counted differently."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def _retagged(items: Any, old: str, new: str, *, url_only: bool) -> list[Any] | None:
    """`items` with `old` attachments tagged `new` (those with a `url` only, if `url_only`);
    None when nothing changes."""
    if not isinstance(items, list):
        return None
    changed = False
    result = []
    for item in items:
        if isinstance(item, dict) and item.get("kind") == old and ("url" in item or not url_only):
            item = {**item, "kind": new}
            changed = True
        result.append(item)
    return result if changed else None


def _retag(apps: Any, old: str, new: str, *, url_only: bool) -> None:
    message_model = apps.get_model("chatapp", "Message")
    rows = message_model.objects.exclude(attachments=[]).only("pk", "attachments")
    changed = []
    for message in rows.iterator(chunk_size=500):
        items = _retagged(message.attachments, old, new, url_only=url_only)
        if items is not None:
            message.attachments = items
            changed.append(message)
    message_model.objects.bulk_update(changed, ["attachments"], batch_size=500)


def forwards(apps: Any, schema_editor: Any) -> None:
    _retag(apps, "image", "image_url", url_only=True)


def backwards(apps: Any, schema_editor: Any) -> None:
    _retag(apps, "image_url", "image", url_only=False)


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0010_spending_limits")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
