"""Kubernetes' lists library (k8s.io/apiserver/pkg/cel/library/lists.go): `isSorted`, `sum`, `min`,
`max`, `indexOf`, `lastIndexOf` on lists of comparable values; equality is CEL's (`library.cel_equal`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from rulesched.rules.cel.library import LibraryError, Overload, cel_equal, member

_INT64 = range(-(2**63), 2**63)


def _ordered(items: list[Any], operation: str, pick: Callable[[Any, Any], bool]) -> Any:
    if not items:
        raise LibraryError(f"{operation} called on empty list")
    best = items[0]
    for item in items[1:]:
        try:
            if pick(item, best):
                best = item
        except TypeError:
            raise LibraryError(f"no such overload: {operation} of mixed types") from None
    return best


def min_(items: list[Any]) -> Any:
    return _ordered(items, "min", lambda a, b: a < b)


def max_(items: list[Any]) -> Any:
    return _ordered(items, "max", lambda a, b: a > b)


def is_sorted(items: list[Any]) -> bool:
    try:
        return all(not items[i] < items[i - 1] for i in range(1, len(items)))
    except TypeError:
        raise LibraryError("no such overload: isSorted of mixed types") from None


def sum_(items: list[Any]) -> Any:
    if not items:
        return 0
    first = items[0]
    if isinstance(first, datetime.timedelta):
        total: Any = datetime.timedelta(0)
    elif isinstance(first, float):
        total = 0.0
    else:
        total = 0
    for item in items:
        if isinstance(item, bool) or type(item) is not type(first):
            raise LibraryError("no such overload: sum of mixed types")
        total += item
    if isinstance(total, int) and total not in _INT64:
        raise LibraryError("integer overflow")
    return total


def index_of(items: list[Any], value: Any) -> int:
    return next((i for i, item in enumerate(items) if cel_equal(item, value)), -1)


def last_index_of(items: list[Any], value: Any) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if cel_equal(items[i], value)), -1)


OVERLOADS: tuple[Overload, ...] = (
    member("isSorted", ("list",), "bool", is_sorted),
    member("sum", ("list",), "any", sum_),
    member("min", ("list",), "any", min_),
    member("max", ("list",), "any", max_),
    member("indexOf", ("list", "any"), "int", index_of),
    member("lastIndexOf", ("list", "any"), "int", last_index_of),
)
