"""The types the load-time type check (`typecheck.py`) gives CEL values: scalars, lists and maps with their
element types, optionals, and objects with named fields.

An object is a Kubernetes kind's model (its fields from `kubernetes_types.json`, written from the pinned
`kubernetes` client by `cluster/kube/kubernetes_types.py`) or a record the vocabulary declares (`metrics`,
`recent`, the trimmed views of `pods` and `namespaceObject`). Types are written as short texts, parsed once
and cached: `string`, `int`, `double`, `bool`, `timestamp`, `dyn`, `list(T)`, `map(T)` (string keys),
`V1ObjectMeta` (a Kubernetes model) or a record's name.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

SCALARS = frozenset({"dyn", "bool", "int", "uint", "double", "string", "bytes", "null", "timestamp", "duration"})
NUMBERS = frozenset({"int", "uint", "double"})
_TABLE = Path(__file__).with_name("kubernetes_types.json")


@dataclass(frozen=True, slots=True)
class CelType:
    """One type: `kind` is a scalar's name, `list`, `map`, `optional` or `object`; `item` the element (or
    value, or wrapped) type; `name` an object's, whose fields `fields()` gives."""

    kind: str
    item: CelType | None = None
    name: str = ""

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.item})"
        if self.kind == "map":
            return f"map(string, {self.item})"
        if self.kind == "optional":
            return f"optional({self.item})"
        return shown(self.name) if self.kind == "object" else self.kind

    @property
    def known(self) -> bool:
        """Whether anything is known of it (not `dyn`)."""
        return self.kind != "dyn"

    @property
    def kubernetes(self) -> bool:
        """An object of Kubernetes' schema (not a record of rulesched's own)."""
        return self.kind == "object" and self.name in kubernetes_table()["types"]

    def fields(self) -> Mapping[str, str]:
        """An object's fields and their type texts."""
        return _fields(self.name)


DYN = CelType("dyn")
BOOL = CelType("bool")
INT = CelType("int")
UINT = CelType("uint")
DOUBLE = CelType("double")
STRING = CelType("string")
NULL = CelType("null")


def list_of(item: CelType) -> CelType:
    return CelType("list", item)


def map_of(item: CelType) -> CelType:
    return CelType("map", item)


def optional_of(item: CelType) -> CelType:
    return CelType("optional", item)


_RECORDS: dict[str, Mapping[str, str]] = {}


def declare_records(records: Mapping[str, Mapping[str, str]]) -> None:
    """The vocabulary's own records (their fields' type texts), declared once at its import."""
    _RECORDS.update(records)
    parse.cache_clear()


@cache
def kubernetes_table() -> dict[str, Any]:
    """The Kubernetes models' fields, their versions and the kinds' roots (read once)."""
    loaded: dict[str, Any] = json.loads(_TABLE.read_text())
    return loaded


def kubernetes_version() -> str:
    """The Kubernetes minor the table was written from (`1.37`)."""
    return str(kubernetes_table()["kubernetes"])


def _fields(name: str) -> Mapping[str, str]:
    found: Mapping[str, str] | None = _RECORDS.get(name) or kubernetes_table()["types"].get(name)
    return found or {}


def shown(name: str) -> str:
    """An object type as messages show it: a Kubernetes model without the client's `V1` prefix."""
    return name[2:] if name.startswith("V1") and name[2:3].isupper() else name


@cache
def parse(text: str) -> CelType:
    """The type a type text names."""
    if text in SCALARS:
        return CelType(text)
    for kind in ("list", "map", "optional"):
        if text.startswith(f"{kind}(") and text.endswith(")"):
            return CelType(kind, parse(text[len(kind) + 1 : -1]))
    if text in _RECORDS or text in kubernetes_table()["types"]:
        return CelType("object", name=text)
    raise ValueError(f"unknown type {text!r}")


def field_type(owner: CelType, field: str) -> CelType | None:
    """The type of `owner`'s field, None when it has none (an object) or no fields at all (a scalar);
    `dyn` when it is not known (a map's values, dyn)."""
    if owner.kind in ("dyn", "map"):
        return owner.item or DYN
    if owner.kind == "object":
        text = owner.fields().get(field)
        return parse(text) if text is not None else None
    return None


def same_kind(left: CelType, right: CelType) -> bool:
    """Whether values of the two types may be compared or combined as CEL allows at run time: either
    unknown, both numbers (Kubernetes CEL compares int, uint and double by value), or the same kind."""
    if not (left.known and right.known) or NULL in (left, right):
        return True
    if left.kind in NUMBERS and right.kind in NUMBERS:
        return True
    if left.kind == "object" or right.kind == "object":
        return left.kind in ("object", "map") and right.kind in ("object", "map")
    return left.kind == right.kind


_VALUE_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "bool"),
    (int, "int"),
    (float, "double"),
    (str, "string"),
    ((bytes, bytearray), "bytes"),
    ((list, tuple), "list"),
    (Mapping, "map"),
    (datetime.datetime, "timestamp"),
    (datetime.timedelta, "duration"),
    (type(None), "null_type"),
)


def value_type(value: object) -> str:
    """The CEL type of a plain result (`string`, not Python's `str`), as messages about a result name it."""
    return next((name for kinds, name in _VALUE_TYPES if isinstance(value, kinds)), type(value).__name__)
