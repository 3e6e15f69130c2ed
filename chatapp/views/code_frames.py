"""The two frames in which an answer's code runs apart from the app: Mermaid drawing a diagram,
and an HTML or SVG block's preview.

Both are pages of our own origin loaded in `<iframe sandbox="allow-scripts">` (never
`allow-same-origin`), and their responses sandbox themselves too (`sandbox allow-scripts` in
their CSP, so a frame opened on its own is no more): their documents have an opaque origin, so
nothing in them reads the app's cookies or storage, reaches its pages through the DOM or opens
its socket. Their CSP lets nothing load from anywhere (`default-src 'none'`, images only as
`data:`), and the app's own CSP (`frame-src` by its `default-src 'self'`) keeps them from
navigating elsewhere. The code reaches them by `postMessage`, never in the URL or the markup.

Not `srcdoc`: a `srcdoc` document inherits the app's CSP, whose `script-src 'self'` and
`style-src 'self'` would refuse the inline scripts and styles a preview is made of (and the
`<style>` Mermaid puts in each diagram). The diagram frame's CSP allows scripts only from our
static files (Mermaid and `diagram_frame.js`) and inline styles; the preview's allows inline
scripts and styles, as the code it shows needs. Neither holds anything of the user's.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_safe

from chatapp.static_vendor import MERMAID

# Every directive a frame leaves out falls back to `default-src 'none'`: no fetch, no socket,
# no font, no frame, no form target anywhere.
_FRAME_POLICY = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
DIAGRAM_FRAME_CSP = (
    f"{_FRAME_POLICY}; script-src 'self'; style-src 'unsafe-inline'; img-src data:; "
    "sandbox allow-scripts"
)
PREVIEW_FRAME_CSP = (
    f"{_FRAME_POLICY}; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "sandbox allow-scripts"
)


def mermaid_url() -> str | None:
    """Mermaid's static URL, or None when it was not installed (the registry was unreachable
    at `make install`): the frame then says so, and diagrams show as code. With DEBUG the plain
    files are served from where the finders find them, not from `STATIC_ROOT`."""
    path = MERMAID.static_path
    found = finders.find(path) if settings.DEBUG else staticfiles_storage.exists(path)
    if not found:
        return None
    try:
        return str(staticfiles_storage.url(path))
    except ValueError:  # collected before it was installed: not in the manifest
        return None


def _framed(response: HttpResponse, policy: str) -> HttpResponse:
    response["Content-Security-Policy"] = policy
    response["X-Content-Type-Options"] = "nosniff"
    response["Referrer-Policy"] = "no-referrer"
    return response


@require_safe
@xframe_options_sameorigin
def diagram_frame(request: HttpRequest) -> HttpResponse:
    response = render(request, "chatapp/code_frames/diagram.html", {"mermaid_url": mermaid_url()})
    return _framed(response, DIAGRAM_FRAME_CSP)


@require_safe
@xframe_options_sameorigin
def preview_frame(request: HttpRequest) -> HttpResponse:
    return _framed(render(request, "chatapp/code_frames/preview.html"), PREVIEW_FRAME_CSP)
