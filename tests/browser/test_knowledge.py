"""Knowledge collections in Chromium: making a collection, adding a PDF and a Markdown file, and
watching their progress reach "ready" on the page without a reload, indexed by the task worker
running as its own process beside the server (as `make run` runs it)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from deploy.processes import stop
from tests.browser.conftest import ROOT, manage_shell, screenshots
from tests.pdf_bytes import pdf_bytes

MARKDOWN = """# Leave

Staff take thirty days of paid leave a year; unused days carry over until March.

# Travel

Trains are booked in second class. Flights need a manager's approval.
"""


@pytest.fixture(scope="module", autouse=True)
def no_collections_left(server_env: dict[str, str]) -> Iterator[None]:
    """The collections made here are deleted after the module: the server is the session's, and
    `test_knowledge_chat.py` counts what `#hand` offers alice (her Handbook made here matched)."""
    yield
    manage_shell(
        server_env,
        "from chatapp.knowledge.models import Collection\nCollection.objects.all().delete()",
    )


@pytest.fixture(scope="module")
def task_worker(server_env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """The default gateway embedding (as an admin sets it), and the worker process."""
    manage_shell(
        server_env,
        "from chatapp.gateways import configs; from chatapp.gateways.models import Gateway; "
        "_, pk = configs.configs(force=True); "
        "Gateway.objects.filter(pk=pk).update(embedding_model='emulator/embedding')",
    )
    log = Path(server_env["SERVER_DIR"]) / "worker.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "run_worker", "--interval", "0.2"],
            env=server_env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        stop(process)


def test_a_collection_gets_a_pdf_and_a_markdown_file_that_become_ready(
    alice: Any, server_url: str, task_worker: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    page = alice
    page.goto(f"{server_url}/knowledge/")
    page.get_by_role("link", name="New collection").click()
    page.get_by_label("Name").fill("Handbook")
    page.get_by_label("What it holds").fill("How we work: leave, travel, badges")
    page.get_by_role("button", name="Make collection").click()
    expect(page).to_have_url(re.compile(r"/knowledge/\d+/$"))
    expect(page.get_by_role("heading", name="Handbook")).to_be_visible()

    pdf = tmp_path / "Guide.pdf"
    pdf.write_bytes(pdf_bytes("Badges open every door", "Lunch is served at noon", "Fire exit"))
    markdown = tmp_path / "Rules.md"
    markdown.write_text(MARKDOWN)
    page.get_by_label("Add files").set_input_files([str(pdf), str(markdown)])
    page.get_by_role("button", name="Add", exact=True).click()

    files = page.locator(".knowledge-file")
    expect(files).to_have_count(2)
    # The list updates itself while the worker indexes them: no reload from here on.
    page.evaluate("window.__same_page = true")
    ready = page.locator('.knowledge-file[data-state="ready"]')
    expect(ready).to_have_count(2, timeout=90_000)
    assert page.evaluate("window.__same_page") is True
    guide = files.filter(has_text="Guide.pdf")
    expect(guide.locator(".knowledge-state")).to_have_text(re.compile(r"Ready · 3 passages"))
    expect(guide).to_contain_text("3 pages")
    expect(files.filter(has_text="Rules.md").locator(".knowledge-state")).to_have_text(
        re.compile(r"Ready · 2 passages")
    )
    expect(page.locator("progress")).to_have_count(0)
    expect(page.locator("#knowledge-files")).not_to_have_attribute("hx-trigger", re.compile("."))
    screenshots(page, "knowledge-collection")

    page.goto(f"{server_url}/knowledge/")
    expect(page.get_by_role("link", name="Handbook")).to_be_visible()
    expect(page.locator(".starting-list")).to_contain_text("2 files")
    screenshots(page, "knowledge-list")
    assert task_worker.poll() is None


def test_a_file_over_the_limit_is_refused_as_it_is_chosen_in_words(
    alice: Any, server_url: str, tmp_path: Path
) -> None:
    """A file past the server's bound for a body is refused before it is sent, saying which file
    and the limit; before, the page was left for a bare 413 naming neither."""
    page = alice
    page.goto(f"{server_url}/knowledge/new/")
    page.get_by_label("Name").fill("Archive")
    page.get_by_role("button", name="Make collection").click()
    expect(page).to_have_url(re.compile(r"/knowledge/\d+/$"))
    collection_url = page.url
    big = tmp_path / "Big.pdf"
    with big.open("wb") as out:
        out.truncate(25 * 1024 * 1024)
    files = page.get_by_label("Add files")
    files.set_input_files([str(big)])
    expect(files).to_have_js_property("validationMessage", "Big.pdf is larger than 20 MB.")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page).to_have_url(collection_url)
    expect(page.locator(".knowledge-file")).to_have_count(0)

    small = tmp_path / "Rules.md"
    small.write_text(MARKDOWN)
    files.set_input_files([str(small)])
    expect(files).to_have_js_property("validationMessage", "")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.locator(".knowledge-file")).to_have_count(1)
