"""The built-in tools and the registry that runs the model's calls of them: every failure is an
`error` run whose text says what to fix, never an exception; hostile calculator input fails fast."""

from __future__ import annotations

import datetime
import json
import logging
import time
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from chatapp import tools
from chatapp.conversations import search_tool
from chatapp.conversations.models import Conversation, Message
from chatapp.tools import calculator, clock, schema_check
from chatapp.tools.base import ToolContext, ToolFailure
from chatapp.tools.calculator import CalculationError, evaluate, formatted
from chatapp.tools.models import ToolSwitch

CONTEXT = ToolContext(user_pk=1, conversation_pk=1)
EVERY = ("calculator", "current_time", "search_conversations")


def calculate(expression: str) -> dict[str, str]:
    return formatted(evaluate(expression))


def refused(expression: str) -> str:
    with pytest.raises(CalculationError) as raised:
        evaluate(expression)
    return str(raised.value)


def run(name: str, arguments: str, context: ToolContext = CONTEXT) -> tools.ToolRun:
    return tools.run_call(name, arguments, context, offered_names=EVERY)


# --- The registry ----------------------------------------------------------------------------


def test_the_registry_has_every_built_in_tool_by_name() -> None:
    """Each module's tool under its own name, none lost to a name another tool also has, in the
    order the Tools control lists them."""
    assert list(tools.registry().items()) == [
        ("calculator", calculator.TOOL),
        ("current_time", clock.TOOL),
        ("search_conversations", search_tool.TOOL),
    ]
    assert list(tools.registry()) == list(EVERY)


@pytest.mark.parametrize("tool", tools.registry().values(), ids=lambda tool: tool.name)
def test_each_schema_is_valid_json_schema_for_an_object(tool: tools.Tool) -> None:
    schema_check.check_schema(tool.parameters)  # RE2 runs its patterns
    assert tool.parameters["type"] == "object"
    assert tool.title
    assert tool.description


def test_upstream_tools_are_openai_function_tools() -> None:
    clock_tool = tools.registry()["current_time"]
    assert tools.upstream_tools([clock_tool]) == [
        {
            "type": "function",
            "function": {
                "name": "current_time",
                "description": clock_tool.description,
                "parameters": clock_tool.parameters,
            },
        }
    ]


@pytest.mark.django_db
def test_offered_keeps_the_registered_names_but_those_switched_off() -> None:
    ToolSwitch.objects.create(name="calculator", enabled=False)
    ToolSwitch.objects.create(name="current_time", enabled=True)
    chosen = ["search_conversations", "calculator", "current_time", "no_such_tool"]
    assert [tool.name for tool in tools.offered(chosen, None)] == [
        "current_time",
        "search_conversations",
    ]
    assert tools.offered([], None) == []


# --- run_call: what goes wrong is told to the model ------------------------------------------


def test_a_call_runs_and_is_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([100.0, 100.25])  # the clock when the call starts, and when it ends
    monkeypatch.setattr(tools, "time", SimpleNamespace(monotonic=lambda: next(readings)))
    result = run("calculator", '{"expression": "6*7"}')
    assert result.status == "done"
    assert json.loads(result.result) == {"expression": "6*7", "result": "42"}
    assert result.duration_ms == 250


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ('{"expression": "6*', "The arguments are not valid JSON ("),
        ("[1, 2]", "The arguments must be a JSON object, not an array."),
        ('"6*7"', "The arguments must be a JSON object, not a string."),
        ("{}", "The arguments do not match the parameters of calculator: 'expression' is a "),
        ('{"expression": 42}', "The arguments do not match the parameters of calculator at "),
        ('{"expression": "1", "x": 1}', "Additional properties are not allowed ('x' was"),
    ],
)
def test_arguments_that_are_not_a_valid_object_are_an_error_run(arguments: str, said: str) -> None:
    result = run("calculator", arguments)
    assert result.status == "error"
    assert said in result.result


def test_a_schema_error_says_where() -> None:
    result = run("calculator", '{"expression": 42}')
    assert result.result == (
        "The arguments do not match the parameters of calculator at $.expression: "
        "42 is not of type 'string'."
    )


