"""Kubernetes CEL functions, written once in plain Python and registered with every engine.

A quantity is carried as its canonical decimal string (`quantity('1000m') == quantity('1')`), so
both engines represent it the same way and equality compares values. The member functions follow
the Kubernetes quantity library: `isLessThan`, `isGreaterThan`, `compareTo`, `add`, `sub`,
`asApproximateFloat`, `asInteger`, `isInteger`, `sign`; plus `isQuantity()` and the regex `find()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal

from rulesched.rules.quantity import QuantityError, canonical, parse_quantity

TypeName = Literal["string", "int", "double", "bool"]

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


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


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
)
