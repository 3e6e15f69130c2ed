"""A tool's schema, from an MCP server, checks the model's arguments with every pattern run by RE2:
a pattern that backtracks catastrophically under Python's `re` (`^(a+)+$` on 40 a's and a "!"
takes longer than the universe has) finishes at once, wherever in the schema it stands, with the
right verdict. The module's timeout, not a measured duration, is what fails a hang."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types

from chatapp import tools
from chatapp.tools import schema_check
from chatapp.tools.base import ToolFailure
from chatapp.tools.mcp import catalog

pytestmark = pytest.mark.timeout(20)

EVIL = "^(a+)+$"
LONG = "a" * 40 + "!"  # no match, found only after trying every way to split the a's
FITS = "a" * 40


def obj(**keywords: Any) -> dict[str, Any]:
    return {"type": "object", **keywords}


def verdict(schema: dict[str, Any], instance: Any) -> str | None:
    schema_check.check_schema(schema)
    error = schema_check.first_error(schema, instance)
    return None if error is None else error.message


@pytest.mark.parametrize(
    ("schema", "instance", "said"),
    [
        (obj(properties={"q": {"type": "string", "pattern": EVIL}}), {"q": LONG}, "does not match"),
        (obj(properties={"q": {"type": "string", "pattern": EVIL}}), {"q": FITS}, None),
        (obj(patternProperties={EVIL: {"type": "integer"}}), {FITS: "x"}, "is not of type"),
        (obj(patternProperties={EVIL: {"type": "integer"}}), {LONG: "x"}, None),
        (
            obj(patternProperties={EVIL: {}}, additionalProperties=False),
            {LONG: 1},
            "does not match any of the regexes",
        ),
        (obj(patternProperties={EVIL: {}}, additionalProperties=False), {FITS: 1}, None),
        (obj(propertyNames={"pattern": EVIL}), {LONG: 1}, "does not match"),
        (
            obj(
                **{"$defs": {"evil": {"type": "string", "pattern": EVIL}}},
                properties={"q": {"allOf": [{"$ref": "#/$defs/evil"}]}},
            ),
            {"q": LONG},
            "does not match",
        ),
        (
            obj(properties={"q": {"type": "array", "items": {"anyOf": [{"pattern": EVIL}]}}}),
            {"q": [FITS, LONG]},
            "does not match",
        ),
        (
            obj(
                properties={"q": {}},
                **{"if": {"required": ["q"]}, "then": {"properties": {"q": {"pattern": EVIL}}}},
            ),
            {"q": LONG},
            "does not match",
        ),
        # Left unchecked (jsonschema's code would run the pattern with `re`): no verdict, no hang.
        (
            obj(allOf=[{"patternProperties": {EVIL: {}}}], unevaluatedProperties=False),
            {LONG: 1},
            None,
        ),
    ],
)
def test_a_hostile_pattern_anywhere_in_a_schema_is_checked_at_once(
    schema: dict[str, Any], instance: Any, said: str | None
) -> None:
    found = verdict(schema, instance)
    if said is None:
        assert found is None
    else:
        assert found is not None
        assert said in found


def test_unevaluated_properties_are_still_checked_without_pattern_properties() -> None:
    schema = obj(properties={"a": {}}, unevaluatedProperties=False)
    assert verdict(schema, {"a": 1}) is None
    assert "Unevaluated properties are not allowed" in (verdict(schema, {"b": 1}) or "")


def test_a_pattern_re2_cannot_run_is_refused_with_its_schema() -> None:
    for pattern in ("(?=a)a", r"(a)\1", "a{2000}"):
        with pytest.raises(schema_check.SchemaError):
            schema_check.check_schema(obj(properties={"q": {"pattern": pattern}}))
        with pytest.raises(schema_check.SchemaError):
            schema_check.check_schema(obj(patternProperties={pattern: {}}))


def test_a_patterns_surrogate_or_the_arguments_is_no_crash() -> None:
    with pytest.raises(schema_check.SchemaError):
        schema_check.check_schema(obj(properties={"q": {"pattern": "\ud800"}}))
    schema = obj(properties={"q": {"pattern": "^a"}})
    assert "does not match" in (verdict(schema, {"q": "\ud800"}) or "")


def test_the_mcp_catalog_keeps_a_hostile_pattern_s_tool_and_refuses_a_lookahead() -> None:
    evil = obj(properties={"q": {"type": "string", "pattern": EVIL}})
    kept, refused = catalog.listed(
        [
            types.Tool(name="evil", inputSchema=evil),
            types.Tool(name="ahead", inputSchema=obj(properties={"q": {"pattern": "(?=x)"}})),
        ],
        "p",
    )
    assert [entry["name"] for entry in kept] == ["evil"]
    assert refused == [
        "ahead: its input schema is not valid (the pattern '(?=x)' is not one RE2 runs: no "
        "lookaround, no back-reference, repeats up to 1,000)"
    ]


def test_a_model_s_call_of_a_hostile_server_s_tool_is_refused_at_once() -> None:
    """The check an MCP call makes before asking its server (`chatapp.tools.mcp.calls._prepare`)."""
    tool = catalog.McpTool(
        name="p__evil",
        title="evil",
        about="",
        description="",
        parameters=obj(properties={"q": {"type": "string", "pattern": EVIL}}),
        server_pk=1,
        server_name="p",
        remote_name="evil",
    )
    known = {tool.name: tool}
    with pytest.raises(ToolFailure, match="does not match"):
        tools.checked_call(tool.name, f'{{"q": "{"a" * 28}!"}}', [tool.name], known)
    assert tools.checked_call(tool.name, f'{{"q": "{FITS}"}}', [tool.name], known)[1] == {"q": FITS}