def test_empty_arguments_are_an_empty_object() -> None:
    assert run("current_time", "").status == "done"
    assert run("current_time", "  ").status == "done"


def test_an_unknown_or_not_offered_tool_is_an_error_run_naming_what_is_offered() -> None:
    unknown = tools.run_call("rm_rf", "{}", CONTEXT, offered_names=["calculator"])
    assert unknown.status == "error"
    assert unknown.result == "There is no tool named 'rm_rf' here. The tools offered: calculator."
    not_offered = tools.run_call("current_time", "{}", CONTEXT, offered_names=["calculator"])
    assert not_offered.status == "error"
    assert "There is no tool named 'current_time' here." in not_offered.result


def test_a_tool_failure_is_its_message() -> None:
    result = run("current_time", '{"time_zone": "Mars/Olympus"}')
    assert result.status == "error"
    assert result.result.startswith("Unknown time zone 'Mars/Olympus'")


def test_a_crashing_tool_is_logged_and_the_model_told_it_failed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def crash(arguments: dict[str, Any], context: ToolContext) -> str:
        raise KeyError("internal detail")

    monkeypatch.setattr(clock.TOOL, "run", crash)
    with caplog.at_level(logging.ERROR, logger="chatapp.tools"):
        result = run("current_time", "{}")
    assert result.status == "error"
    assert result.result == "The tool current_time failed (an internal error). Answer without it."
    (record,) = caplog.records
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError


def test_a_long_result_is_cut_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock.TOOL, "run", lambda arguments, context: "x" * 50_000)
    result = run("current_time", "{}")
    assert result.status == "done"
    assert result.result.startswith("x" * tools.MAX_RESULT + "\n[Cut: the result was 50,000")
    assert len(result.result) < tools.MAX_RESULT + 100


def test_pretty_arguments_indents_an_object_and_flags_anything_else() -> None:
    assert tools.pretty_arguments('{"a":1,"b":[2]}') == (
        '{\n  "a": 1,\n  "b": [\n    2\n  ]\n}',
        True,
    )
    assert tools.pretty_arguments('{"a":') == ('{"a":', False)
    assert tools.pretty_arguments("[1]") == ("[1]", False)
    assert tools.pretty_arguments("") == ("{}", True)


# --- The calculator --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("6*7", "42"),
        ("1 + 2 * 3", "7"),
        ("(1 + 2) * 3", "9"),
        ("2 ** 10", "1024"),
        ("2 ^ 3 ^ 2", "512"),  # powers bind right to left
        ("-2 ** 2", "-4"),
        ("2 * -3", "-6"),
        ("--3", "3"),
        ("0.1 + 0.2", "0.3"),  # exact, not 0.30000000000000004
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),
        ("7 % 3", "1"),
        ("1.5e3", "1500"),
        ("2e-3", "0.002"),
        (".5", "0.5"),
        ("2 ** -2", "0.25"),
        ("sqrt(16)", "4"),
        ("sqrt(2)", "1.4142135623730951"),
        ("sqrt(9/4)", "1.5"),
        ("abs(-3)", "3"),
        ("round(2.567, 2)", "2.57"),
        ("floor(-2.5)", "-3"),
        ("ceil(2.1)", "3"),
        ("log(1000)", "3"),
        ("log(8, 2)", "3"),
        ("ln(e)", "1"),
        ("exp(0)", "1"),
        ("cos(0)", "1"),
        ("sin(pi / 2)", "1"),
        ("tan(0)", "0"),
        ("min(3, 1/2, 2)", "0.5"),
        ("max(3, 1/2, 2)", "3"),
        ("tau / 2", "3.141592653589793"),
        ("PI", "3.141592653589793"),
        ("10 ** 999", "1" + "0" * 999),
        ("log(10 ** 900)", "900"),
    ],
)
def test_the_calculator_evaluates_arithmetic(expression: str, value: str) -> None:
    assert calculate(expression)["result"] == value


