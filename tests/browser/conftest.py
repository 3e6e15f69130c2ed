"""A real Daphne server on a file SQLite database, the emulator, and headless Chromium.

The server runs in a subprocess exactly as `make run` starts it (migrate, then Daphne on the ASGI
app), so these tests cover the whole pipeline: htmx forms, the websocket, the worker, the
emulator over loopback. The emulator is as fast as the unit tests' unless a test is marked
`paced`: then it paces an answer as a gateway does, so that streaming, Stop and reload can be
observed. `send`, `content`, `wait_for_text`, `wait_for_more_text` and `poll` are
the steps the tests share; the waits for the page run in the page (Playwright's
`wait_for_function`), so the sync API keeps serving the page's events while they wait.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from deploy.processes import stop
from gateway_client.emulator import EmulatorURL
from tests.emulator_requests import record_chat_bodies
from tests.static_root import collected_static_root
from tests.waiting import poll

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "browser-test-password"
# An `expect` waits for a condition and returns as soon as it holds, so its bound costs nothing
# when the machine is quick; Playwright's 5 s default is less than a streamed answer can take to
# end (its `done` follows the final render) while parallel test workers share two cores.
expect.set_options(timeout=30_000)
SLOW_START_S = 4.0  # the paced emulator's slow-start scenario: silence before its first token


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"daphne exited early:\n{log.read_text()}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"daphne did not start:\n{log.read_text()}")


# The emulator's pace: a gateway's (`PACED`) for the tests marked `paced`, which watch an answer
# stream (its text growing, Stop, a reload mid-answer); `FAST` for the rest, which wait for the
# answer's end: at 40 tokens a second every answer took a second or more.
PACED = {"tokens_per_second": 40.0, "ttft_ms": 300.0}
FAST = {"tokens_per_second": 2000.0, "ttft_ms": 5.0}


@pytest.fixture(scope="session")
def paced_emulator() -> Iterator[EmulatorURL]:
    """The emulator the server streams from, paced per test (`emulator_pace`)."""
    from gateway_client.emulator import serve_in_thread

    with serve_in_thread(**PACED, slow_start_s=SLOW_START_S, request_options=True) as url:
        yield url


@pytest.fixture(autouse=True)
def emulator_pace(request: pytest.FixtureRequest, paced_emulator: EmulatorURL) -> Iterator[None]:
    """The emulator at `PACED` for a test marked `paced`, else at `FAST`, for this test."""
    app = paced_emulator.app
    original = app.options
    pace = PACED if request.node.get_closest_marker("paced") else FAST
    app.options = dataclasses.replace(original, **pace)
    yield
    app.options = original


@pytest.fixture(scope="session")
def server_env(tmp_path_factory: pytest.TempPathFactory, paced_emulator: str) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("server")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
        "DJANGO_SECRET_KEY": "browser-tests-only",
        "CHAT_TITLES": "0",  # no title generations in the ledgers the tests read
        "DJANGO_DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "LLM_BASE_URL": f"{paced_emulator}/numes/api/v1",
        "LLM_API_KEY": "sk-browser-secret",
        "LLM_IDLE_TIMEOUT": "2",
        "CHAT_STALL_NOTICE": "1",
        "CHAT_EMULATOR_REQUEST_OPTIONS": "1",  # tests pick knobs per model (`emulator/tools?...`)
        # One server per worker serves module after module as alice: the 30 a minute a real
        # user gets refused a quick module's sends (tests/security tests the limit itself).
        "CHAT_GENERATIONS_PER_MINUTE": "600",
        "CHAT_TEMPORARY_GRACE": "1",  # a temporary chat goes a second after its tab closes
        "PYTHONUNBUFFERED": "1",
        "SERVER_DIR": str(directory),
        "DJANGO_STATIC_ROOT": str(collected_static_root()),
    }
    # Migrated and both users added in one Django start (each xdist worker has a server).
    script = (
        "from django.contrib.auth import get_user_model\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', interactive=False, verbosity=0)\n"
        "for name in ('alice', 'bob'):\n"
        f"    get_user_model().objects.create_superuser(name, '', {PASSWORD!r})\n"
    )
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "--no-imports", "-c", script],
        env=env,
        check=True,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    return env


@pytest.fixture(scope="session")
def server_url(server_env: dict[str, str]) -> Iterator[str]:
    with serve(server_env) as url:
        yield url


@contextlib.contextmanager
def serve(env: dict[str, str], log_name: str = "daphne.log") -> Iterator[str]:
    """A Daphne server of the app with `env` (a variant of `server_env`: the same database and
    secret key, so the browser's sessions hold on it too) on a free port; its URL."""
    port = _free_port()
    log = Path(env["SERVER_DIR"]) / log_name
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "daphne"),
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "chatapp.asgi:application",
            ],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_for_port(port, process, log)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(process)


_sessions: dict[str, Any] = {}


def sign_in(browser: Any, server_url: str, username: str) -> Any:
    """A new browser context signed in as `username`, on the home page.

    The sign-in form is used once per user; later contexts reuse its cookies (password hashing
    is deliberately slow).
    """
    context = browser.new_context(storage_state=_sessions.get(username))
    page = context.new_page()
    page.set_default_timeout(15_000)
    if username not in _sessions:
        page.goto(f"{server_url}/accounts/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{server_url}/")
        _sessions[username] = context.storage_state()
    else:
        page.goto(f"{server_url}/")
    return page


