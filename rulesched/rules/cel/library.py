"""How a library function is declared once and registered with every engine.

Each Kubernetes CEL library lives in its own module under `rulesched.rules.cel.libs` with its
`Overload`s: a typed signature and the plain Python that implements it. The engines register them
(`cpp.py`, `celpy_engine.py`): an implementation receives plain Python values (str, int, float, bool,
list, dict) on both engines and returns one, so both engines compute the same result by construction.

Values of the Kubernetes library types (quantity, ip, cidr, url, semver) are carried as their
canonical strings (docs/rules/functions.md, "Values"): cel-expr-python cannot hold a Python object as
an opaque CEL value, and a string is a value both engines compare, hash and print alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

TypeName = Literal["string", "int", "uint", "double", "bool", "list", "map", "any"]
"""A parameter or result type. `any`: a parameter of any type (cel-cpp gets one overload per concrete
type), a result whose type the value decides (cel-cpp's `dyn`)."""


NOT_PLAIN = "the result is an optional value or a type, which has no plain form: read it with .value() or .orValue(…)"
"""The evaluation error of an expression whose result is not a plain value, on both engines."""
NOT_ITERABLE = "a comprehension's range is neither a list nor a map (all, exists, exists_one, map, filter)"
"""The evaluation error of a macro over another value, on both engines (cel-cpp: `<iter_range>`)."""


class LibraryError(ValueError):
    """A library function refused its arguments; the message is the evaluation error both engines give."""


@dataclass(frozen=True, slots=True)
class Overload:
    """One typed signature of a library function and the Python that implements it."""

    function: str
    overload_id: str
    parameters: tuple[TypeName, ...]
    result: TypeName
    member: bool
    impl: Callable[..., Any]


def member(function: str, parameters: tuple[TypeName, ...], result: TypeName, impl: Callable[..., Any]) -> Overload:
    """A receiver-style overload (`x.f(…)`), its id made from its name and parameter types."""
    return Overload(function, _overload_id(function, parameters, "m"), parameters, result, True, impl)


def global_(function: str, parameters: tuple[TypeName, ...], result: TypeName, impl: Callable[..., Any]) -> Overload:
    """A global overload (`f(…)`, `ns.f(…)`)."""
    return Overload(function, _overload_id(function, parameters, "g"), parameters, result, False, impl)


def _overload_id(function: str, parameters: tuple[TypeName, ...], kind: str) -> str:
    return "_".join(("rulesched", kind, function.replace(".", "_"), *parameters))


def cel_equal(left: Any, right: Any) -> bool:
    """CEL equality on plain values: numbers compare by value across int and double, but a bool is
    not a number, and lists and maps compare element by element."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(cel_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(cel_equal(v, right[k]) for k, v in left.items())
    return type(left) is type(right) and bool(left == right)
