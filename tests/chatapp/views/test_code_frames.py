"""The sandboxed frames that draw and preview answers' code (`chatapp.views.code_frames`): open
to anyone (they hold nothing of a user's), framable only by the app, sandboxed by their own CSP,
and loading nothing from anywhere but the diagram frame's two scripts from our static files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from chatapp.static_vendor import MERMAID
from chatapp.views.code_frames import DIAGRAM_FRAME_CSP, PREVIEW_FRAME_CSP

pytestmark = pytest.mark.django_db


def directives(policy: str) -> dict[str, str]:
    return {part.split()[0]: part.strip() for part in policy.split(";")}


@pytest.mark.parametrize(
    ("name", "policy"),
    [("diagram_frame", DIAGRAM_FRAME_CSP), ("preview_frame", PREVIEW_FRAME_CSP)],
)
def test_a_frame_is_sandboxed_framable_only_here_and_loads_nothing(name: str, policy: str) -> None:
    response = Client().get(reverse(name))
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == policy
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Cache-Control"] == "no-store"
    found = directives(policy)
    assert found["sandbox"] == "sandbox allow-scripts", "never allow-same-origin"
    assert found["default-src"] == "default-src 'none'"
    assert found["frame-ancestors"] == "frame-ancestors 'self'"
    assert found["img-src"] == "img-src data:"
    assert "connect-src" not in found  # 'none', by default-src
    assert "frame-src" not in found
    assert Client().post(reverse(name)).status_code == 405


def test_the_preview_frame_runs_only_inline_code() -> None:
    found = directives(PREVIEW_FRAME_CSP)
    assert found["script-src"] == "script-src 'unsafe-inline'"
    assert found["style-src"] == "style-src 'unsafe-inline'"
    page = Client().get(reverse("preview_frame")).content.decode()
    assert "src=" not in page
    assert "event.source !== window.parent" in page  # the code is taken from the app alone


def test_the_diagram_frame_loads_mermaid_when_it_is_installed(
    settings: Any, tmp_path: Path
) -> None:
    assert directives(DIAGRAM_FRAME_CSP)["script-src"] == "script-src 'self'"
    settings.STATIC_ROOT = tmp_path
    page = Client().get(reverse("diagram_frame")).content.decode()
    assert MERMAID.static_path not in page
    assert "chatapp/diagram_frame.js" in page  # which tells the page diagrams show as code
    (tmp_path / MERMAID.static_path).parent.mkdir(parents=True)
    (tmp_path / MERMAID.static_path).write_text("// mermaid")
    page = Client().get(reverse("diagram_frame")).content.decode()
    assert f'<script src="/static/{MERMAID.static_path}"></script>' in page


def test_app_pages_name_the_frames(alice: Any, password: str) -> None:
    client = Client()
    client.login(username=alice.username, password=password)
    page = client.get(reverse("chat:home")).content.decode()
    assert (
        f'<meta name="chat-frames" data-diagram="{reverse("diagram_frame")}" '
        f'data-preview="{reverse("preview_frame")}">'
    ) in page
