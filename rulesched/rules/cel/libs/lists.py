"""Kubernetes' lists library (k8s.io/apiserver/pkg/cel/library/lists.go): `isSorted`, `sum`, `min`,
`max`, `indexOf`, `lastIndexOf` on lists of comparable values; equality is CEL's (`library.cel_equal`).

`l.min()` and `l.max()` are compiled as `l[rulesched_argmin(l)]` (`rules.cel.rewrite`): the element
itself is then the result, whatever its type (cel-cpp cannot take a timestamp back from Python). For
the same reason `l.sum()` of durations is compiled as `duration(string(rulesched_sum_nanos(l)) + 'ns')`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from rulesched.rules.cel.library import LibraryError, Overload, cel_equal, global_, member

_INT64 = range(-(2**63), 2**63)


ARGMIN, ARGMAX = "rulesched_argmin", "rulesched_argmax"
SUM, SUM_IS_DURATION, SUM_NANOS = "rulesched_sum", "rulesched_sum_is_duration", "rulesched_sum_nanos"


def _ordered(items: list[Any], operation: str, pick: Callable[[Any, Any], bool]) -> int:
    """The index of the first smallest (or largest) element."""
    if not items:
        raise LibraryError(f"{operation} called on empty list")
    if any(isinstance(item, (list, dict)) or item is None for item in items):
        raise LibraryError(f"no such overload: {operation} of a list of lists, maps or nulls, which do not compare")
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
    """The sum of numbers (a list of durations is summed by `sum_nanos`)."""
    if not items:
        return 0
    first = items[0]
    if isinstance(first, bool) or not isinstance(first, (int, float)):
        raise LibraryError("no such overload: sum of a list of neither numbers nor durations")
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


def of_durations(items: list[Any]) -> bool:
    return bool(items) and isinstance(items[0], datetime.timedelta)


def sum_nanos(items: list[Any]) -> int:
    """The sum of durations, in nanoseconds (to microseconds: the precision both engines hand over)."""
    if not all(isinstance(item, datetime.timedelta) for item in items):
        raise LibraryError("no such overload: sum of mixed types")
    total = sum(items, datetime.timedelta(0))
    return (total.days * 86_400 + total.seconds) * 10**9 + total.microseconds * 1000


def index_of(items: list[Any], value: Any) -> int:
    return next((i for i, item in enumerate(items) if cel_equal(item, value)), -1)


def last_index_of(items: list[Any], value: Any) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if cel_equal(items[i], value)), -1)


OVERLOADS: tuple[Overload, ...] = (
    member("isSorted", ("list",), "bool", is_sorted),
    global_(SUM, ("list",), "any", sum_),
    global_(SUM_IS_DURATION, ("list",), "bool", of_durations),
    global_(SUM_NANOS, ("list",), "int", sum_nanos),
    global_(ARGMIN, ("list",), "int", argmin),
    global_(ARGMAX, ("list",), "int", argmax),
    member("indexOf", ("list", "any"), "int", index_of),
    member("lastIndexOf", ("list", "any"), "int", last_index_of),
)
