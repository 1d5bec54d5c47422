"""The celpy engine's functions and values: what it calls and what it reads and hands back.

The function bindings correct celpy where it strays from the CEL spec, so that both engines agree:
arithmetic on mixed int and double has no matching overload (celpy mixes them), numbers of different
types compare at run time (celpy refuses `1 == 1.0`), the CEL libraries are called through their
declared overloads, and `timestamp(int)`, `string(double)` and an error index behave as on cel-cpp.
The value adapters turn JSON-like input into celpy values (what celpy cannot hold, such as an integer
outside 64 bits, becomes an error value) and celpy results into plain Python.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import celpy
import celpy.adapter
import celpy.evaluation
from celpy import celtypes

from rulesched.rules.cel.base import CelEvalError, bounded
from rulesched.rules.cel.celpy_errors import cpp_type, key_not_found
from rulesched.rules.cel.celpy_macros import logical_and, logical_or
from rulesched.rules.cel.celpy_optional import OPTIONAL_FUNCTIONS, Optional
from rulesched.rules.cel.library import NOT_PLAIN, Overload, TypeName
from rulesched.rules.cel.libs import OVERLOADS
from rulesched.rules.cel.libs.format import shortest
from rulesched.rules.cel.libs.times import UNIX_SECONDS
from rulesched.rules.cel.rewrite import celpy_name

_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


_ARGUMENT: dict[TypeName, tuple[type, ...]] = {
    "string": (celtypes.StringType,),
    "int": (celtypes.IntType,),
    "uint": (celtypes.UintType,),
    "double": (celtypes.DoubleType,),
    "bool": (celtypes.BoolType,),
    "list": (celtypes.ListType,),
    "map": (celtypes.MapType,),
    "any": (object,),
}


_BASE = celpy.evaluation.base_functions


def _kind(value: Any) -> str | None:
    if isinstance(value, celtypes.BoolType) or not isinstance(value, _NUMBERS):
        return None
    return "double" if isinstance(value, celtypes.DoubleType) else "integer"


def _scalar(value: Any) -> bool:
    return value is not None and not isinstance(value, (celtypes.MapType, celtypes.ListType))


def _strict_arithmetic(operator: str) -> Callable[[Any, Any], Any]:
    base = _BASE[operator]

    def apply(left: Any, right: Any) -> Any:
        kinds = {_kind(left), _kind(right)}
        if kinds == {"double", "integer"}:
            return celpy.evaluation.CELEvalError(
                f"no matching overload for '{operator}' applied to ({type(left).__name__}, {type(right).__name__})"
            )
        return _celpy_typed(base(left, right))

    return apply


def _celpy_typed(value: Any) -> Any:
    """celpy's `+` of two strings (lists, bytes) gives a Python `str` (`list`, `bytes`), which then
    compares unequal to every CEL string (`'a' + 'a' == 'aa'` was false): made a CEL value again."""
    if type(value) is str:
        return celtypes.StringType(value)
    if type(value) is list:
        return celtypes.ListType(value)
    if type(value) is bytes:
        return celtypes.BytesType(value)
    return value


def _numeric_relation(operator: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    base = _BASE[operator]

    def apply(left: Any, right: Any) -> Any:
        if isinstance(left, celpy.evaluation.CELEvalError):
            return left
        if isinstance(right, celpy.evaluation.CELEvalError):
            return right
        left_kind, right_kind = _kind(left), _kind(right)
        if left_kind and right_kind and type(left) is not type(right):
            # celtypes refuse to compare int, uint and double with each other; Python compares them exactly.
            return celtypes.BoolType(compare(plain(left), plain(right)))
        mixed = _scalar(left) and _scalar(right) and type(left) is not type(right)
        if operator in ("_==_", "_!=_") and mixed and not (left_kind and right_kind):
            # Heterogeneous equality (CEL spec, cel-cpp): values of different types are unequal.
            return celtypes.BoolType(operator == "_!=_")
        return base(left, right)

    return apply


def _accepts(overload: Overload, args: Sequence[Any]) -> bool:
    if len(args) != len(overload.parameters):
        return False
    for value, parameter in zip(args, overload.parameters, strict=True):
        if isinstance(value, (celtypes.BoolType, Optional)) and parameter not in ("bool", "any"):
            return False  # celpy's bool is an int; an optional is no library value
        if not isinstance(value, _ARGUMENT[parameter]):
            return False
    return True


def _library_function(overloads: Sequence[Overload]) -> Callable[..., Any]:
    """The overloads of one function as one celpy function: the first whose types fit is called with
    plain values (as cel-cpp calls it), and its plain result converted back."""

    def call(*args: Any) -> Any:
        failed = next((a for a in args if isinstance(a, celpy.evaluation.CELEvalError)), None)
        if failed is not None:
            return failed
        for overload in overloads:
            if _accepts(overload, args):
                try:
                    return convert(overload.impl(*(plain(a) for a in args)))
                except (ValueError, ArithmeticError, TypeError) as error:
                    return celpy.evaluation.CELEvalError(bounded(str(error)))
        return celpy.evaluation.CELEvalError(_no_overload(overloads[0], args))

    return call


def _no_overload(overload: Overload, args: Sequence[Any]) -> str:
    """cel-cpp's words for a library call no overload fits: `No matching overloads found : (int64).family()`."""
    kinds = [cpp_type(a) for a in args]
    if overload.member and kinds:
        call = f"({kinds[0]}).{overload.function}({', '.join(kinds[1:])})"
    else:
        call = f"{overload.function}({', '.join(kinds)})"
    return f"No matching overloads found : {call}"


