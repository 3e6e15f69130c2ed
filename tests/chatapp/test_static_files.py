"""`chatapp.static_files` over a real Daphne server: hashed names cached for a year, the smallest
encoding the client accepts, ES module imports by hashed name; and a server on static files
that were not collected, which says what to run.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from chatapp.static_files import IMMUTABLE, StaticFiles, check_collected
from tests.browser import conftest as browser
from tests.multiprocess.servers import start_server
from tests.static_root import collected_static_root

# The browser tests' server: started as `make run` starts it, on a collect of the static files.
paced_emulator = browser.paced_emulator
server_env = browser.server_env
server_url = browser.server_url

ACCEPT_ALL = "gzip, deflate, br, zstd"  # what Chromium sends


def hashed_url(server_url: str, name: str) -> str:
    """`name`'s URL (`chatapp/chat.css`), by the name the server's manifest gives it."""
    manifest = json.loads((collected_static_root() / "staticfiles.json").read_text())
    return f"{server_url}/static/{manifest['paths'][name]}"


def get(url: str, accept: str) -> httpx.Response:
    return httpx.get(url, headers={"Accept-Encoding": accept}, timeout=10)


@pytest.mark.parametrize(
    ("accept", "encoding"),
    [(ACCEPT_ALL, "br"), ("gzip, deflate", "gzip"), ("identity", None), ("", None)],
)
def test_a_hashed_name_is_cached_for_a_year_in_the_encoding_asked_for(
    server_url: str, accept: str, encoding: str | None
) -> None:
    url = hashed_url(server_url, "chatapp/chat.css")
    response = get(url, accept)
    assert response.status_code == 200
    assert response.headers["cache-control"] == IMMUTABLE
    assert response.headers["vary"] == "Accept-Encoding"
    assert response.headers.get("content-encoding") == encoding
    assert response.headers["content-type"].startswith("text/css")
    # httpx decodes br and gzip: whatever came, it is the collected file.
    collected = collected_static_root() / "chatapp" / url.rsplit("/", 1)[1]
    assert response.content == collected.read_bytes()


def test_a_name_without_its_hash_is_kept_a_minute_only_and_sent_as_it_is(server_url: str) -> None:
    response = get(f"{server_url}/static/chatapp/chat.css", ACCEPT_ALL)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "max-age=60, public"
    assert "content-encoding" not in response.headers  # only what pages link to is compressed


def test_a_cached_file_asked_again_is_not_modified(server_url: str) -> None:
    url = hashed_url(server_url, "chatapp/chat.css")
    etag = get(url, ACCEPT_ALL).headers["etag"]
    again = httpx.get(url, headers={"If-None-Match": etag}, timeout=10)
    assert again.status_code == 304
    assert again.content == b""


def test_the_chat_modules_import_each_other_by_hashed_name(server_url: str) -> None:
    """Else a page could run a new chat.js with an old socket.js from the cache."""
    url = hashed_url(server_url, "chatapp/chat.js")
    imports = re.findall(r'from "\./([^"]+)"', get(url, ACCEPT_ALL).text)
    assert len(imports) >= 5
    for name in imports:
        assert re.fullmatch(r"[a-z_]+\.[0-9a-f]{12}\.js", name), name
        module = get(f"{url.rsplit('/', 1)[0]}/{name}", ACCEPT_ALL)
        assert module.status_code == 200, name
        assert module.headers["cache-control"] == IMMUTABLE


def test_a_file_that_is_not_there_is_a_plain_404(server_url: str) -> None:
    response = get(f"{server_url}/static/chatapp/nothing.0123456789ab.js", ACCEPT_ALL)
    assert response.status_code == 404
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == "Not found"


@pytest.mark.processes
def test_a_server_on_files_not_collected_says_so_for_every_request(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**server_env, "DJANGO_STATIC_ROOT": str(tmp_path)}
    server = start_server("uncollected", env, tmp_path)
    try:
        server.wait_ready()
        for path in ("/accounts/login/", "/static/chatapp/chat.css"):
            response = httpx.get(f"http://127.0.0.1:{server.port}{path}", timeout=10)
            assert response.status_code == 503
            assert response.headers["content-type"] == "text/plain; charset=utf-8"
            assert response.text == (
                f"The static files are not collected ({tmp_path / 'staticfiles.json'} is"
                " missing): run `manage.py collectstatic` (`make run` does)."
            )
        # Collected meanwhile (as `make cluster` does while Daphne boots): served from then on.
        shutil.copytree(collected_static_root(), tmp_path, dirs_exist_ok=True)
        page = httpx.get(f"http://127.0.0.1:{server.port}/accounts/login/", timeout=10)
        assert page.status_code == 200
        assert re.search(r"/static/chatapp/chat\.[0-9a-f]{12}\.css", page.text)
    finally:
        server.stop()
    assert server.log_text().count("The static files are not collected") == 1


@pytest.fixture
def collected_in(settings: Any, tmp_path: Path) -> Path:
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "chatapp.static_files.StaticStorage"},
    }
    settings.STATIC_ROOT = tmp_path
    return tmp_path


def test_a_complete_collect_passes_the_check(settings: Any, collected_in: Path) -> None:
    settings.STATIC_ROOT = collected_static_root()
    check_collected()


def test_no_manifest_says_to_run_collectstatic(collected_in: Path) -> None:
    with pytest.raises(ImproperlyConfigured) as raised:
        check_collected()
    assert str(raised.value) == (
        f"The static files are not collected ({collected_in / 'staticfiles.json'} is missing):"
        " run `manage.py collectstatic` (`make run` does)."
    )


def test_a_manifest_without_a_file_names_it(collected_in: Path) -> None:
    manifest = json.loads((collected_static_root() / "staticfiles.json").read_text())
    del manifest["paths"]["chatapp/chat.js"]
    (collected_in / "staticfiles.json").write_text(json.dumps(manifest))
    with pytest.raises(ImproperlyConfigured) as raised:
        check_collected()
    assert str(raised.value) == (
        "The static files changed since they were collected (chatapp/chat.js not in"
        f" {collected_in / 'staticfiles.json'}): run `manage.py collectstatic` again."
    )


async def asgi_get(app: StaticFiles, path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    """One GET through `app`, in the test's process: the status, headers and body sent."""
    sent: list[Mapping[str, Any]] = []

    async def receive() -> Mapping[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Mapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "headers": []}
    await app(scope, receive, send)
    body = b"".join(message.get("body", b"") for message in sent[1:])
    return sent[0]["status"], dict(sent[0]["headers"]), body


