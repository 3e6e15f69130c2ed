"""The `calculator` tool: arithmetic the model would otherwise get wrong, parsed and evaluated here.

Never `eval`, `ast` or `compile`: a tokenizer and a Pratt parser that computes as it parses, so
nothing but numbers, the operators, three constants and an allow-list of functions can run. Every
way hostile input could cost time or memory is bounded before the work is done: the length of
the expression, the nesting depth (counted, so it fails long before Python's recursion limit), and
the size of every number (a power is refused when its result would be too big, from its operands'
sizes, so `9**9**9` answers at once). Arithmetic is exact on rationals (`Fraction`); constants and
the transcendental functions are floats, and a float that overflows or is not a number is refused.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

import orjson

from chatapp.tools.base import ToolContext, ToolFailure

__all__ = [
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_LENGTH",
    "TOOL",
    "CalculationError",
    "evaluate",
    "formatted",
]

MAX_LENGTH = 1_000  # characters of an expression
MAX_DEPTH = 100  # nested parentheses, signs, powers and function calls
MAX_DIGITS = 1_000  # decimal digits of any numerator or denominator
_MAX_BITS = math.floor(MAX_DIGITS * math.log2(10))
_TOO_LARGE = f"The result is too large (the limit is about {MAX_DIGITS:,} digits)."

type Number = Fraction | float

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}

_TOKEN = re.compile(
    r"(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<op>\*\*|//|[-+*/%^(),])"
)
# Binding power of each infix operator; powers bind right to left.
_INFIX = {"+": 10, "-": 10, "*": 20, "/": 20, "//": 20, "%": 20, "**": 40, "^": 40}
_PREFIX = 30  # unary minus and plus: -2**2 is -(2**2), 2*-3 is 2*(-3)


class CalculationError(ToolFailure):
    """An expression the calculator cannot or will not evaluate, in words the model can fix."""


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "number", "name", "op" or "end"
    text: str
    at: int  # 1-based position in the expression, for messages


def _tokens(expression: str) -> list[_Token]:
    tokens: list[_Token] = []
    at = _after_space(expression, 0)
    while at < len(expression):
        match = _TOKEN.match(expression, at)
        if match is None or match.lastgroup is None:
            raise CalculationError(f"Unexpected character {expression[at]!r} at position {at + 1}.")
        tokens.append(_Token(match.lastgroup, match[0], at + 1))
        at = _after_space(expression, match.end())
    tokens.append(_Token("end", "", len(expression) + 1))
    return tokens


def _after_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _checked(value: Number) -> Number:
    """`value`, unless it is too big to keep or not a finite number."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CalculationError("The result is too large or not a number.")
        return value
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > _MAX_BITS:
        raise CalculationError(_TOO_LARGE)
    return value


def _float(value: Number) -> float:
    try:
        return float(value)
    except OverflowError:
        raise CalculationError("The number is too large for this function.") from None


def _power(base: Number, exponent: Number) -> Number:
    if isinstance(exponent, Fraction) and exponent.denominator == 1:
        n = exponent.numerator
        if isinstance(base, Fraction):
            if base == 0 and n < 0:
                raise CalculationError("Division by zero (zero to a negative power).")
            if base in (0, 1) or n == 0:
                return Fraction(1) if n == 0 else base
            if base == -1:
                return Fraction(-1 if n % 2 else 1)
            # The result has at least this many bits: refuse before computing it.
            smallest = max(abs(base.numerator), abs(base.denominator)).bit_length() - 1
            if smallest * abs(n) > _MAX_BITS:
                raise CalculationError(_TOO_LARGE)
            return _checked(base**n)
        if abs(n) > 1 << 64:  # a float power this large overflows or vanishes anyway
            return _checked(base ** float(n))
        return _checked(base**n)
    if base < 0:
        raise CalculationError("A negative number to a fractional power is not a real number.")
    return _checked(_float(base) ** _float(exponent))


def _divide(left: Number, right: Number, operator: str) -> Number:
    if right == 0:
        raise CalculationError("Division by zero.")
    if operator == "/":
        return _checked(left / right)
    if operator == "//":
        return _checked(Fraction(math.floor(left / right)))
    return _checked(left % right)


