"""Static files: collected under hashed names and pre-compressed, served before Django.

`collectstatic` (which `make run` runs) writes each file under a name with a hash of its content
(`chat.4e1a3fce968e.js`, the ES modules' imports rewritten to match) beside a `.br` and `.gz`
of it (WhiteNoise's storage); the plain name stays too, uncompressed (DEBUG's pages use it).
`StaticFiles`, the ASGI layer in front of Django, answers `/static/` from an index of
`STATIC_ROOT` made once (WhiteNoise's lookup): a hashed name is kept by the browser for a year,
unasked (`immutable`); another for a minute. It picks the smallest encoding the browser accepts
(`Vary: Accept-Encoding`). A path that is not in the index, however it leaves the directory, is
a plain 404: nothing is looked up on disk by a request's path.

With `DJANGO_DEBUG=1` the pages name the plain files (Django's rule) and they are served as
they are in `static/` and the apps' directories at each request, not cached: an edit shows on
reload, with nothing collected.

The file is read on the event loop: our files are small and in the page cache after the first
read, and a thread per file would cost more than the read (nginx serves them in production).

Before its first request is served, a server checks that the files were collected, every one
the finders see (`check_collected`): until they are, it answers every request with a 503 that
says to run `collectstatic` (and logs it), rather than pages without their styles or a 500. It
checks at the first request, not at start: `make cluster` starts Daphne while collectstatic
runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any
from wsgiref.headers import Headers

from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import ManifestFilesMixin, staticfiles_storage
from django.core.exceptions import ImproperlyConfigured
from whitenoise.base import WhiteNoise
from whitenoise.storage import CompressedManifestStaticFilesStorage

__all__ = ["IMMUTABLE", "StaticFiles", "StaticStorage", "check_collected"]

type Scope = dict[str, Any]
type Receive = Callable[[], Awaitable[Mapping[str, Any]]]
type Send = Callable[[Mapping[str, Any]], Awaitable[None]]
type ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

logger = logging.getLogger(__name__)

IMMUTABLE = "max-age=31536000, public, immutable"
# The request headers WhiteNoise reads, by their WSGI names.
_READ = {
    b"accept-encoding": "HTTP_ACCEPT_ENCODING",
    b"if-none-match": "HTTP_IF_NONE_MATCH",
    b"if-modified-since": "HTTP_IF_MODIFIED_SINCE",
    b"range": "HTTP_RANGE",
}
_CHUNK = 64 * 1024


class StaticStorage(CompressedManifestStaticFilesStorage):  # type: ignore[misc]  # untyped
    # `import ... from "./socket.js"` names the hashed module too, so a page never mixes versions.
    support_js_module_import_aggregation = True

    def compress_files(self, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
        """Only the hashed names, which pages link to: half the work (brotli at its best is
        most of collectstatic's time). The plain names stay, uncompressed, for DEBUG's pages."""
        hashed = set(self.hashed_files.values())
        yield from super().compress_files([path for path in paths if path in hashed])


class _Index(WhiteNoise):  # type: ignore[misc]  # untyped
    def __init__(self, root: Path, prefix: str, hashed: set[str]) -> None:
        super().__init__(application=None, allow_all_origins=False)
        self.prefix = prefix
        self.hashed = hashed
        if root.is_dir():
            self.add_files(str(root), prefix=prefix)

    def find(self, path: str) -> Any:
        return self.files.get(path)

    def immutable_file_test(self, path: str, url: str) -> bool:
        return url.removeprefix(self.prefix) in self.hashed

    def add_cache_headers(self, headers: Headers, path: str, url: str) -> None:
        if self.immutable_file_test(path, url):
            headers["Cache-Control"] = IMMUTABLE
        else:
            super().add_cache_headers(headers, path, url)
        headers["X-Content-Type-Options"] = "nosniff"


class _Sources(_Index):
    """DEBUG: the finders' directories, looked up at each request (WhiteNoise's autorefresh,
    which takes only a canonical path inside one of them), the first finder's file first."""

    def __init__(self, prefix: str) -> None:
        WhiteNoise.__init__(self, application=None, autorefresh=True, max_age=0)
        self.prefix = prefix
        self.hashed = set()
        roots = [
            (storage.location, f"{prefix}{getattr(storage, 'prefix', None) or ''}")
            for finder in finders.get_finders()
            for storage in getattr(finder, "storages", {}).values()
        ]
        for root, url in reversed(roots):  # a later one is looked in first
            self.add_files(root, prefix=url)

    def find(self, path: str) -> Any:
        return self.find_file(path)