@contextlib.contextmanager
def added_gateway(
    browser: Any, server_url: str, server_env: dict[str, str], name: str, fields: dict[str, object]
) -> Iterator[int]:
    """A gateway row `name` with `fields` and a key of its own, written by another process as an
    admin would; afterwards disabled, and waited for until the server's picker no longer lists
    it (at once: a save in any process has the server's next page read its gateways again), so
    that the modules after this one see the pickers as they were."""
    pk = int(
        manage_shell(
            server_env,
            "from chatapp.gateways import key_vault; from chatapp.gateways.models import Gateway; "
            f"row, _ = Gateway.objects.update_or_create(name={name!r}, defaults={fields!r} | "
            f"{{'api_key_encrypted': key_vault.encrypt({'sk-' + name!r})}}); print(row.pk)",
        )
    )
    try:
        yield pk
    finally:
        manage_shell(
            server_env,
            f"from chatapp.gateways.models import Gateway; row = Gateway.objects.get(pk={pk}); "
            "row.enabled = False; row.save()",
        )
        page = sign_in(browser, server_url, "alice")
        try:

            def withdrawn() -> bool:
                page.goto(f"{server_url}/")
                return not page.locator(f'#model option[value^="g{pk}:"]').count()

            poll(withdrawn, what=f"the picker to drop gateway {name}")
        finally:
            page.context.close()


def manage_shell(env: dict[str, str], code: str) -> str:
    """`code` run by `manage.py shell` on the server's database; what it printed."""
    command = [sys.executable, str(ROOT / "manage.py"), "shell", "-v0", "-c", code]
    return subprocess.run(
        command, env=env, cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def alice(browser: Any, server_url: str) -> Iterator[Any]:
    page = sign_in(browser, server_url, "alice")
    yield page
    page.context.close()


@pytest.fixture
def bob(browser: Any, server_url: str) -> Iterator[Any]:
    page = sign_in(browser, server_url, "bob")
    yield page
    page.context.close()


def finished(page: Any, text: str, model: str = "emulator/echo") -> Any:
    """Send `text` with `model` and wait until the answer's final render is in place."""
    send(page, text, model)
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    answer = page.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    return answer


def choose_model(page: Any, model: str) -> None:
    """Pick `model` in the picker, as a person does (on the first gateway listing it)."""
    option = page.locator(f'#model option[value$=":{model}"]').first
    page.get_by_label("Model").select_option(option.get_attribute("value"))


def offer_model(page: Any, model: str) -> None:
    """Put `model`, an emulator scenario with knobs (`emulator/tools?rounds=2`), in the picker
    beside the scenario it tunes, as a gateway listing it would."""
    page.evaluate(
        """model => {
            const base = model.split("?")[0];
            const listed = [...document.querySelectorAll("#model option")]
                .find(o => o.value.endsWith(":" + base));
            const option = listed.cloneNode(true);
            option.value = listed.value.slice(0, -base.length) + model;
            listed.after(option);
        }""",
        model,
    )


def send(page: Any, text: str, model: str) -> Any:
    """Send `text` with `model`; the new answer's element."""
    before = page.locator("article.assistant").count()
    choose_model(page, model)
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")
    answer = page.locator("article.assistant").nth(before)
    expect(answer).to_be_attached()
    return answer


def content(answer: Any) -> str:
    return answer.locator(".content").inner_text()


def wait_for_text(answer: Any, minimum: int = 1) -> str:
    """The answer's text once it holds at least `minimum` characters (leading and trailing
    whitespace aside)."""
    answer.page.wait_for_function(
        "([el, n]) => el.querySelector('.content').innerText.trim().length >= n",
        arg=[answer.element_handle(), minimum],
    )
    return content(answer)


def wait_for_more_text(answer: Any, than: int, part: str = ".content") -> None:
    """Wait until `part` of the answer holds more than `than` characters while the answer is
    still streaming: the text grows in view, not only with the final render."""
    answer.page.wait_for_function(
        """([el, part, n]) => el.dataset.status === "streaming"
            && el.querySelector(part).innerText.length > n""",
        arg=[answer.element_handle(), part, than],
    )


@pytest.fixture
def received(paced_emulator: Any, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The bodies of the chat requests the paced emulator receives from now on, as parsed JSON
    (what the gateway was asked: its `messages`, `model`, ...)."""
    return record_chat_bodies(paced_emulator.app, monkeypatch)


SIZES = {"desktop": (1280, 800), "phone": (390, 844)}


def screenshots(page: Any, name: str, prepare: Callable[[Any], None] | None = None) -> None:
    """With `CHAT_SCREENSHOTS` set to a directory, `page` saved there as `<name>-<size>.png` at
    each of `SIZES`, once its transitions have ended and `prepare(page)` has run (scrolling what
    the picture is of into view); without it, nothing."""
    directory = os.environ.get("CHAT_SCREENSHOTS")
    if not directory:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    original = page.viewport_size
    for label, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_function(
            "() => document.getAnimations().every(a => a.playState !== 'running')"
        )
        if prepare is not None:
            prepare(page)
        page.screenshot(path=str(Path(directory) / f"{name}-{label}.png"))
    page.set_viewport_size(original)
