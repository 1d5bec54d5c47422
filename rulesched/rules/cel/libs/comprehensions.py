"""The helpers that two-variable comprehensions are rewritten into (`rules.cel.rewrite`).

cel-expr-python 0.1.3 and cel-python have one-variable comprehensions only, so `m.all(k, v, p)` is
compiled as `cel.bind(c, m, rulesched_keys(c).all(k, cel.bind(v, c[k], p)))`: the keys of a map or
the indices of a list, each value read by index. These names are reserved for that use.
"""

from __future__ import annotations

from typing import Any

from rulesched.rules.cel.library import LibraryError, Overload, global_

KEYS, ZIP, ENTRIES = "rulesched_keys", "rulesched_zip", "rulesched_entries"


def keys(collection: Any) -> list[Any]:
    return list(range(len(collection))) if isinstance(collection, list) else list(collection)


def zip_(names: list[Any], values: list[Any]) -> dict[Any, Any]:
    return dict(zip(names, values, strict=True))


def entries(maps: list[Any]) -> dict[Any, Any]:
    """`transformMapEntry`'s result: the single-entry maps merged; a key given twice is an error."""
    merged: dict[Any, Any] = {}
    for entry in maps:
        if not isinstance(entry, dict):
            raise LibraryError("transformMapEntry: the expression must give a map")
        for key, value in entry.items():
            if key in merged:
                raise LibraryError(f"insert failed: key {key} already exists")
            merged[key] = value
    return merged


OVERLOADS: tuple[Overload, ...] = (
    global_(KEYS, ("list",), "list", keys),
    global_(KEYS, ("map",), "list", keys),
    global_(ZIP, ("list", "list"), "map", zip_),
    global_(ENTRIES, ("list",), "map", entries),
)
