"""The `current_time` tool: today's date and the time now, which a model cannot know.

In the IANA zone the model names (`zoneinfo`, so the server's tz database decides what exists),
else in the server's `TIME_ZONE`. A zone that is not one is the model's error to fix, by name.
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from django.conf import settings
from django.utils import timezone

from chatapp.tools.base import ToolContext, ToolFailure

__all__ = ["TOOL", "Clock"]


def zone_named(name: str) -> ZoneInfo:
    """The IANA zone `name`; `ToolFailure` naming it when there is none."""
    try:
        return ZoneInfo(name)
    # zoneinfo refuses keys that are paths with ValueError, and a directory with OSError.
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ToolFailure(
            f"Unknown time zone {name!r}: use an IANA name such as Europe/Lisbon, "
            "America/New_York or UTC."
        ) from None


class Clock:
    name = "current_time"
    title = "Date and time"
    about = "Today's date and the time now, in any time zone."
    private = False
    description = (
        "The current date, time and weekday, in a time zone (the server's when none is given)."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "time_zone": {
                "type": "string",
                "description": "An IANA time zone, e.g. Europe/Lisbon or America/New_York.",
                "minLength": 1,
                "maxLength": 64,
            }
        },
        "additionalProperties": False,
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        name = str(arguments.get("time_zone") or settings.TIME_ZONE)
        now = timezone.now().astimezone(zone_named(name))
        return orjson.dumps(
            {
                "datetime": now.isoformat(timespec="seconds"),
                "time_zone": name,
                "utc_offset": now.strftime("%:z"),
                "abbreviation": now.tzname(),
                "weekday": now.strftime("%A"),
            }
        ).decode()


TOOL = Clock()
