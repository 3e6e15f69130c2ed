"""chatapp reads every fact about a dialect from `gateway_client.dialects.DIALECTS`: the choices
are the table's, and a fifth entry (patched in) is picked up by the default units, the request
options and their summary, the image and Read aloud offers, the cost wording and the emulator's
gateways, with nothing else changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from chatapp.conversations.request_options import (
    RequestOptions,
    stream_arguments,
    summary,
    upstream_tools,
)
from chatapp.costs import costing
from chatapp.costs.models import Generation
from chatapp.gateways import configs
from chatapp.gateways.configs import GatewayConfig
from chatapp.gateways.image_models import serves_images
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import CostUnit, default_unit
from chatapp.read_aloud.offer import speech_for
from gateway_client.dialects import DIALECTS, DialectFacts, Timeouts

FIFTH = DialectFacts(
    name="quinto",
    title="Quinto",
    base_path="/v2",
    url_hints=("quinto",),
    timeouts=Timeouts(first_token=30.0, idle=20.0, total=300.0),
    default_unit="pnp",
    reasoning_field="reasoning",
    effort_field="reasoning_effort",
    tools=False,
    images=True,
    speech=True,
    generation_records=True,
    streams_usage=False,
    free_errors=(("no_slot", "no slot was free"),),
    free_before_output=(("went_quiet", "quiet before any token"),),
    emulator_serves=True,
)
QUINTO_URL = "https://api.quinto.example/v2"


@pytest.fixture
def fifth(monkeypatch: pytest.MonkeyPatch) -> Iterator[DialectFacts]:
    monkeypatch.setitem(DIALECTS, FIFTH.name, FIFTH)
    configs.forget_configs()
    yield FIFTH
    configs.forget_configs()


def config(dialect: str | None, base_url: str = QUINTO_URL) -> GatewayConfig:
    return GatewayConfig(1, "Q", base_url, "k", dialect, "pnp", False, "q-tts")


def test_the_choices_are_auto_detect_and_then_the_table() -> None:
    expected = [("", "auto-detect")] + [(name, f.title) for name, f in DIALECTS.items()]
    assert Gateway.Dialect.choices == expected
    assert Gateway._meta.get_field("dialect").choices == expected


@pytest.mark.parametrize("name", DIALECTS)
def test_each_dialects_default_unit_is_its_entrys(name: str) -> None:
    assert default_unit(name) == CostUnit(DIALECTS[name].default_unit)


def test_a_fifth_dialect_bills_in_its_default_unit(fifth: DialectFacts) -> None:
    assert default_unit("quinto") == CostUnit.PNP


def test_a_fifth_dialect_is_sent_its_effort_in_its_own_field_and_no_tools(
    fifth: DialectFacts,
) -> None:
    options = RequestOptions(reasoning_effort="high", tools=("calculator",))
    arguments = stream_arguments(options, "quinto", [])
    assert arguments["reasoning_effort"] == "high"
    assert "reasoning" not in arguments
    assert upstream_tools(options, "quinto", None) == ()


def test_without_an_effort_field_a_fifth_dialect_is_sent_no_effort(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(DIALECTS, "quinto", dataclasses.replace(FIFTH, effort_field=None))
    arguments = stream_arguments(RequestOptions(reasoning_effort="high"), "quinto", [])
    assert set(arguments) == {"messages", "max_tokens"}
    assert summary(RequestOptions(reasoning_effort="high"), "quinto", None) == (
        "effort high (not sent: Quinto takes none)"
    )


@pytest.mark.django_db
def test_the_summary_says_a_fifth_dialect_takes_no_tools(fifth: DialectFacts) -> None:
    line = summary(RequestOptions(reasoning_effort="low", tools=("calculator",)), "quinto", None)
    assert line == "effort low · tools: calculator (not sent: Quinto takes none)"


def test_a_fifth_dialect_set_or_guessed_serves_images(fifth: DialectFacts) -> None:
    assert serves_images(config("quinto"))
    assert serves_images(config(None))
    assert not serves_images(config(None, "https://elsewhere.example/v1"))


@pytest.mark.django_db
def test_a_fifth_dialect_with_speech_reads_aloud(fifth: DialectFacts, settings: Any) -> None:
    settings.CHAT_KEY_ENV_ALLOWED = ("HOME",)
    row = Gateway.objects.create(
        name="Quinto", base_url=QUINTO_URL, dialect="", cost_unit="pnp",
        speech_model="q-tts", api_key_env="HOME",
    )  # fmt: skip
    setup = speech_for(row.pk)
    assert setup is not None
    assert (setup.config.pk, setup.dialect, setup.model) == (row.pk, "quinto", "q-tts")


def test_the_cost_wording_of_a_fifth_dialect_is_its_entrys(fifth: DialectFacts) -> None:
    assert costing.record_expected(Generation(dialect="quinto", upstream_id="q-1"))
    assert not costing.record_expected(Generation(dialect="osmexo", upstream_id="o-1"))
    refused = Generation(dialect="quinto", upstream_id="q-2", error_code="no_slot")
    assert costing.not_billed_reason(refused, delivered_output=True) == (
        "no slot was free (Quinto bills nothing for no_slot)"
    )
    quiet = Generation(dialect="quinto", upstream_id="q-3", error_code="went_quiet")
    assert costing.not_billed_reason(quiet, delivered_output=True) is None
    assert costing.not_billed_reason(quiet, delivered_output=False) == (
        "quiet before any token (Quinto bills nothing then)"
    )
    unpriced = Generation(dialect="quinto", model="q-chat")
    costing.estimate_or_explain(unpriced, None)
    assert (
        unpriced.cost_note == "Quinto streams report no usage and no price is configured for q-chat"
    )
    read_aloud = Generation(dialect="quinto", model="q-tts", kind="speech")
    costing.estimate_or_explain(read_aloud, None)
    assert read_aloud.cost_note.startswith("Quinto reported no cost for this ")


@pytest.mark.django_db
def test_the_emulators_gateways_are_the_tables(fifth: DialectFacts) -> None:
    rows = configs.add_emulator_gateways()
    assert [row.dialect for row in rows] == [d.name for d in DIALECTS.values() if d.emulator_serves]
    assert [row.dialect for row in rows][-1] == "quinto"
    for row in rows:
        facts = DIALECTS[row.dialect]
        assert (row.base_url, row.cost_unit) == (facts.emulator_path, facts.default_unit)
        assert bool(row.speech_model) == facts.speech
        assert row.emulated
    assert rows[-1].name == "Emulator (Quinto)"


@pytest.mark.parametrize(
    ("dialect", "sent"),
    [
        ("numes", {"reasoning": {"effort": "high"}}),
        ("openrouter", {"reasoning": {"effort": "high"}}),
        ("litellm", {"reasoning_effort": "high"}),
        ("vllm", {"reasoning_effort": "high"}),
        ("ollama", {"reasoning_effort": "high"}),
        ("llamacpp", {}),
        ("", {}),
    ],
)
def test_an_effort_goes_where_each_gateway_takes_it(dialect: str, sent: dict[str, Any]) -> None:
    arguments = stream_arguments(RequestOptions(reasoning_effort="high"), dialect, [])
    assert {k: v for k, v in arguments.items() if k not in ("messages", "max_tokens")} == sent


@pytest.mark.parametrize("dialect", ["vllm", "ollama", "llamacpp"])
def test_a_self_hosted_servers_answers_are_not_billed(dialect: str) -> None:
    generation = Generation(dialect=dialect, model="qwen3:8b")
    title = DIALECTS[dialect].title
    assert costing.not_billed_reason(generation, delivered_output=True) == (
        f"{title} runs on its operator's own hardware and bills nothing"
    )
    assert costing.not_billed_reason(Generation(dialect="litellm"), delivered_output=True) is None
