"""Citations are stored as the stream reader checked them ({"url", "title", "raw"}), so pages no
longer re-parse the gateway's raw entries; this converts answers stored before."""

from __future__ import annotations

from typing import Any

from django.db import migrations

from gateway_client.chunks import parse_annotation


def _stored(entry: Any) -> dict[str, Any] | None:
    if not isinstance(entry, dict):
        return None
    if "raw" in entry and set(entry) <= {"url", "title", "raw"}:
        return entry  # already converted
    annotation = parse_annotation(entry)
    if annotation is None:
        return None
    title = annotation.title or annotation.url or "source"
    return {"url": annotation.url, "title": title, "raw": entry}


def forwards(apps: Any, schema_editor: Any) -> None:
    Message = apps.get_model("chatapp", "Message")
    for message in Message.objects.exclude(annotations=[]).iterator():
        stored = [s for s in map(_stored, message.annotations or []) if s is not None]
        if stored != message.annotations:
            message.annotations = stored
            message.save(update_fields=["annotations"])


def backwards(apps: Any, schema_editor: Any) -> None:
    Message = apps.get_model("chatapp", "Message")
    for message in Message.objects.exclude(annotations=[]).iterator():
        message.annotations = [
            entry.get("raw", entry) for entry in message.annotations if isinstance(entry, dict)
        ]
        message.save(update_fields=["annotations"])


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