class StaticFiles:
    """ASGI: a request under `STATIC_URL` is answered from `STATIC_ROOT`; the rest go on to
    `application`."""

    def __init__(self, application: ASGIApp) -> None:
        self.application = application
        self.prefix = settings.STATIC_URL or "/static/"
        self.collected = False  # once `check_collected` has passed
        self.told: str | None = None  # what the log was last told

    @cached_property
    def index(self) -> _Index:
        # On first use, not at import: a test that imports the app may have collected nothing.
        if settings.DEBUG:
            return _Sources(self.prefix)
        hashed = set(getattr(staticfiles_storage, "hashed_files", {}).values())
        return _Index(Path(settings.STATIC_ROOT or ""), self.prefix, hashed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.collected:
            try:
                check_collected()
            except ImproperlyConfigured as exc:
                if str(exc) != self.told:
                    logger.error("%s", exc)
                    self.told = str(exc)
                await _plain(send, 503, str(exc).encode())
                return
            self.collected = True
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            await self.application(scope, receive, send)
            return
        found = self.index.find(scope["path"])
        if found is None:
            await _plain(send, 404, b"Not found")
            return
        headers = scope["headers"]
        request = {_READ[name]: value.decode("latin-1") for name, value in headers if name in _READ}
        response = found.get_response(scope["method"], request)
        await send(
            {
                "type": "http.response.start",
                "status": int(response.status),
                "headers": [(k.lower().encode(), v.encode()) for k, v in response.headers],
            }
        )
        if response.file is None:
            await send({"type": "http.response.body", "body": b""})
            return
        with response.file as file:
            while True:
                chunk = file.read(_CHUNK)
                await send({"type": "http.response.body", "body": chunk, "more_body": bool(chunk)})
                if not chunk:
                    break


async def _plain(send: Send, status: int, body: bytes) -> None:
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", b"%d" % len(body)),
        (b"x-content-type-options", b"nosniff"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def check_collected() -> None:
    """Raise `ImproperlyConfigured`, saying what to run, unless `STATIC_ROOT`'s manifest names
    every static file the finders see (a storage without a manifest, or DEBUG's pages, which
    name the plain files, need nothing collected)."""
    if settings.DEBUG or not isinstance(staticfiles_storage, ManifestFilesMixin):
        return
    manifest, manifest_hash = staticfiles_storage.load_manifest()
    where = Path(settings.STATIC_ROOT or "") / staticfiles_storage.manifest_name
    if not manifest:
        raise ImproperlyConfigured(
            f"The static files are not collected ({where} is missing): run"
            " `manage.py collectstatic` (`make run` does)."
        )
    # The storage read its manifest when first used: maybe before collectstatic wrote it.
    staticfiles_storage.hashed_files, staticfiles_storage.manifest_hash = manifest, manifest_hash
    missing = sorted(set(_found()) - manifest.keys())
    if missing:
        named = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        raise ImproperlyConfigured(
            f"The static files changed since they were collected ({named} not in {where}):"
            " run `manage.py collectstatic` again."
        )


def _found() -> list[str]:
    """Every static file's name, as collectstatic names it."""
    ignore = apps.get_app_config("staticfiles").ignore_patterns  # type: ignore[attr-defined]
    names = []
    for finder in finders.get_finders():
        for path, storage in finder.list(ignore):
            prefix = getattr(storage, "prefix", None)
            name = path.replace("\\", "/")
            names.append(f"{prefix}/{name}" if prefix else name)
    return names
