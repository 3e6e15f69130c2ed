"""Fixtures shared by every test package, and how the suite is split between xdist workers.

`make test` runs the suite in parallel workers (`pytest -n N --dist loadgroup`), each with its
own test database (pytest-django adds the worker's name to it) and its own servers, on ports
the OS picks. A fixture that starts a whole cluster (PostgreSQL, Redis, several Daphnes) is
started once: every test that uses one is put in one xdist group, which one worker runs. The
longest group, the one of tests/multiprocess, is handed out first so that it does not finish
last; the other clusters keep their places, so that they do not all start at once (on two
cores, clusters starting together time out). A module's browser tests are a group too (its
module-scoped servers and rows are made once), and keep their places among the rest: run all at
once, at the end, three Chromiums and their servers starved each other (11 minutes instead of 7).
Each worker starts one Chromium for all its browser tests (`tests/chromium.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from gateway_client.emulator import EmulatorURL
from tests import chromium

# No per-example deadline: Hypothesis' default (200 ms) is a timed test, which a loaded machine
# of two cores failed (`test_live_state`, on parallel workers beside Chromium); speed is the
# benchmarks' to measure.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

TESTS = Path(__file__).parent
FAULTS = TESTS / "faults"
MULTIPROCESS = TESTS / "multiprocess"
# Fixtures that start a cluster of servers, for the session (tests/multiprocess' `servers`, the
# fault suite's `cluster`) or for one module (tests/deploy's `cluster`, some `servers`). The
# browser's and the security suite's single Daphne are cheap enough to start in each worker.
CLUSTERS = ("cluster", "servers")
# Fixtures that start servers of their own as processes (a Daphne, an MCP server, LiteLLM's
# proxy): a test that uses one is marked `processes`, which `make test-quick` leaves out with
# `browser`, `multiprocess` and `faults`. A test that starts one in its body is marked by hand.
PROCESSES = (*CLUSTERS, "server", "server_url", "render_server", "mcp_server", "litellm_proxy")


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups off the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fault suite is marked `faults` as a whole, every test that drives Chromium `browser`
    and every one that starts servers as processes `processes` (`make test-quick` leaves them
    out), and the tests of each cluster are grouped for xdist (see the module docstring)."""
    for item in items:
        if item.path.is_relative_to(FAULTS):
            item.add_marker(pytest.mark.faults)
        if "browser" in getattr(item, "fixturenames", ()):
            # Chromium, marked or not: `make test-quick` (-m "not browser") promises none starts.
            item.add_marker(pytest.mark.browser)
        if any(name in PROCESSES for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.processes)
        group = _cluster_group(item) or _browser_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if hasattr(config, "workerinput"):  # an xdist worker: every worker sorts alike
        items.sort(key=lambda item: not item.path.is_relative_to(MULTIPROCESS))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """Playwright's running loop taken back for a test that drives Chromium, set aside for any
    other (`tests/chromium.py`)."""
    if _drives_chromium(item):
        chromium.take_back()
    else:
        chromium.set_aside()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """After the run's last test, a browser test, its session's fixtures are torn down while
    Playwright's loop still runs: the loop is set aside first (a session node's finalizers run
    last in, first out), and `browser` takes it back to close Chromium."""
    if nextitem is None and _drives_chromium(item):
        item.session.addfinalizer(chromium.set_aside)
    return (yield)


def _drives_chromium(item: pytest.Item) -> bool:
    """Marked `browser` (its module's fixtures may drive Chromium, torn down after any test)."""
    return item.get_closest_marker("browser") is not None


def _cluster_group(item: pytest.Item) -> str | None:
    """`module:fixture` for a cluster fixture defined in the test's module, else
    `directory:fixture` (a conftest's, for the session); None for a test that uses none."""
    names = getattr(item, "fixturenames", ())
    for name in CLUSTERS:
        if name in names:
            module = getattr(item, "module", None)
            if module is not None and hasattr(module, name):
                return f"{module.__name__}:{name}"
            return f"{item.path.parent.relative_to(TESTS)}:{name}"
    return None


def _browser_group(item: pytest.Item) -> str | None:
    """`module:browser` for a test that drives Chromium: a module's browser tests run in one
    worker, which makes the module's own servers and rows for them once."""
    module = getattr(item, "module", None)
    if module is None or "browser" not in getattr(item, "fixturenames", ()):
        return None
    return f"{module.__name__}:browser"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium, one for the worker's whole run; a test takes a fresh context of it."""
    yield from chromium.launched()


@pytest.fixture(autouse=True)
def closed_contexts(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every browser context a test opened is closed after it, whether the test closed it or
    not: Chromium outlives the module now, and a page left open goes on running (its socket,
    its timers) beside the next tests."""
    yield
    if "browser" in request.fixturenames:
        for context in request.getfixturevalue("browser").contexts:
            context.close()


@pytest.fixture(scope="session")
def emulator_url() -> Iterator[EmulatorURL]:
    """Base URL (no trailing slash) of the gateway emulator, served by a real server on loopback.

    Fast pacing so tests stay quick; scenarios that are slow by design (stall, slow-start) stay so.
    """
    from gateway_client.emulator import serve_in_thread

    with serve_in_thread(tokens_per_second=2000, ttft_ms=5, request_options=True) as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def unhashed_static_names() -> Iterator[None]:
    """Pages rendered in the test's process name the static files as they are: nothing was
    collected for it (the servers the tests start serve collected, hashed ones:
    `tests/static_root.py`)."""
    from django.conf import settings
    from django.test import override_settings

    plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    with override_settings(STORAGES={**settings.STORAGES, "staticfiles": plain}):
        yield
