"""The model picker in real Chromium with a LiteLLM gateway beside the emulator: a group per
provider, no embedding or image-only route, and the choice named on the first screen; the
emulator's image models in a section of their own, its title model in none.

The module serves LiteLLM's captured `/v1/models` and `/model/info` bodies
(`tests/fixtures/gateways/litellm/`) on loopback and adds a gateway for them, disabled again
afterwards. With `CHAT_SCREENSHOTS` set to a directory, the picker is saved there at desktop and
phone sizes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.sync_api import expect

from gateway_client.dialects import DIALECTS
from tests.waiting import poll

from .conftest import ROOT, added_gateway, screenshots

pytestmark = [pytest.mark.browser]

LITELLM = ROOT / "tests" / "fixtures" / "gateways" / "litellm"
BODIES = {"/v1/models": "models.json", "/model/info": "model_info.json"}


class _Lists(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        name = BODIES.get(self.path)
        body = (LITELLM / name).read_bytes() if name else b'{"error": "no route"}'
        self.send_response(200 if name else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def litellm_gateway(browser: Any, server_url: str, server_env: dict[str, str]) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Lists)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fields = {
        "base_url": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "dialect": "litellm",
        "cost_unit": "usd",
        "enabled": True,
    }
    try:
        with added_gateway(browser, server_url, server_env, "LiteLLM", fields) as pk:
            yield pk
    finally:
        server.shutdown()
        server.server_close()


def test_the_picker_groups_litellm_routes_by_provider_and_leaves_out_non_chat_ones(
    alice: Any, litellm_gateway: int
) -> None:
    prefix = f"g{litellm_gateway}:"

    def listed() -> bool:  # on the first load: another process saved it (SharedVersion)
        if alice.locator(f'#model option[value="{prefix}gpt-4o"]').count():
            return True
        alice.reload()
        return False

    poll(listed, what="the picker to list the LiteLLM gateway", within=30)
    groups = alice.locator("#model optgroup")
    expect(groups.filter(has=alice.locator(f'option[value^="{prefix}"]'))).to_have_count(2)
    anthropic = alice.locator('#model optgroup[label="LiteLLM · anthropic"] option')
    expect(anthropic).to_have_text(["claude-sonnet"])
    openai = alice.locator('#model optgroup[label="LiteLLM · openai"] option')
    expect(openai).to_have_text(["gpt-4o", "local-llama"])
    for model in ("text-embedding-3-small", "dall-e-3"):
        expect(alice.locator(f'#model option[value="{prefix}{model}"]')).to_have_count(0)

    alice.get_by_label("Model").select_option(f"{prefix}gpt-4o")
    expect(alice.locator("[data-selected-model]")).to_have_text("gpt-4o")
    expect(alice.locator(".picker-gateway")).to_have_text("on LiteLLM")

    def opened(page: Any) -> None:  # the native drop-down is not in a screenshot; a list box is
        page.eval_on_selector("#model", "el => { el.size = 12; el.scrollTop = el.scrollHeight; }")

    screenshots(alice, "model-picker", opened)


def test_the_emulators_picker_groups_chat_and_image_models_and_leaves_out_the_title_model(
    alice: Any,
) -> None:
    chats = alice.locator('#model optgroup:not([label$="· images"]) option')
    expect(chats.filter(has_text="Emulator: chat").first).to_be_attached()
    expect(chats.filter(has_text="Emulator: audio").first).to_be_attached()  # answers with audio
    for model in ("emulator/title", "emulator/image"):
        expect(
            alice.locator(f'#model optgroup:not([label$="· images"]) option[value$=":{model}"]')
        ).to_have_count(0)
    images = alice.locator('#model optgroup[label$="· images"]')
    expect(images.first).to_be_attached()
    expect(images.locator('option[value$=":emulator/image"]').first).to_be_attached()
    expect(images.locator('option:not([value$=":emulator/image"])')).to_have_count(0)

    def opened(page: Any) -> None:
        page.eval_on_selector("#model", "el => { el.size = 14; }")
        page.eval_on_selector('#model optgroup[label$="· images"]', "el => el.scrollIntoView()")

    screenshots(alice, "model-picker-emulator", opened)


@pytest.fixture(scope="module")
def nodul_gateway(
    browser: Any, server_url: str, server_env: dict[str, str], paced_emulator: str
) -> Iterator[int]:
    """The emulator's Nodul dialect as a second gateway, named as a fresh install names it."""
    fields = {
        "base_url": paced_emulator + DIALECTS["nodul"].emulator_path,
        "dialect": "nodul",
        "cost_unit": DIALECTS["nodul"].default_unit,
        "enabled": True,
    }
    with added_gateway(browser, server_url, server_env, "Emulator (Nodul)", fields) as pk:
        yield pk


def test_each_gateway_is_named_once_beside_the_picker_at_every_size(
    alice: Any, nodul_gateway: int
) -> None:
    """The review's "Emulator: chat (Emulator (Nodul))", cut to "Emulator: chat (Emulat" on a
    phone: an option says its model, its group and the line beside the picker its gateway."""
    value = f"g{nodul_gateway}:emulator/chat"

    def listed() -> bool:  # on the first load: another process saved it (SharedVersion)
        if alice.locator(f'#model option[value="{value}"]').count():
            return True
        alice.reload()
        return False

    poll(listed, what="the picker to list the Nodul gateway", within=30)
    alice.get_by_label("Model").select_option(value)
    expect(alice.locator(f'#model option[value="{value}"]')).to_have_text("Emulator: chat")
    nodul = alice.locator('#model optgroup[label="Emulator (Nodul)"]')
    expect(nodul.locator(f'option[value="{value}"]')).to_have_count(1)
    gateway = alice.locator(".picker-gateway")
    expect(gateway).to_have_text("on Emulator (Nodul)")
    expect(alice.locator(".first-model")).to_have_text(
        "It goes to Emulator: chat on Emulator (Nodul); choose another in the Model list."
    )
    expect(alice.locator(".picker-row")).not_to_contain_text("{")  # no template text shows
    for width, height in ((1280, 800), (390, 844)):
        alice.set_viewport_size({"width": width, "height": height})
        expect(gateway).to_be_in_viewport()
        box = gateway.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= width, "the gateway's name is not cut off"
    alice.set_viewport_size({"width": 1280, "height": 800})
    screenshots(alice, "model-picker-gateways")
