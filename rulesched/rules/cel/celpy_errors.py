"""The celpy engine's evaluation errors, in cel-cpp's words and of a bounded size.

cel-python words its errors for Python readers (`found no matching overload for Token('RULE',
'relation_gt') applied to '(<class 'celpy.celtypes.StringType'>, …)'`, `no such member in mapping`) and
some embed the `repr` of an input value, however large. The errors a rule author meets most are made
here in cel-cpp's words (`Key not found in map : "lables"`, `No matching overloads found :
_>_(string, int64)`, `Applying SELECT to non-message type`), without the values' `repr`, and every
message that leaves the engine is cut to `base.MESSAGE_LIMIT` characters.
"""

from __future__ import annotations

import re
from typing import Any

import celpy.evaluation
import lark
from celpy import celtypes

from rulesched.rules.cel.base import bounded

Error = celpy.evaluation.CELEvalError

_SHOWN = 100
"""Longest key shown in a message."""

CPP_TYPE_NAMES: dict[str, str] = {
    "BoolType": "bool",
    "IntType": "int64",
    "UintType": "uint64",
    "DoubleType": "double",
    "StringType": "string",
    "BytesType": "bytes",
    "ListType": "list",
    "MapType": "map",
    "TimestampType": "google.protobuf.Timestamp",
    "DurationType": "google.protobuf.Duration",
    "NoneType": "null_type",
}
"""celpy's value classes by name, as cel-cpp names their types in its messages."""
_OPERATORS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}
_NO_OVERLOAD = re.compile(
    r"^found no matching overload for (?:Token\('RULE', '(?P<rule>\w+)'\)|(?P<name>\S+))"
    r" applied to '\((?P<types>[^)]*)\)'"
)
_CLASS = re.compile(r"<class '(?:[\w.]+\.)?(\w+)'>")


def cpp_type(value: Any) -> str:
    """The name cel-cpp gives the type of `value` in its messages."""
    known = (CPP_TYPE_NAMES[c.__name__] for c in type(value).__mro__ if c.__name__ in CPP_TYPE_NAMES)
    return next(known, type(value).__name__)


def key_not_found(key: Any) -> Error:
    """cel-cpp's error for a missing map key: `Key not found in map : "zone"` (a string key quoted)."""
    text = str(key)
    shown = text if len(text) <= _SHOWN else text[:_SHOWN] + "…"
    return Error(f'Key not found in map : "{shown}"' if isinstance(key, str) else f"Key not found in map : {shown}")


def member_dot(evaluator: celpy.evaluation.Evaluator, tree: lark.Tree[Any]) -> Any:
    """`e.f` as cel-cpp evaluates it on a map (`e['f']`) or on a value that has no fields."""
    member_tree, token = tree.children
    name = str(token)
    member = evaluator.visit(member_tree)
    if isinstance(member, (Error, celpy.evaluation.NameContainer)):
        return _in_bindings(member, name, tree)
    if not isinstance(member, celtypes.MapType):
        return Error("Applying SELECT to non-message type")
    try:
        return member[celtypes.StringType(name)]
    except KeyError:
        return key_not_found(name)


def _in_bindings(member: Any, name: str, tree: lark.Tree[Any]) -> Any:
    """celpy's own reading of `e.f` when `e` is an error or a namespace of bindings."""
    if isinstance(member, Error):
        return member
    if name in member:
        return member[name].value
    return Error(f"No {name!r} in bindings", KeyError, None, tree=tree)


def detached(error: Error) -> Error:
    """`error` without the Python exception it was made from (celpy keeps it as `__cause__`) nor a
    traceback: each refers to a finished frame that refers back to the error, a reference cycle that
    lives until the next garbage collection, which the extender holds off while it answers (a
    comprehension made one per element: 50 MB over 10,000 elements)."""
    error.__cause__ = error.__context__ = None
    return error.with_traceback(None)


def message(error: BaseException) -> str:
    """The message of a celpy error for the rule author: cel-cpp's words where celpy has its own, cut to
    `base.MESSAGE_LIMIT`."""
    text = str(error.args[0]) if error.args else str(error)
    return bounded(_told_apart(text, error) or _cpp_words(text))


def _told_apart(text: str, error: BaseException) -> str | None:
    """cel-cpp's words for the celpy messages that cover two cases, told apart by the Python exception's
    own words (celpy keeps them as the error's third argument) and the function called."""
    cause = str(error.args[2:])
    if text == "modulus or divide by zero":
        return "modulus by zero" if "integer modulo by zero" in cause else "divide by zero"
    function = str(getattr(error, "token", None) or "")
    if text == "return error for overflow" and function in _CONVERSIONS and ("convert" in cause or "literal" in cause):
        return f"cannot convert string to {function}"
    return None


_CONVERSIONS = frozenset({"int", "uint", "double"})


def _cpp_words(text: str) -> str:
    found = _NO_OVERLOAD.match(text)
    if found is None:
        return text
    operator = _OPERATORS.get(found["rule"] or "", found["name"] or found["rule"])
    types = ", ".join(CPP_TYPE_NAMES.get(name, name) for name in _CLASS.findall(found["types"]))
    return f"No matching overloads found : {operator}({types})"
