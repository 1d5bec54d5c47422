"""The types of CEL's operators, literals, macros and functions, as the type check (`typecheck.py`) needs them.

An operator's operands are checked as Kubernetes' CEL does (`string > int`, `int * double` have no
overload), except that numbers of different types compare (Kubernetes compares them by value) and anything
`dyn` is let through. A function's result type is the one its declarations give: CEL's
standard functions here, the Kubernetes libraries' from their `Overload`s (`libs/`, declared once for
both engines); a function with several result types, or none known, is `dyn`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from rulesched.rules.cel.analysis import bare_ident
from rulesched.rules.cel.libs import OVERLOADS
from rulesched.rules.cel.types import (
    BOOL,
    DOUBLE,
    DYN,
    INT,
    NULL,
    NUMBERS,
    STRING,
    UINT,
    CelType,
    list_of,
    map_of,
    optional_of,
    same_kind,
)

OPERATORS = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
}
"""The grammar's operator nodes and the operators they are."""
NEGATABLE = frozenset({"int", "double", "duration"})
CONSTANTS = {"true": BOOL, "false": BOOL, "null": NULL}
"""Names the grammar reads as identifiers."""
_ORDERED = frozenset({"string", "bytes", "bool", "timestamp", "duration"})
_ADDABLE = frozenset({"string", "bytes", "list", "duration"})
_TIME_ARITHMETIC = {
    ("+", "timestamp", "duration"): "timestamp",
    ("+", "duration", "timestamp"): "timestamp",
    ("-", "timestamp", "duration"): "timestamp",
    ("-", "timestamp", "timestamp"): "duration",
    ("-", "duration", "duration"): "duration",
}
_LITERALS = {
    "INT_LIT": INT,
    "UINT_LIT": UINT,
    "FLOAT_LIT": DOUBLE,
    "STRING_LIT": STRING,
    "MLSTRING_LIT": STRING,
    "BYTES_LIT": CelType("bytes"),
    "BOOL_LIT": BOOL,
    "NULL_LIT": NULL,
}
_GLOBALS = {
    "size": INT,
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "string": STRING,
    "bool": BOOL,
    "bytes": CelType("bytes"),
    "timestamp": CelType("timestamp"),
    "duration": CelType("duration"),
    "matches": BOOL,
}
"""CEL's standard global functions and their result types (`dyn`, `type` and the rest: dyn)."""
_MEMBERS = {
    "size": INT,
    "contains": BOOL,
    "startsWith": BOOL,
    "endsWith": BOOL,
    "matches": BOOL,
    "hasValue": BOOL,
    **{f"get{part}": INT for part in ("FullYear", "Month", "Date", "DayOfMonth", "DayOfWeek", "DayOfYear")},
    **{f"get{part}": INT for part in ("Hours", "Minutes", "Seconds", "Milliseconds")},
}
"""CEL's standard member functions with one result type whatever the receiver."""
_ONE_VARIABLE = frozenset({"map", "filter"})
_ONE_OR_TWO = frozenset({"all", "exists", "exists_one", "existsOne"})
_TWO_VARIABLES = frozenset({"transformList", "transformMap", "transformMapEntry"})
_LIBRARY_TYPES = {"string": STRING, "int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL}


def cel_name(operator: str) -> str:
    """An operator as CEL's errors name it (`_>_`, `@in`)."""
    return "@in" if operator == "in" else f"_{operator}_"


def binary(operator: str, left: CelType, right: CelType) -> CelType | None:
    """The result type of `left operator right`; None when no overload takes those types."""
    if operator == "in":
        return _membership(left, right)
    if operator in ("==", "!="):
        return BOOL if same_kind(left, right) else None
    if operator in ("<", "<=", ">", ">="):
        return BOOL if _ordered(left, right) else None
    return _arithmetic(operator, left, right)


def _membership(left: CelType, right: CelType) -> CelType | None:
    if not right.known or right.kind in ("object",):
        return BOOL
    if right.kind in ("list", "map"):
        element = right.item if right.kind == "list" and right.item else STRING if right.kind == "map" else DYN
        return BOOL if same_kind(left, element) else None
    return None


def _ordered(left: CelType, right: CelType) -> bool:
    if not (left.known and right.known):
        return True
    if left.kind in NUMBERS and right.kind in NUMBERS:
        return True
    return left.kind == right.kind and left.kind in _ORDERED


def _arithmetic(operator: str, left: CelType, right: CelType) -> CelType | None:
    known = left.known and right.known
    timed = _TIME_ARITHMETIC.get((operator, left.kind, right.kind))
    if timed is not None:
        return CelType(timed)
    if not known:
        return DYN if _may_compute(operator, left) and _may_compute(operator, right) else None
    if left.kind in NUMBERS and right.kind in NUMBERS:
        return left if left.kind == right.kind else None  # `1 * 2.0`: no overload, as in Kubernetes
    if operator == "+" and left.kind == right.kind and left.kind in _ADDABLE:
        return list_of(common([left.item or DYN, right.item or DYN])) if left.kind == "list" else left
    return None


def _may_compute(operator: str, operand: CelType) -> bool:
    """Whether some overload of `operator` takes `operand` (one side `dyn`)."""
    if not operand.known or operand.kind in NUMBERS:
        return True
    if operator == "+":
        return operand.kind in _ADDABLE or operand.kind == "timestamp"
    return operator == "-" and operand.kind in ("timestamp", "duration")


def indexed(owner: CelType, index: CelType) -> CelType | None:
    """The type of `owner[index]`; None when it cannot be indexed so."""
    if not owner.known or owner.kind == "object":
        return DYN
    if owner.kind == "map":
        return owner.item or DYN
    if owner.kind == "list":
        return owner.item or DYN if not index.known or index.kind in ("int", "uint") else None
    return None


def common(types: Sequence[CelType]) -> CelType:
    """The one type all of `types` have, else `dyn` (a literal list's element type)."""
    return types[0] if types and all(t == types[0] for t in types) else DYN


def map_literal(items: Sequence[CelType]) -> CelType:
    """A map literal's type from its keys and values in turn."""
    return map_of(common(items[1::2]))


def literal_type(token: Any) -> CelType:
    return _LITERALS.get(getattr(token, "type", ""), DYN)


def comprehension_variables(method: str, args: Sequence[Any]) -> list[str]:
    """The variables a macro call binds (`x` of `l.all(x, p)`; `k, v` of `m.all(k, v, p)`), or none."""
    if method in _ONE_VARIABLE or (method in _ONE_OR_TWO and len(args) == 2):
        count = 1
    elif method in _TWO_VARIABLES or (method in _ONE_OR_TWO and len(args) == 3):
        count = 2
    else:
        return []
    names = [bare_ident(arg) for arg in args[:count]]
    return [n for n in names if n] if all(names) and len(args) > count else []


def iteration_types(owner: CelType, count: int) -> list[CelType] | None:
    """The types of a macro's variables over `owner` (an element; an index and an element; a key and a
    value); None when `owner` cannot be ranged over."""
    if owner.kind == "list":
        return [owner.item or DYN] if count == 1 else [INT, owner.item or DYN]
    if owner.kind in ("map", "object"):
        return [STRING] if count == 1 else [STRING, owner.item or DYN]
    return [DYN] * count if not owner.known else None


def comprehension_result(method: str, owner: CelType, bound: Sequence[CelType], body: Sequence[CelType]) -> CelType:
    """A macro's result type from what it ranges over and the types of its body."""
    if method in _ONE_OR_TWO:
        return BOOL
    if method == "filter":
        return list_of(bound[0])
    if method in ("map", "transformList"):
        return list_of(body[-1])
    return map_of(body[-1]) if method == "transformMap" else map_of(DYN)


def global_result(name: str, arguments: Sequence[CelType]) -> CelType:
    """The result type of a global function call (`size(x)`, `quantity('1')`, `optional.of(x)`)."""
    if name in ("optional.of", "optional.ofNonZeroValue") and len(arguments) == 1:
        return optional_of(arguments[0])
    if name == "optional.none":
        return optional_of(DYN)
    if name in _GLOBALS:
        return _GLOBALS[name]
    return _library(name, False, len(arguments))


def member_result(name: str, owner: CelType, arguments: Sequence[CelType]) -> CelType:
    """The result type of `owner.name(arguments)`."""
    if owner.kind == "optional" and owner.item is not None:
        if name == "value":
            return owner.item
        if name == "orValue" and arguments:
            return owner.item if owner.item == arguments[0] else DYN
        if name == "or":
            return owner
    if name in _MEMBERS:
        return _MEMBERS[name]
    if name in ("min", "max") and owner.kind == "list" and owner.item in (INT, DOUBLE, UINT, STRING):
        return owner.item or DYN
    return _library(name, True, len(arguments))


def _library(name: str, member: bool, count: int) -> CelType:
    """The one result type the library declares for `name` with `count` arguments, else `dyn`."""
    results = {
        o.result for o in _declared().get((name, member), ()) if len(o.parameters) - (1 if member else 0) == count
    }
    if len(results) != 1:
        return DYN
    (result,) = results
    if result == "list":
        return list_of(DYN)
    if result == "map":
        return map_of(DYN)
    return _LIBRARY_TYPES.get(result, DYN)


@cache
def _declared() -> Mapping[tuple[str, bool], tuple[Any, ...]]:
    found: dict[tuple[str, bool], list[Any]] = {}
    for overload in OVERLOADS:
        found.setdefault((overload.function, overload.member), []).append(overload)
    return {key: tuple(value) for key, value in found.items()}
