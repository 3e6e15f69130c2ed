"""Checking a tool call's arguments against the tool's JSON Schema, with every regular expression
of the schema run by RE2, in time linear in the text.

A tool's schema comes from outside (an MCP server's `tools/list`), and so do the arguments (the
model's). jsonschema runs a schema's `pattern` and `patternProperties` with Python's `re`, which
backtracks: one hostile pattern held the interpreter, and with it every page, stream and socket of
the process, for a minute on a 29-character argument, and no timeout can interrupt it. Here those
keywords (and `additionalProperties`, which reads `patternProperties`) run on RE2 instead, and a
schema is valid only if RE2 compiles each of its patterns (`check_schema`, the "regex" format), so
the catalog refuses a tool whose pattern RE2 cannot run (a lookahead, a back-reference) rather than
leaving it unchecked. `unevaluatedProperties` goes through jsonschema's own code, which runs
`patternProperties` with `re` again: under a schema that has `patternProperties` it is not checked
here (the MCP server checks its own arguments; this check only tells the model early).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import re2
from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators
from jsonschema.exceptions import SchemaError, best_match

__all__ = ["SchemaError", "check_schema", "first_error"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a pattern refused is an answer here, not a line on stderr
_BASE = Draft202012Validator


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    """The pattern compiled by RE2; `re2.error` when RE2 cannot run it."""
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8, so no RE2 pattern
        raise re2.error("not UTF-8") from None


def _search(pattern: str, text: str) -> bool:
    try:
        return _compiled(pattern).search(text) is not None
    except UnicodeEncodeError:  # no UTF-8 text matches a pattern
        return False


def _is_regex(pattern: object) -> bool:
    if isinstance(pattern, str):
        _compiled(pattern)
    return True


_FORMATS = FormatChecker(_BASE.FORMAT_CHECKER.checkers)
_FORMATS.checks("regex", raises=re2.error)(_is_regex)


def _pattern(
    validator: Draft202012Validator, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Draft202012Validator,
    patterns: Mapping[str, Any],
    instance: Any,
    schema: Mapping[str, Any],
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Draft202012Validator, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = sorted(
        (
            key
            for key in instance
            if key not in named and not any(_search(pattern, key) for pattern in patterns)
        ),
        key=str,
    )
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:  # jsonschema's own words
        listed = ", ".join(repr(extra) for extra in extras)
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(pattern) for pattern in sorted(patterns))
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


def _unchecked(
    validator: Draft202012Validator, value: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    yield from ()


_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}
# `extend` is untyped in types-jsonschema; what it makes is a validator class like its base.
_Checker: type[Draft202012Validator] = validators.extend(  # type: ignore[no-untyped-call]
    _BASE, _KEYWORDS, format_checker=_FORMATS
)
_CheckerWithoutUnevaluated: type[Draft202012Validator] = validators.extend(  # type: ignore[no-untyped-call]
    _BASE, {**_KEYWORDS, "unevaluatedProperties": _unchecked}, format_checker=_FORMATS
)


def check_schema(schema: Mapping[str, Any]) -> None:
    """`SchemaError` unless `schema` is valid Draft 2020-12 whose every pattern RE2 runs."""
    try:
        _Checker.check_schema(schema, format_checker=_FORMATS)
    except SchemaError as exc:
        if exc.validator == "format" and exc.validator_value == "regex":
            raise SchemaError(
                f"the pattern {str(exc.instance)[:24]!r} is not one RE2 runs: no lookaround, "
                "no back-reference, repeats up to 1,000"
            ) from None
        raise


def first_error(schema: Mapping[str, Any], instance: Any) -> ValidationError | None:
    """The most telling way `instance` breaks `schema` (a schema `check_schema` passed), or None
    when it does not."""
    checker = _CheckerWithoutUnevaluated if _has_pattern_properties(schema) else _Checker
    error: ValidationError | None = best_match(checker(schema).iter_errors(instance))
    return error


def _has_pattern_properties(value: Any) -> bool:
    """Whether `patternProperties` appears anywhere in `value` (as a property's name too: only
    leaving one more keyword unchecked follows from a wrong yes)."""
    if isinstance(value, dict):
        return "patternProperties" in value or any(
            _has_pattern_properties(v) for v in value.values()
        )
    if isinstance(value, list):
        return any(_has_pattern_properties(v) for v in value)
    return False
