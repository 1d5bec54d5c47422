"""Kubernetes CEL functions, written once in plain Python and registered with every engine.

A quantity is carried as its canonical decimal string (`quantity('1000m') == quantity('1')`), so
both engines represent it the same way and equality compares values. The member functions follow
the Kubernetes quantity library: `isLessThan`, `isGreaterThan`, `compareTo`, `add`, `sub`,
`asApproximateFloat`, `asInteger`, `isInteger`, `sign`; plus `isQuantity()` and the Kubernetes regex
library, `find()` and `findAll()`.

Regular expressions have RE2 semantics on both engines (as `matches()` has in cel-cpp and cel-go): the
`google-re2` package matches in time linear in the text, whatever the pattern, and refuses what RE2
cannot promise that for (lookaround, backreferences) — so a pod label chosen by whoever creates pods
cannot make a rule take seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal

import re2

from rulesched.rules.quantity import QuantityError, canonical, parse_quantity

TypeName = Literal["string", "int", "double", "bool", "list_string"]

_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Overload:
    """One typed signature of a library function and the Python that implements it."""

    function: str
    overload_id: str
    parameters: tuple[TypeName, ...]
    result: TypeName
    member: bool
    impl: Callable[..., Any]


@lru_cache(maxsize=4096)
def _value(text: str) -> Decimal:
    return parse_quantity(text)


def quantity(text: str) -> str:
    return canonical(_value(text))


def is_quantity(text: str) -> bool:
    try:
        _value(text)
    except QuantityError:
        return False
    return True


def compare_to(left: str, right: str) -> int:
    a, b = _value(left), _value(right)
    return (a > b) - (a < b)


def is_less_than(left: str, right: str) -> bool:
    return _value(left) < _value(right)


def is_greater_than(left: str, right: str) -> bool:
    return _value(left) > _value(right)


def add(left: str, right: str) -> str:
    return canonical(_value(left) + _value(right))


def add_int(left: str, right: int) -> str:
    return canonical(_value(left) + right)


def sub(left: str, right: str) -> str:
    return canonical(_value(left) - _value(right))


def sub_int(left: str, right: int) -> str:
    return canonical(_value(left) - right)


def as_approximate_float(text: str) -> float:
    return float(_value(text))


def is_integer(text: str) -> bool:
    value = _value(text)
    return value == value.to_integral_value() and abs(value) <= _INT64_MAX


def as_integer(text: str) -> int:
    if not is_integer(text):
        raise QuantityError(f"quantity {text} is not an integer in int64 range")
    return int(_value(text))


def sign(text: str) -> int:
    value = _value(text)
    return (value > 0) - (value < 0)


class RegexError(ValueError):
    """A pattern RE2 refuses."""


_QUIET = re2.Options()
_QUIET.log_errors = False  # a refused pattern is reported to the rule's author, not logged by RE2's C++


@lru_cache(maxsize=256)
def regex(pattern: str) -> Any:
    """`pattern` compiled by RE2; `RegexError` with RE2's reason when it is not a valid RE2 pattern."""
    try:
        return re2.compile(pattern, _QUIET)
    except re2.error as error:
        reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        raise RegexError(f"invalid regular expression {str(pattern)!r}: {reason}") from None


def matches(text: str, pattern: str) -> bool:
    """CEL's `matches()`: whether `pattern` matches anywhere in `text` (cel-cpp's own is RE2 too)."""
    return regex(pattern).search(text) is not None


def find(text: str, pattern: str) -> str:
    match = regex(pattern).search(text)
    return match.group(0) if match else ""


def find_all(text: str, pattern: str) -> list[str]:
    return [match.group(0) for match in regex(pattern).finditer(text)]


def find_all_limit(text: str, pattern: str, limit: int) -> list[str]:
    """At most `limit` matches; a negative limit means all of them (Kubernetes' `findAll(regex, n)`)."""
    if limit < 0:
        return find_all(text, pattern)
    found: list[str] = []
    for match in regex(pattern).finditer(text):
        if len(found) >= limit:
            break
        found.append(match.group(0))
    return found


OVERLOADS: tuple[Overload, ...] = (
    Overload("quantity", "quantity_string", ("string",), "string", False, quantity),
    Overload("isQuantity", "is_quantity_string", ("string",), "bool", False, is_quantity),
    Overload("compareTo", "quantity_compare_to", ("string", "string"), "int", True, compare_to),
    Overload("isLessThan", "quantity_less_than", ("string", "string"), "bool", True, is_less_than),
    Overload("isGreaterThan", "quantity_greater_than", ("string", "string"), "bool", True, is_greater_than),
    Overload("add", "quantity_add", ("string", "string"), "string", True, add),
    Overload("add", "quantity_add_int", ("string", "int"), "string", True, add_int),
    Overload("sub", "quantity_sub", ("string", "string"), "string", True, sub),
    Overload("sub", "quantity_sub_int", ("string", "int"), "string", True, sub_int),
    Overload("asApproximateFloat", "quantity_as_float", ("string",), "double", True, as_approximate_float),
    Overload("asInteger", "quantity_as_integer", ("string",), "int", True, as_integer),
    Overload("isInteger", "quantity_is_integer", ("string",), "bool", True, is_integer),
    Overload("sign", "quantity_sign", ("string",), "int", True, sign),
    Overload("find", "string_find", ("string", "string"), "string", True, find),
    Overload("findAll", "string_find_all", ("string", "string"), "list_string", True, find_all),
    Overload("findAll", "string_find_all_n", ("string", "string", "int"), "list_string", True, find_all_limit),
)
