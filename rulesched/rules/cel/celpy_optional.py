"""Optional values for celpy, which has none (cel-go's and cel-cpp's `optional` library).

`rewrite.for_celpy` turns the syntax celpy cannot parse into calls of these functions: `m[?k]` →
`optional__index(m, k)`, `x.?f` → `optional__field(x, 'f')`, `optional.of(x)` → `optional__of(x)`.
An `Optional` holds a value or none; `hasValue()`, `value()`, `orValue(v)` and `or(o)` read it, as in
cel-go (`value()` of none is an error). Optional aggregate entries:
`[a, ?b]` and `{k: v, ?k2: o}` become `optional__list([...])` and `optional__map([...])`, every entry
then an optional, kept when it holds a value. `has(e.f)` becomes `has__field(e, 'f')`: presence as
cel-go tests it, an error when `e` is one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import celpy.evaluation
from celpy import celtypes

_MISSING = object()


class Optional:
    """An optional value: `value` is `_MISSING` for `optional.none()`."""

    __slots__ = ("value",)

    def __init__(self, value: Any = _MISSING) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Optional) and bool(self.value == other.value)

    def __hash__(self) -> int:
        return hash(id(self.value)) if self.value is not _MISSING else 0

    def __repr__(self) -> str:
        return "optional.none()" if self.value is _MISSING else f"optional.of({self.value!r})"


_NONE = Optional()


def _error(message: str) -> celpy.evaluation.CELEvalError:
    return celpy.evaluation.CELEvalError(message)


_EPOCH = celtypes.TimestampType("1970-01-01T00:00:00Z")


def _zero(value: Any) -> bool:
    """Whether `value` is its type's zero value, as cel-go's `optional.ofNonZeroValue` tells (a timestamp's
    is the epoch); celpy's numbers refuse to compare across kinds (`1.0 == 0`), so each is read as a float."""
    if isinstance(value, (celtypes.ListType, celtypes.MapType, str, bytes)):
        return len(value) == 0
    if isinstance(value, celtypes.TimestampType):
        return bool(value == _EPOCH)
    if isinstance(value, celtypes.DurationType):
        return not value
    if isinstance(value, (celtypes.BoolType, celtypes.IntType, celtypes.UintType, celtypes.DoubleType)):
        return float(value) == 0.0
    return value is None


def _select(value: Any, key: Any) -> Optional:
    if isinstance(value, celtypes.MapType):
        return Optional(value[key]) if key in value else _NONE
    if isinstance(value, celtypes.ListType) and isinstance(key, celtypes.IntType):
        return Optional(value[key]) if 0 <= key < len(value) else _NONE
    return Optional(celpy.evaluation.CELEvalError(f"no such key: {key}"))


def _optional_access(value: Any, key: Any) -> Any:
    if isinstance(value, celpy.evaluation.CELEvalError):
        return value
    if isinstance(value, Optional):
        return _NONE if value.value is _MISSING else _optional_access(value.value, key)
    return _select(value, key)


def _has_field(value: Any, name: Any) -> Any:
    """`has(value.name)`: an error `value` never reaches here (celpy passes it on as the call's result)."""
    if isinstance(value, celtypes.MapType):
        return celtypes.BoolType(name in value)
    return _error(f"no such field: {name}")


def _value(optional: Any) -> Any:
    if not isinstance(optional, Optional):
        return _error("no matching overload for 'value'")
    return _error("optional.none() dereference") if optional.value is _MISSING else optional.value


def _or_value(optional: Any, other: Any) -> Any:
    if not isinstance(optional, Optional):
        return _error("no matching overload for 'orValue'")
    return other if optional.value is _MISSING else optional.value


def _or(optional: Any, other: Any) -> Any:
    if not isinstance(optional, Optional) or not isinstance(other, Optional):
        return _error("no matching overload for 'or'")
    return other if optional.value is _MISSING else optional


def _has_value(optional: Any) -> Any:
    if not isinstance(optional, Optional):
        return _error("no matching overload for 'hasValue'")
    return celtypes.BoolType(optional.value is not _MISSING)


def _list(entries: Any) -> Any:
    if isinstance(entries, celpy.evaluation.CELEvalError):
        return entries
    kept = []
    for entry in entries:
        if isinstance(entry, celpy.evaluation.CELEvalError):
            return entry
        if not isinstance(entry, Optional):
            return _error("an optional list element must be an optional value")
        if entry.value is not _MISSING:
            kept.append(entry.value)
    return celtypes.ListType(kept)


def _map(entries: Any) -> Any:
    if isinstance(entries, celpy.evaluation.CELEvalError):
        return entries
    found = celtypes.MapType()
    for key, entry in zip(entries[0::2], entries[1::2], strict=True):
        for part in (key, entry):
            if isinstance(part, celpy.evaluation.CELEvalError):
                return part
        if not isinstance(entry, Optional):
            return _error("an optional map entry must be an optional value")
        if entry.value is _MISSING:
            continue
        if key in found:
            return _error("duplicate key in map")
        found[key] = entry.value
    return found


OPTIONAL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "optional__list": _list,
    "optional__map": _map,
    "optional__of": Optional,
    "optional__none": lambda: _NONE,
    "optional__ofNonZeroValue": lambda value: _NONE if _zero(value) else Optional(value),
    "optional__field": _optional_access,
    "optional__index": _optional_access,
    "hasValue": _has_value,
    "has__field": _has_field,
    "value": _value,
    "orValue": _or_value,
    "or": _or,
}