def test_a_fraction_is_shown_in_digits_and_exactly() -> None:
    assert calculate("1/3") == {"result": "0.33333333333333333", "exact": "1/3"}
    assert calculate("1/4") == {"result": "0.25"}


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("", "The expression is empty."),
        ("1 +", "The expression ends early."),
        ("1/0", "Division by zero."),
        ("5 // 0", "Division by zero."),
        ("5 % 0", "Division by zero."),
        ("0 ** -1", "Division by zero (zero to a negative power)."),
        ("2 3", "Unexpected '3' at position 3: expected an operator or the end."),
        ("(1 + 2", "Expected ')' at position 7, found the end."),
        ("1 + 2)", "Unexpected ')' at position 6: expected an operator or the end."),
        ("3 $ 4", "Unexpected character '$' at position 3."),
        ("__import__ + 1", "Unknown name '__import__' at position 1."),
        ("open('x')", 'Unexpected character "\'" at position 6.'),
        ("x + 1", "Unknown name 'x' at position 1. Known constants: pi, e, tau; functions: sqrt,"),
        ("sqrt", "sqrt is a function: write sqrt(x)."),
        ("pi(2)", "pi is a constant, not a function."),
        ("sqrt(1, 2)", "sqrt takes 1 argument(s), not 2."),
        ("sqrt(-1)", "sqrt needs a number that is not negative."),
        ("ln(0)", "The logarithm needs a positive number."),
        ("log(8, 1)", "The logarithm's base must be positive and not 1."),
        ("(-8) ** 0.5", "A negative number to a fractional power is not a real number."),
        ("exp(1000)", "The result is too large or not a number."),
        ("e ** 1000", "The result is too large or not a number."),
        ("1e99999999999", "The number 1e99999999999 is too large or too small."),
        ("10 ** 1001", "The result is too large (the limit is about 1,000 digits)."),
        ("round(1.5, 1000)", "round's second argument is a whole number of digits, at most 100."),
    ],
)
def test_what_cannot_be_evaluated_is_said_readably(expression: str, said: str) -> None:
    assert refused(expression).startswith(said)


COMPUTING = 5.0  # seconds: what no refusal takes, and any of these computed would exceed


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9",
        "9^9^9^9",
        "2 ** 10 ** 100",
        "(1/3) ** -100000",
        "2.5 ** 1e300",
        "99999 ** 99999 ** 99999",
        "(10 ** 999) * (10 ** 999)",
    ],
)
def test_huge_results_are_refused_before_they_are_computed(expression: str) -> None:
    started = time.perf_counter()
    refused(expression)
    # Not a speed measure (that is a benchmark's): computing any of these would take minutes to
    # forever, so even a loaded machine tells refusing from computing well inside this bound.
    assert time.perf_counter() - started < COMPUTING


@pytest.mark.parametrize(
    "expression",
    ["(" * 10_000, "(" * 500 + "1" + ")" * 500, "-" * 900 + "1", "2^" * 300 + "2", "sqrt(" * 200],
    ids=["10000 opening", "500 nested", "900 signs", "300 powers", "200 calls"],
)
def test_deep_nesting_and_long_input_fail_fast_without_recursion_errors(expression: str) -> None:
    started = time.perf_counter()
    said = refused(expression)
    assert time.perf_counter() - started < COMPUTING
    assert said in (
        "The expression is too long (at most 1,000 characters).",
        "The expression is nested too deeply (over 100 levels).",
    )


def test_long_flat_expressions_within_the_cap_are_fine() -> None:
    assert calculate("+".join(["1"] * 500))["result"] == "500"


def test_the_calculator_tool_runs_through_the_registry_with_its_errors() -> None:
    assert json.loads(run("calculator", '{"expression": "2^0.5"}').result) == {
        "expression": "2^0.5",
        "result": "1.4142135623730951",
    }
    failed = run("calculator", '{"expression": "1/0"}')
    assert (failed.status, failed.result) == ("error", "Division by zero.")
    assert issubclass(CalculationError, ToolFailure)
    assert calculator.TOOL.parameters["properties"]["expression"]["maxLength"] == 1_000


# --- The clock -------------------------------------------------------------------------------


