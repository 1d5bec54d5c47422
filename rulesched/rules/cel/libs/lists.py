"""Kubernetes' lists library (k8s.io/apiserver/pkg/cel/library/lists.go): `isSorted`, `sum`, `min`,
`max`, `indexOf`, `lastIndexOf` on lists of comparable values; equality is CEL's (`library.cel_equal`).

`l.min()` and `l.max()` are compiled as `l[rulesched_argmin(l)]` (`rules.cel.rewrite`): the element
itself is then the result, whatever its type (cel-cpp cannot take a timestamp back from Python).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from rulesched.rules.cel.library import LibraryError, Overload, cel_equal, global_, member

_INT64 = range(-(2**63), 2**63)


ARGMIN, ARGMAX = "rulesched_argmin", "rulesched_argmax"


def _ordered(items: list[Any], operation: str, pick: Callable[[Any, Any], bool]) -> int:
    """The index of the first smallest (or largest) element."""
    if not items:
        raise LibraryError(f"{operation} called on empty list")
    best = 0
    for index in range(1, len(items)):
        if isinstance(items[index], bool) != isinstance(items[best], bool):
            raise LibraryError(f"no such overload: {operation} of mixed types")
        try:
            if pick(items[index], items[best]):
                best = index
        except TypeError:
            raise LibraryError(f"no such overload: {operation} of mixed types") from None
    return best


def argmin(items: list[Any]) -> int:
    return _ordered(items, "min", lambda a, b: a < b)


def argmax(items: list[Any]) -> int:
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
        # cel-cpp cannot take a duration back from Python: refused alike on both engines.
        raise LibraryError("sum() of durations is not supported: sum their seconds, e.g. l.map(d, d.getSeconds())")
    if isinstance(first, float):
        total: Any = 0.0
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
    global_(ARGMIN, ("list",), "int", argmin),
    global_(ARGMAX, ("list",), "int", argmax),
    member("indexOf", ("list", "any"), "int", index_of),
    member("lastIndexOf", ("list", "any"), "int", last_index_of),
)