def _sqrt(x: Number) -> Number:
    if x < 0:
        raise CalculationError("sqrt needs a number that is not negative.")
    if isinstance(x, Fraction):
        top, bottom = math.isqrt(x.numerator), math.isqrt(x.denominator)
        if top * top == x.numerator and bottom * bottom == x.denominator:
            return Fraction(top, bottom)
    return math.sqrt(_float(x))


def _logarithm(x: Number, function: Callable[[float], float] = math.log) -> float:
    if x <= 0:
        raise CalculationError("The logarithm needs a positive number.")
    if isinstance(x, Fraction):  # exact integers of any size, where float() would overflow
        return function(x.numerator) - function(x.denominator)
    return function(x)


def _ln(x: Number) -> float:
    return _logarithm(x)


def _log(x: Number, base: Number = Fraction(10)) -> float:
    if base <= 0 or base == 1:
        raise CalculationError("The logarithm's base must be positive and not 1.")
    if base in (10, 2):  # exactly 3 for log(1000), not 2.9999999999999996
        return _logarithm(x, math.log10 if base == 10 else math.log2)
    return _logarithm(x) / _logarithm(base)


def _round(x: Number, digits: Number = Fraction(0)) -> Number:
    if not (isinstance(digits, Fraction) and digits.denominator == 1 and abs(digits) <= 100):
        raise CalculationError("round's second argument is a whole number of digits, at most 100.")
    if isinstance(x, float):
        return round(x, int(digits))
    return Fraction(round(x, int(digits)))


def _exp(x: Number) -> float:
    try:
        return math.exp(_float(x))
    except OverflowError:
        raise CalculationError("The result is too large or not a number.") from None


def _trigonometric(function: Callable[[float], float]) -> Callable[[Number], float]:
    return lambda x: function(_float(x))


def _extreme(function: Callable[..., Number]) -> Callable[..., Number]:
    return lambda *xs: function(xs)


