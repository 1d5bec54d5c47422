"""cel-go's sets extension (ext/sets.go), part of Kubernetes' base environment: `sets.contains`,
`sets.equivalent`, `sets.intersects` over lists, with CEL equality (`[1]` contains `1.0`)."""

from __future__ import annotations

from typing import Any

from rulesched.rules.cel.library import Overload, cel_equal, global_


def _has(items: list[Any], value: Any) -> bool:
    return any(cel_equal(item, value) for item in items)


def contains(items: list[Any], subset: list[Any]) -> bool:
    return all(_has(items, value) for value in subset)


def equivalent(left: list[Any], right: list[Any]) -> bool:
    return contains(left, right) and contains(right, left)


def intersects(left: list[Any], right: list[Any]) -> bool:
    return any(_has(left, value) for value in right)


OVERLOADS: tuple[Overload, ...] = (
    global_("sets.contains", ("list", "list"), "bool", contains),
    global_("sets.equivalent", ("list", "list"), "bool", equivalent),
    global_("sets.intersects", ("list", "list"), "bool", intersects),
)
