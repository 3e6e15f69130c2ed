"""The dialect table: each documented gateway's entry has its emulator, and what `gateway_client`
and the emulator know of a dialect comes from its entry, so a fifth gateway is one entry plus its
emulator."""

from __future__ import annotations

import pytest

from gateway_client.dialects import (
    DIALECTS,
    DialectFacts,
    Timeouts,
    default_timeouts,
    emulated_dialects,
    facts_for,
    guess_dialect,
    titles,
)
from gateway_client.emulator.dialects import DIALECTS as EMULATED
from tests.gateway_client.test_emulator import AUTH, chat_body, http, stream

FIFTH = DialectFacts(
    name="quinto",
    title="Quinto",
    base_path="/v2",
    url_hints=("quinto",),
    timeouts=Timeouts(first_token=30.0, idle=20.0, total=300.0),
    default_unit="credits",
    reasoning_field=None,
)


SERVED = [dialect.name for dialect in emulated_dialects()]


def test_every_documented_dialect_has_its_emulator_in_the_tables_order() -> None:
    assert list(EMULATED) == SERVED == ["numes", "osmexo", "tiny", "nodul"]
    for name, emulated in EMULATED.items():
        assert emulated.facts is DIALECTS[name]
        assert (emulated.name, emulated.reasoning_field) == (name, DIALECTS[name].reasoning_field)


def test_the_names_are_the_keys_and_the_paths_are_distinct() -> None:
    assert all(name == facts.name for name, facts in DIALECTS.items())
    paths = [facts.emulator_path for facts in DIALECTS.values()]
    assert len(set(paths)) == len(paths)


@pytest.mark.parametrize("name", SERVED)
def test_each_dialect_is_guessed_from_its_emulator_path_and_timed_by_its_entry(name: str) -> None:
    facts = DIALECTS[name]
    assert guess_dialect(f"http://127.0.0.1:8100/emulator{facts.emulator_path}") == name
    assert default_timeouts(name) == facts.timeouts


def test_a_fifth_entry_is_known_guessed_and_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert facts_for("quinto") is None
    assert guess_dialect("https://api.quinto.example/v2") is None
    monkeypatch.setitem(DIALECTS, "quinto", FIFTH)
    assert facts_for("quinto") is FIFTH
    assert guess_dialect("https://api.quinto.example/v2") == "quinto"
    assert default_timeouts("quinto") == FIFTH.timeouts
    assert FIFTH.emulator_path == "/quinto/v2"


def test_an_unknown_dialect_has_no_entry_and_the_generic_timeouts() -> None:
    for unknown in (None, "", "openai"):
        assert facts_for(unknown) is None
        assert default_timeouts(unknown) == Timeouts()


def test_titles_read_as_a_phrase() -> None:
    numes, osmexo, tiny = DIALECTS["numes"], DIALECTS["osmexo"], DIALECTS["tiny"]
    assert titles([]) == ""
    assert titles([numes]) == "Numes"
    assert titles([numes, tiny]) == "Numes and tiny-3b"
    assert titles([numes, osmexo, tiny]) == "Numes, Osmexo and tiny-3b"


@pytest.mark.parametrize("name", SERVED)
async def test_the_emulator_serves_each_dialect_as_its_entry_says(
    emulator_url: str, name: str
) -> None:
    """At its path, with `/generation`, `/images` and `/audio/speech` where the entry has them: a
    route it serves answers another method with 405, one it does not serve is a 404."""
    facts = DIALECTS[name]
    base = emulator_url + facts.emulator_path
    async with http(headers=AUTH) as client:
        index = (await client.get(f"{emulator_url}/")).json()
        assert index["gateways"][name].endswith(facts.emulator_path)
        served = {}
        for route in ("generation", "images", "audio/speech"):
            response = await client.put(f"{base}/{route}")
            assert response.status_code in (404, 405), route
            served[route] = response.status_code == 405
    assert served == {
        "generation": facts.generation_records,
        "images": facts.images,
        "audio/speech": facts.speech,
    }


@pytest.mark.parametrize("name", SERVED)
async def test_the_emulators_streams_carry_reasoning_and_usage_as_the_entry_says(
    emulator_url: str, name: str
) -> None:
    facts = DIALECTS[name]
    result = await stream(emulator_url, name, chat_body("reasoning"))
    fields = {
        key
        for chunk in result.chunks
        for c in chunk.get("choices", [])
        for key in c.get("delta", {})
    }
    assert (facts.reasoning_field in fields) == (facts.reasoning_field is not None)
    assert {"reasoning", "reasoning_content"} & fields <= {facts.reasoning_field}
    assert any(chunk.get("usage") for chunk in result.chunks) == facts.streams_usage