async def django(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("a static path reached Django")


async def test_debugs_pages_get_the_files_as_they_are_now(
    collected_in: Path, settings: Any, tmp_path: Path
) -> None:
    """Nothing collected (`collected_in` is empty), and a file written after the first request
    is served at the next."""
    settings.DEBUG = True
    sources = tmp_path / "sources"
    (sources / "chatapp").mkdir(parents=True)
    settings.STATICFILES_DIRS = [sources, *settings.STATICFILES_DIRS]
    app = StaticFiles(django)
    status, headers, body = await asgi_get(app, "/static/chatapp/chat.css")
    assert status == 200
    assert body == (browser.ROOT / "static" / "chatapp" / "chat.css").read_bytes()
    assert headers[b"cache-control"] == b"max-age=0, public"
    (sources / "chatapp" / "chat.css").write_text("main { color: red; }")  # the first dir wins
    assert (await asgi_get(app, "/static/chatapp/chat.css"))[2] == b"main { color: red; }"
    assert (await asgi_get(app, "/static/admin/css/base.css"))[0] == 200  # an app's
    for path in (
        "/static/../chatapp/.secret_key",
        "/static//etc/passwd",
        "/static/%00",
        "/static/chatapp/\0",
    ):
        assert (await asgi_get(app, path))[0] == 404, path
