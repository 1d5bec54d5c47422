"""Kubernetes' quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go).

A quantity is carried as its canonical decimal string (`quantity('1000m') == quantity('1')`), so
equality compares values. `isLessThan`, `isGreaterThan` and `compareTo` are shared with semver and
declared in `libs.ordering`.
"""

from __future__ import annotations

from decimal import Decimal

from rulesched.rules.cel.library import LibraryError, Overload, global_, member
from rulesched.rules.cel.libs.caching import keep_short
from rulesched.rules.quantity import QuantityError, canonical, parse_quantity

_INT64_MAX = 2**63 - 1


CACHED, CACHED_CHARS = 4096, 64
"""Parsed quantities kept (docs/operations/limits.md); a longer one is parsed each time it is read."""


@keep_short(CACHED, CACHED_CHARS)
def value(text: str) -> Decimal:
    """The quantity `text` denotes; `QuantityError` (a ValueError) when it is not one."""
    return parse_quantity(text)


def quantity(text: str) -> str:
    return canonical(value(text))


def is_quantity(text: str) -> bool:
    try:
        value(text)
    except QuantityError:
        return False
    return True


def compare(left: str, right: str) -> int:
    a, b = value(left), value(right)
    return (a > b) - (a < b)


def add(left: str, right: str) -> str:
    return canonical(value(left) + value(right))


def add_int(left: str, right: int) -> str:
    return canonical(value(left) + right)


def sub(left: str, right: str) -> str:
    return canonical(value(left) - value(right))


def sub_int(left: str, right: int) -> str:
    return canonical(value(left) - right)


def mul(left: str, right: int) -> str:
    return canonical(value(left) * right)


def div(left: str, right: int) -> str:
    if right == 0:
        raise LibraryError("division by zero")
    return canonical(value(left) / right)


def div_int(left: str, right: int) -> str:
    """Integer division, rounded toward zero."""
    if right == 0:
        raise LibraryError("division by zero")
    return canonical((value(left) / right).to_integral_value(rounding="ROUND_DOWN"))


def as_approximate_float(text: str) -> float:
    return float(value(text))


def is_integer(text: str) -> bool:
    number = value(text)
    return number == number.to_integral_value() and abs(number) <= _INT64_MAX


def as_integer(text: str) -> int:
    if not is_integer(text):
        raise LibraryError(f"cannot convert value to integer: quantity {text} is not an integer in int64 range")
    return int(value(text))


def sign(text: str) -> int:
    number = value(text)
    return (number > 0) - (number < 0)


OVERLOADS: tuple[Overload, ...] = (
    global_("quantity", ("string",), "string", quantity),
    global_("isQuantity", ("string",), "bool", is_quantity),
    member("add", ("string", "string"), "string", add),
    member("add", ("string", "int"), "string", add_int),
    member("sub", ("string", "string"), "string", sub),
    member("sub", ("string", "int"), "string", sub_int),
    member("mul", ("string", "int"), "string", mul),
    member("div", ("string", "int"), "string", div),
    member("divInt", ("string", "int"), "string", div_int),
    member("asApproximateFloat", ("string",), "double", as_approximate_float),
    member("asInteger", ("string",), "int", as_integer),
    member("isInteger", ("string",), "bool", is_integer),
    member("sign", ("string",), "int", sign),
)