def functions() -> dict[str, Callable[..., Any]]:
    functions: dict[str, Callable[..., Any]] = {
        op: _strict_arithmetic(op) for op in ("_+_", "_-_", "_*_", "_/_", "_%_")
    }
    relations: dict[str, Callable[[Any, Any], bool]] = {
        "_==_": lambda a, b: a == b,
        "_!=_": lambda a, b: a != b,
        "_<_": lambda a, b: a < b,
        "_<=_": lambda a, b: a <= b,
        "_>_": lambda a, b: a > b,
        "_>=_": lambda a, b: a >= b,
    }
    functions.update({op: _numeric_relation(op, compare) for op, compare in relations.items()})
    by_name: dict[str, list[Overload]] = {}
    for overload in OVERLOADS:
        by_name.setdefault(celpy_name(overload.function, overload.member), []).append(overload)
    functions.update({name: _library_function(group) for name, group in by_name.items()})
    functions.update(OPTIONAL_FUNCTIONS)
    functions["_[_]"] = _index
    functions["_&&_"] = logical_and
    functions["_||_"] = logical_or
    functions["string"] = _to_string
    functions["timestamp"] = _timestamp
    return functions


def _timestamp(value: Any) -> Any:
    # celpy has no `timestamp(int)` (seconds since the epoch), which cel-go and cel-cpp have.
    if not isinstance(value, celtypes.IntType) or isinstance(value, celtypes.BoolType):
        return _BASE["timestamp"](value)
    if int(value) not in UNIX_SECONDS:  # an exact int: `in` on a range scans for anything else
        return celpy.evaluation.CELEvalError("timestamp overflow")
    return celtypes.TimestampType(datetime.datetime.fromtimestamp(int(value), datetime.UTC))


def _index(container: Any, key: Any) -> Any:
    # celpy passes an error index on to `getitem`, which loses its message (`l[rulesched_argmin(l)]`);
    # its own errors for a missing key or index say neither (cel-cpp's words here).
    for value in (container, key):
        if isinstance(value, celpy.evaluation.CELEvalError):
            return value
    try:
        return _BASE["_[_]"](container, key)
    except KeyError:
        return key_not_found(key)
    except IndexError:
        return celpy.evaluation.CELEvalError(f"Index error: index={key} size={len(container)}")


def _to_string(value: Any) -> Any:
    # cel-cpp writes doubles as Go's %g does (string(2.0) == "2", string(1e20) == "1e+20"); celpy uses repr.
    if isinstance(value, celtypes.DoubleType):
        return celtypes.StringType(shortest(float(value)))
    return celtypes.StringType(value)


def plain(value: Any) -> Any:
    """A celpy value as plain Python, the form both engines hand back."""
    if value is None or isinstance(value, (celtypes.BoolType, bool)):
        return None if value is None else bool(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.ListType):
        return [plain(v) for v in value]
    if isinstance(value, celtypes.MapType):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (Optional, celtypes.TypeType)):
        raise CelEvalError(NOT_PLAIN)
    return value


def convert(value: Any) -> Any:
    """A JSON-like value (or a datetime) as celpy values; what celpy cannot hold becomes an error value."""
    if isinstance(value, datetime.datetime):
        return celtypes.TimestampType(value)
    if isinstance(value, datetime.timedelta):
        return celtypes.DurationType(value)
    try:
        return celpy.adapter.json_to_cel(value)
    except (ValueError, TypeError, OverflowError):
        return _careful(value)


_INT_RANGE = range(-(2**63), 2**63)


_UINT_RANGE = range(2**63, 2**64)


def _careful(value: Any) -> Any:
    """`json_to_cel`, value by value: an integer of 2^63 or more is a uint (as on cel-cpp); one outside 64
    bits (or an unknown type) becomes a celpy error value, which fails only the expressions that read it
    (cel-cpp refuses it when reading it)."""
    if isinstance(value, Mapping):
        return celtypes.MapType({celtypes.StringType(str(k)): _careful(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return celtypes.ListType([_careful(v) for v in value])
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        if value in _INT_RANGE:
            return celtypes.IntType(value)
        if value in _UINT_RANGE:  # as cel-cpp reads it
            return celtypes.UintType(value)
        return celpy.evaluation.CELEvalError(bounded(f"integer value {value} out of range"))
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if value is None:
        return None
    if isinstance(value, (datetime.datetime, datetime.timedelta)):
        return convert(value)
    return celpy.evaluation.CELEvalError(f"a {type(value).__name__} is not a CEL value")
