"""nginx refuses request bodies at the sizes the app does (`chatapp/access/body_limits.py`), at
the same paths: the production site and the loopback cluster's generated configuration alike.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatapp.access.body_limits import BODY_LIMITS, FORM
from deploy.nginx import nginx_config

SITE = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "site.conf"
UNITS = {"": 1, "k": 1024, "m": 1024 * 1024}


def body_limits(config: str) -> tuple[int, dict[str, int]]:
    """The limit outside any `location ~` (the last one written, the https server's) and the
    limit of each regex location, in bytes."""
    default = 0
    by_pattern: dict[str, int] = {}
    pattern = None
    for line in config.splitlines():
        line = line.strip()
        if opened := re.fullmatch(r"location ~ (\S+) \{", line):
            pattern = opened.group(1)
        elif line.startswith("location "):
            pattern = ""
        elif line == "}":
            pattern = None
        elif size := re.match(r"client_max_body_size (\d+)([km]?);", line):
            value = int(size.group(1)) * UNITS[size.group(2)]
            if pattern:
                by_pattern[pattern] = value
            elif pattern is None:
                default = value
    return default, by_pattern


@pytest.mark.parametrize(
    "config",
    [SITE.read_text(), nginx_config(Path("/tmp/cluster"), 8000, [8001], Path("/tmp/static"))],
    ids=["site.conf", "cluster"],
)
def test_nginx_refuses_bodies_at_the_apps_limits(config: str) -> None:
    default, by_pattern = body_limits(config)

    assert default == FORM.max_bytes
    assert by_pattern == {limit.pattern: limit.max_bytes for limit in BODY_LIMITS}
