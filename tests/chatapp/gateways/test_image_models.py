"""Which models generate images, how many images a user may ask for, and the prompt."""

from __future__ import annotations

import pytest

from chatapp.gateways.configs import GatewayConfig
from chatapp.gateways.image_models import generates_images, image_count, image_prompt, makes_images
from gateway_client import ModelInfo

NUMES = GatewayConfig(1, "Numes", "https://api.numes.ai/api/v1", "k", "numes", "usd", False)
OSMEXO = GatewayConfig(2, "Osmexo", "https://osmexo.example/v1", "k", "osmexo", "usd", False)
GUESSED = GatewayConfig(3, "Numes too", "http://127.0.0.1:9/numes/api/v1", "k", None, "usd", True)
PAINTER = ModelInfo("emulator/image", output_modalities=("image",))
WRITER = ModelInfo("emulator/chat", output_modalities=("text",))
UNSAID = ModelInfo("emulator/image")


@pytest.mark.parametrize(
    ("config", "info", "expected"),
    [
        (NUMES, PAINTER, True),
        (GUESSED, PAINTER, True),
        (OSMEXO, PAINTER, False),  # no `/images` there: the same ID stays a chat model
        (NUMES, WRITER, False),
        (NUMES, UNSAID, False),
    ],
)
def test_an_image_model_outputs_images_on_a_gateway_with_images(
    config: GatewayConfig, info: ModelInfo, expected: bool
) -> None:
    assert generates_images(config, info) is expected


def test_a_turn_makes_images_with_a_listed_image_model() -> None:
    listed = [PAINTER, WRITER]
    assert makes_images(NUMES, "emulator/image", listed) is True
    assert makes_images(NUMES, "emulator/chat", listed) is False
    assert makes_images(NUMES, "emulator/unlisted", listed) is False
    assert makes_images(OSMEXO, "emulator/image", listed) is False


@pytest.mark.parametrize(
    ("posted", "count"), [("1", 1), ("2", 2), ("4", 4), ("3", 1), ("", 1), ("-2", 1), ("40", 1)]
)
def test_the_image_count_is_one_the_composer_offers(posted: str, count: int) -> None:
    assert image_count(posted) == count


def test_the_prompt_is_the_last_user_message() -> None:
    messages = [
        {"role": "user", "content": "a lighthouse"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "a lighthouse at dusk"},
    ]
    assert image_prompt(messages) == "a lighthouse at dusk"
    assert image_prompt([]) == ""