# name -> (function, fewest arguments, most arguments or None for any number)
FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int | None]] = {
    "sqrt": (_sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "floor": (lambda x: Fraction(math.floor(x)), 1, 1),
    "ceil": (lambda x: Fraction(math.ceil(x)), 1, 1),
    "log": (_log, 1, 2),
    "ln": (_ln, 1, 1),
    "exp": (_exp, 1, 1),
    "sin": (_trigonometric(math.sin), 1, 1),
    "cos": (_trigonometric(math.cos), 1, 1),
    "tan": (_trigonometric(math.tan), 1, 1),
    "min": (_extreme(min), 1, None),
    "max": (_extreme(max), 1, None),
}


class _Parser:
    """Evaluates while it parses: `_expression` is the Pratt loop, recursing (depth-counted) only
    into parentheses, signs, the right side of powers and function arguments."""

    def __init__(self, expression: str) -> None:
        self.tokens = _tokens(expression)
        self.at = 0
        self.depth = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def expect(self, text: str) -> None:
        if self.token.text != text or self.token.kind != "op":
            raise CalculationError(f"Expected {text!r} at position {self.token.at}{self._found()}.")
        self.at += 1

    def _found(self) -> str:
        return ", found the end" if self.token.kind == "end" else f", found {self.token.text!r}"

    def parse(self) -> Number:
        value = self._expression(0)
        if self.token.kind != "end":
            raise CalculationError(
                f"Unexpected {self.token.text!r} at position {self.token.at}: "
                "expected an operator or the end."
            )
        return value

    def _expression(self, binding: int) -> Number:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise CalculationError(
                f"The expression is nested too deeply (over {MAX_DEPTH} levels)."
            )
        left = self._prefix()
        while self.token.kind == "op" and _INFIX.get(self.token.text, 0) > binding:
            operator = self.token.text
            power = _INFIX[operator]
            self.at += 1
            right = self._expression(power - 1 if power == _INFIX["**"] else power)
            left = self._infix(operator, left, right)
        self.depth -= 1
        return left

    def _prefix(self) -> Number:
        token = self.token
        self.at += 1
        match token.kind:
            case "number":
                return _number(token)
            case "name":
                return self._name(token)
            case "op" if token.text in ("-", "+"):
                value = self._expression(_PREFIX)
                return -value if token.text == "-" else value
            case "op" if token.text == "(":
                value = self._expression(0)
                self.expect(")")
                return value
            case "end":
                raise CalculationError(
                    "The expression is empty." if token.at == 1 else "The expression ends early."
                )
        raise CalculationError(f"Unexpected {token.text!r} at position {token.at}.")

    def _name(self, token: _Token) -> Number:
        name = token.text.lower()
        calling = self.token.text == "("
        if name in CONSTANTS:
            if calling:
                raise CalculationError(f"{token.text} is a constant, not a function.")
            return CONSTANTS[name]
        if name not in FUNCTIONS:
            raise CalculationError(
                f"Unknown name {token.text!r} at position {token.at}. Known constants: "
                f"{', '.join(CONSTANTS)}; functions: {', '.join(FUNCTIONS)}."
            )
        if not calling:
            raise CalculationError(f"{name} is a function: write {name}(x).")
        function, fewest, most = FUNCTIONS[name]
        self.expect("(")
        arguments = [self._expression(0)]
        while self.token.text == ",":
            self.at += 1
            arguments.append(self._expression(0))
        self.expect(")")
        if len(arguments) < fewest or (most is not None and len(arguments) > most):
            wanted = f"{fewest}" if most == fewest else f"{fewest} to {most or 'any number of'}"
            raise CalculationError(f"{name} takes {wanted} argument(s), not {len(arguments)}.")
        return _checked(function(*arguments))

    @staticmethod
    def _infix(operator: str, left: Number, right: Number) -> Number:
        match operator:
            case "+":
                return _checked(left + right)
            case "-":
                return _checked(left - right)
            case "*":
                return _checked(left * right)
            case "/" | "//" | "%":
                return _divide(left, right, operator)
        return _power(left, right)


def _number(token: _Token) -> Number:
    mantissa, _, exponent = token.text.lower().partition("e")
    if exponent and abs(int(exponent)) > MAX_DIGITS:
        raise CalculationError(f"The number {token.text} is too large or too small.")
    return _checked(Fraction(mantissa) * Fraction(10) ** int(exponent or 0))


def evaluate(expression: str) -> Number:
    """The value of `expression`; `CalculationError` saying what is wrong with it otherwise."""
    if len(expression) > MAX_LENGTH:
        raise CalculationError(f"The expression is too long (at most {MAX_LENGTH:,} characters).")
    try:
        return _Parser(expression).parse()
    except ZeroDivisionError:
        raise CalculationError("Division by zero.") from None
    except OverflowError:
        raise CalculationError("The result is too large or not a number.") from None
    except ValueError:  # a math domain error (e.g. a number too big for the function)
        raise CalculationError("The result is not a real number.") from None


def formatted(value: Number) -> dict[str, str]:
    """The result as the model is told it: decimal digits, and the exact fraction when there is
    one that the digits do not show."""
    if isinstance(value, float):
        return {
            "result": str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
        }
    if value.denominator == 1:
        return {"result": str(value.numerator)}
    decimal = Context(prec=17).divide(Decimal(value.numerator), Decimal(value.denominator))
    text = format(decimal, "f") if abs(decimal.adjusted()) < 16 else format(decimal, "e")
    result = {"result": text}
    if Fraction(text) != value:
        result["exact"] = f"{value.numerator}/{value.denominator}"
    return result


class Calculator:
    name = "calculator"
    title = "Calculator"
    about = "Exact arithmetic, powers, roots, logarithms and trigonometry."
    private = False
    description = (
        "Evaluates an arithmetic expression exactly (fractions stay exact): + - * / // % and ** "
        "or ^ for powers, parentheses, the constants pi, e and tau, and the functions "
        + ", ".join(FUNCTIONS)
        + " (log(x) is base 10, log(x, b) base b; angles in radians). Use it for any arithmetic."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "description": "The expression, e.g. (1 + 2.5) * 3^2 / sqrt(16)",
                "minLength": 1,
                "maxLength": MAX_LENGTH,
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    }

    def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        expression = str(arguments["expression"])
        value = evaluate(expression)
        return orjson.dumps({"expression": expression, **formatted(value)}).decode()


TOOL = Calculator()
