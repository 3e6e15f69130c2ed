"""`make screenshots`: the README's pictures of the app, made again from the code as it is.

The app runs as `make run` runs it (migrate, collectstatic, Daphne), in a temporary directory
with its own SQLite database and the built-in emulator (no `LLM_BASE_URL`), as a new user sees
it. Headless Chromium signs in, asks `emulator/reasoning` a question (its answer has reasoning, a
heading, a list, a highlighted code block and a table), waits for the final render and its title,
and saves the page at 1280x800 and 390x844 as `docs/screenshot-desktop.png` and
`docs/screenshot-phone.png`. Then it has `emulator/echo` answer with a Mermaid diagram, waits for
it to be drawn and saves that answer at 1280x800 as `docs/screenshot-diagram.png`. Nothing outside
the temporary directory is touched but those three.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CHROMIUM = "/usr/bin/chromium"
USER, PASSWORD = "ada", "screenshots-only"
QUESTION = "How do I read a server-sent event stream in Python?"
MODEL = "emulator/reasoning"
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
DIAGRAM = """How an answer with a tool call is made:

```mermaid
flowchart LR
    Q[Your question] --> G{Gateway}
    G -->|tool call| T[Tool]
    T -->|result| G
    G -->|streams| A[The answer]
```
"""


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=env, cwd=ROOT, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
    )  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def app(directory: Path) -> Iterator[str]:
    """The app served by Daphne on a free port, on a fresh database with one user; its URL."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LLM_", "CHAT_", "DJANGO_", "DATABASE_", "REDIS_"))
    } | {
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
        "DJANGO_SECRET_KEY": "screenshots-only",
        "DJANGO_STATIC_ROOT": str(directory / "static"),
        "DJANGO_SUPERUSER_USERNAME": USER,
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),  # this checkout's code, whatever the venv was installed from
    }
    manage(env, "migrate", "--noinput")
    manage(env, "ensure_admin")
    manage(env, "collectstatic", "--noinput", "-v", "0")
    port = free_port()
    log = (directory / "daphne.log").open("wb")
    daphne = Path(sys.executable).parent / "daphne"
    server = subprocess.Popen(
        [str(daphne), "-b", "127.0.0.1", "-p", str(port), "chatapp.asgi:application"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not listening(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((directory / "daphne.log").read_text())
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)
        log.close()


def settled(page: Page) -> None:
    page.wait_for_function("() => document.getAnimations().every(a => a.playState !== 'running')")


def converse(page: Page, url: str) -> str:
    """Signed in, one question answered and titled; the conversation's URL."""
    page.goto(f"{url}/accounts/login/")
    page.get_by_label("Username").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{url}/")
    option = page.locator(f'#model option[value$=":{MODEL}"]').first
    page.get_by_label("Model").select_option(option.get_attribute("value"))
    page.get_by_label("Message").fill(QUESTION)
    page.get_by_label("Message").press("Enter")
    answer = page.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "completed", timeout=60_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    # The title model's title, not the first line.
    expect(page.locator("#conversation-title")).not_to_have_text(QUESTION, timeout=30_000)
    return page.url


def draw_diagram(page: Page, url: str) -> None:
    """A new conversation in which the echo model answers with `DIAGRAM`, drawn, in view."""
    page.goto(f"{url}/")
    option = page.locator('#model option[value$=":emulator/echo"]').first
    page.get_by_label("Model").select_option(option.get_attribute("value"))
    page.get_by_label("Message").fill(DIAGRAM)
    page.get_by_label("Message").press("Enter")
    answer = page.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "completed", timeout=60_000)
    block = answer.locator(".code-block[data-diagram]")
    expect(block).to_have_attribute("data-drawing", "drawn", timeout=60_000)
    expect(block.locator("figure.diagram img")).to_be_visible()
    answer.evaluate("el => el.scrollIntoView({ block: 'end' })")
    settled(page)


def main() -> int:
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is not installed (make chromium).", file=sys.stderr)
        return 1
    with (
        tempfile.TemporaryDirectory(prefix="gateway-chat-screenshots-") as scratch,
        app(Path(scratch)) as url,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        conversation = None
        storage: list[Any] = []
        for label, (width, height) in SIZES.items():
            context = browser.new_context(
                viewport={"width": width, "height": height}, color_scheme="light"
            )
            page = context.new_page()
            if conversation is None:
                conversation = converse(page, url)
                page.reload()
                storage = list(context.cookies())
            else:
                context.add_cookies(storage)
                page.goto(conversation)
            expect(page.locator("article.assistant .content.rendered")).to_be_attached()
            page.locator("article.user").last.scroll_into_view_if_needed()
            settled(page)
            path = DOCS / f"screenshot-{label}.png"
            page.screenshot(path=str(path))
            print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KB")
            if label == "desktop":
                draw_diagram(page, url)
                path = DOCS / "screenshot-diagram.png"
                page.screenshot(path=str(path))
                print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KB")
            context.close()
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