def test_the_clock_says_the_time_in_the_servers_zone_by_default(settings: Any) -> None:
    settings.TIME_ZONE = "Asia/Kolkata"
    before = timezone.now()
    said = json.loads(run("current_time", "{}").result)
    moment = datetime.datetime.fromisoformat(said["datetime"])
    assert before.replace(microsecond=0) <= moment <= timezone.now()
    assert said["time_zone"] == "Asia/Kolkata"
    assert said["utc_offset"] == "+05:30"
    assert said["abbreviation"] == "IST"
    assert said["weekday"] == moment.astimezone(ZoneInfo("Asia/Kolkata")).strftime("%A")


@pytest.mark.parametrize(
    ("zone", "offsets"),
    [("UTC", {"+00:00"}), ("America/St_Johns", {"-03:30", "-02:30"}), ("Asia/Tokyo", {"+09:00"})],
)
def test_the_clock_takes_an_iana_zone(zone: str, offsets: set[str]) -> None:
    said = json.loads(run("current_time", json.dumps({"time_zone": zone})).result)
    assert said["time_zone"] == zone
    assert said["utc_offset"] in offsets
    assert said["datetime"].endswith(said["utc_offset"])


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "America", "/etc/localtime"])
def test_a_zone_that_is_not_one_is_named_in_the_error(zone: str) -> None:
    with pytest.raises(ToolFailure) as raised:
        clock.zone_named(zone)
    assert str(raised.value).startswith(f"Unknown time zone {zone!r}: use an IANA name")


# --- Searching the user's conversations ------------------------------------------------------


def conversation(user: Any, title: str, *texts: str) -> Conversation:
    made = Conversation.objects.create(user=user, title=title)
    parent = None
    for text in texts:
        parent = Message.objects.create(
            conversation=made, role=Message.Role.USER, content=text, parent=parent
        )
    return made


def searched(user: Any, arguments: dict[str, Any], conversation_pk: int = 0) -> dict[str, Any]:
    context = ToolContext(user_pk=user.pk, conversation_pk=conversation_pk)
    result = run("search_conversations", json.dumps(arguments), context)
    assert result.status == "done", result.result
    found: dict[str, Any] = json.loads(result.result)
    return found


@pytest.mark.django_db
def test_search_finds_the_users_conversations_with_titles_dates_and_snippets(alice: Any) -> None:
    lisbon = conversation(alice, "Trip <planning>", "Trams in Lisbon & the funicular")
    conversation(alice, "Bread", "sourdough starter")
    found = searched(alice, {"query": "lisbon"})
    assert found["query"] == "lisbon"
    assert found["results"] == [
        {
            "conversation_id": lisbon.pk,
            "title": "Trip <planning>",  # plain text for the model, not the sidebar's HTML
            "updated": timezone.localdate(lisbon.updated_at).isoformat(),
            "snippet": "Trams in Lisbon & the funicular",
        }
    ]


@pytest.mark.django_db
def test_search_never_shows_another_users_conversations(alice: Any, bob: Any) -> None:
    conversation(bob, "Bob's secret otters", "otters everywhere")
    mine = conversation(alice, "Otters", "sea otters")
    assert [hit["conversation_id"] for hit in searched(alice, {"query": "otters"})["results"]] == [
        mine.pk
    ]
    none = searched(alice, {"query": "secret"})
    assert none["results"] == []
    assert none["note"] == "No other conversation matches; try fewer or other words."


@pytest.mark.django_db
def test_search_leaves_out_the_conversation_being_answered_and_keeps_to_the_limit(
    alice: Any,
) -> None:
    current = conversation(alice, "Otters now", "tell me about otters")
    others = [conversation(alice, f"Otters {n}", "otters") for n in range(4)]
    found = searched(alice, {"query": "otters", "limit": 3}, conversation_pk=current.pk)
    ids = [hit["conversation_id"] for hit in found["results"]]
    assert len(ids) == 3
    assert current.pk not in ids
    assert set(ids) <= {other.pk for other in others}


@pytest.mark.django_db
def test_search_limits_are_the_schemas(alice: Any) -> None:
    context = ToolContext(user_pk=alice.pk, conversation_pk=0)
    too_many = run("search_conversations", '{"query": "x", "limit": 500}', context)
    assert too_many.status == "error"
    assert "500 is greater than the maximum of 20" in too_many.result
    assert search_tool.TOOL.parameters["required"] == ["query"]
