"""The shipped systemd unit: what it sets for every Daphne process, read from the file itself.

A unit may set a key several times (`Environment=` is one variable each), so it is read line by
line rather than with configparser, which refuses repeated keys.
"""

from __future__ import annotations

from pathlib import Path

from deploy.cluster import DAPHNE_ENVIRONMENT

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "gateway-chat@.service"


def service_environment(unit: str) -> dict[str, str]:
    """The variables the `[Service]` section's `Environment=` lines set."""
    section = ""
    found: dict[str, str] = {}
    for line in unit.split("\n"):
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line.startswith("Environment="):
            for assignment in line.removeprefix("Environment=").split():
                name, _, value = assignment.partition("=")
                found[name] = value
    return found


def test_the_unit_runs_daphne_with_two_malloc_arenas() -> None:
    assert service_environment(UNIT.read_text())["MALLOC_ARENA_MAX"] == "2"


def test_the_unit_sets_what_make_cluster_sets_for_daphne() -> None:
    environment = service_environment(UNIT.read_text())
    assert DAPHNE_ENVIRONMENT
    assert {name: environment.get(name) for name in DAPHNE_ENVIRONMENT} == DAPHNE_ENVIRONMENT


def test_environment_lines_outside_the_service_section_do_not_count() -> None:
    unit = "[Unit]\nEnvironment=A=1\n[Service]\nEnvironment=B=2 C=3\nEnvironment=D=4\n"
    assert service_environment(unit) == {"B": "2", "C": "3", "D": "4"}
