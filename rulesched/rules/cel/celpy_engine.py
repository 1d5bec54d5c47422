"""The reference engine: cel-python (`celpy`), pure Python, interpreted runner.

celpy strays from the CEL spec in ways the adapter corrects so that both engines agree:
- it mixes int and double in arithmetic (`100.0 - 50` → 50.0); CEL says no matching overload;
- it refuses heterogeneous numeric comparisons (`1 == 1.0`) that cel-cpp allows at run time;
- it has no type checker: when cel-expr-python is installed its checker is used, so both engines
  report the same load errors and result types.
The interpreted runner is used because the compiled one keeps state in module globals. It is metered
(`_Evaluator`): each evaluation has a budget of steps and of the size of what it builds, and stops at
the request's deadline (docs/rules/cost.md). Input values celpy cannot represent (integers outside
64 bits) become error values, which fail only the expressions that read them, as on cel-cpp.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import celpy
import celpy.adapter
import celpy.celparser
import celpy.evaluation
import lark
from celpy import celtypes

from rulesched.rules.cel import dialect
from rulesched.rules.cel.base import (
    CelCompileError,
    CelEvalError,
    Engine,
    EngineName,
    Limits,
    Program,
    VariableSource,
    past_deadline,
)
from rulesched.rules.cel.celpy_optional import OPTIONAL_FUNCTIONS, Optional
from rulesched.rules.cel.library import NOT_PLAIN, Overload, TypeName
from rulesched.rules.cel.libs import OVERLOADS
from rulesched.rules.cel.libs.format import shortest
from rulesched.rules.cel.libs.times import UNIX_SECONDS
from rulesched.rules.cel.rewrite import celpy_name, for_celpy, rewritten

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
                    return celpy.evaluation.CELEvalError(str(error))
        return celpy.evaluation.CELEvalError(_no_overload(overloads[0], args))

    return call


_CPP_TYPE_NAMES: dict[type, str] = {
    celtypes.BoolType: "bool",
    celtypes.IntType: "int64",
    celtypes.UintType: "uint64",
    celtypes.DoubleType: "double",
    celtypes.StringType: "string",
    celtypes.BytesType: "bytes",
    celtypes.ListType: "list",
    celtypes.MapType: "map",
    celtypes.TimestampType: "google.protobuf.Timestamp",
    celtypes.DurationType: "google.protobuf.Duration",
    type(None): "null_type",
}


def _no_overload(overload: Overload, args: Sequence[Any]) -> str:
    """cel-cpp's words for a library call no overload fits: `No matching overloads found : (int64).family()`."""
    kinds = [_CPP_TYPE_NAMES.get(type(a), type(a).__name__) for a in args]
    if overload.member and kinds:
        call = f"({kinds[0]}).{overload.function}({', '.join(kinds[1:])})"
    else:
        call = f"{overload.function}({', '.join(kinds)})"
    return f"No matching overloads found : {call}"


def _functions() -> dict[str, Callable[..., Any]]:
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
    # celpy passes an error index on to `getitem`, which loses its message (`l[rulesched_argmin(l)]`).
    if isinstance(key, celpy.evaluation.CELEvalError):
        return key
    return _BASE["_[_]"](container, key)


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


class CelpyProgram(Program):
    def __init__(
        self,
        source: str,
        result_type: str,
        runner: celpy.Runner,
        variables: Sequence[tuple[str, celpy.Runner]],
        limits: Limits,
    ) -> None:
        self._limits = limits
        self.source = source
        self.result_type = result_type
        self._runner = runner
        self._variables = variables

    def bind(self, values: Mapping[str, Any]) -> Program:
        return _BoundProgram(self, {name: convert(value) for name, value in values.items()})

    def evaluate(self, bindings: Any) -> Any:
        if self._variables:
            bindings = {**bindings}
            bindings["variables"] = _LazyVariables(self._variables, bindings)
        _meter.start(self._limits)
        try:
            return plain(self._runner.evaluate(bindings))
        except celpy.evaluation.CELEvalError as error:
            message = str(error.args[0]) if error.args else str(error)
        except _BudgetExceededError as error:
            message = str(error)
        except CelEvalError:
            raise
        except RecursionError:
            message = "expression nested too deeply for the celpy engine"
        except Exception as error:  # nothing an expression does may escape (docs/rules/cost.md)
            message = f"celpy: {type(error).__name__}: {error}"[:500]
        # Raised outside the handler, so that it refers to no celpy error, traceback or frame.
        raise CelEvalError(message)


class _BoundProgram(Program):
    """A program with some names fixed: their converted values are added to each node's bindings."""

    def __init__(self, program: CelpyProgram, values: Mapping[str, Any]) -> None:
        self.source = program.source
        self.result_type = program.result_type
        self._program = program
        self._values = values

    def bind(self, values: Mapping[str, Any]) -> Program:
        return _BoundProgram(self._program, {**self._values, **{k: convert(v) for k, v in values.items()}})

    def evaluate(self, bindings: Any) -> Any:
        return self._program.evaluate({**bindings, **self._values})


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
        return celpy.evaluation.CELEvalError(f"integer value {value} out of range")
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if value is None:
        return None
    if isinstance(value, (datetime.datetime, datetime.timedelta)):
        return convert(value)
    return celpy.evaluation.CELEvalError(f"a {type(value).__name__} is not a CEL value")


class _BudgetExceededError(Exception):
    """An evaluation past its budget or the deadline: raised through celpy (which does not catch it)."""


class _Meter(threading.local):
    """The budget of the evaluation running in this thread (variables share their reader's)."""

    steps: int = 0
    size: int = Limits().size

    def start(self, limits: Limits) -> None:
        self.steps, self.size = limits.steps, limits.size


_meter = _Meter()
_SIZED = (str, bytes, list, dict)
_CHECK_EVERY = 1024
"""Steps between two looks at the clock."""


class _Evaluator(celpy.evaluation.Evaluator):
    """celpy's evaluator, metered: one step per tree node visited, a size check of every value made."""

    def visit_children(self, tree: lark.Tree[Any]) -> list[Any]:
        meter = _meter
        meter.steps -= 1
        if meter.steps < 0:
            raise _BudgetExceededError("evaluation budget exceeded: too many steps (settings: cel_budget_steps)")
        if not meter.steps % _CHECK_EVERY and past_deadline():
            raise _BudgetExceededError("evaluation stopped: the request's deadline passed")
        values: list[Any] = super().visit_children(tree)
        for value in values:
            if isinstance(value, _SIZED) and len(value) > meter.size:
                raise _BudgetExceededError(
                    f"evaluation budget exceeded: a value of {len(value)} elements or characters was built,"
                    f" over the limit of {meter.size} (settings: cel_budget_size)"
                )
        return values

    def sub_evaluator(self, ast: lark.Tree[Any]) -> celpy.evaluation.Evaluator:
        return _Evaluator(ast, activation=self.activation)

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        # celpy takes `min` and `reduce` for macros of its own; in Kubernetes CEL `min()` is the lists
        # library's function (and `reduce` nothing), so they are method calls here.
        if str(tree.children[1]) not in ("min", "reduce"):
            return super().member_dot_arg(tree)
        values = self.visit_children(tree)
        return self.method_eval(values[0], values[1], *values[2:])


class _MeteredRunner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return _Evaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


class _LazyVariables(celtypes.MapType):
    """`variables`, each evaluated when first read (as cel-cpp's `cel.bind` and Kubernetes do)."""

    def __init__(self, definitions: Sequence[tuple[str, celpy.Runner]], bindings: dict[str, Any]) -> None:
        super().__init__()
        self._pending = {celtypes.StringType(name): runner for name, runner in definitions}
        self._bindings = bindings

    def __getitem__(self, key: Any) -> Any:
        if not dict.__contains__(self, key) and key in self._pending:
            value: Any
            try:
                value = self._pending[key].evaluate(self._bindings)
            except celpy.evaluation.CELEvalError as error:
                value = error  # celpy propagates an error value to whatever reads it
            dict.__setitem__(self, key, value)
        return super().__getitem__(key)


class CelpyEngine(Engine):
    name: ClassVar[EngineName] = "celpy"

    def __init__(self, checker: Engine | None = None) -> None:
        """`checker` (the cpp engine, given by `make_engine`) types each expression; without it, all are dyn."""
        self._env = celpy.Environment(runner_class=_MeteredRunner)
        self._functions = _functions()
        self._known = frozenset(self._functions) | frozenset(_BASE) | _MACROS
        self._checker = checker

    def compile(self, source: str, variables: Sequence[VariableSource] = ()) -> Program:
        dialect.check(source)
        result_type = self._checker.compile(source).result_type if self._checker else "dyn"
        runners = [(v.name, self._program(v.expression)) for v in variables]
        return CelpyProgram(source, result_type, self._program(source), runners, self.limits)

    def _program(self, source: str) -> celpy.Runner:
        try:
            tree = self._env.compile(for_celpy(rewritten(source)))
        except celpy.celparser.CELParseError as error:
            message = str(error.args[0]) if error.args else str(error)
            raise CelCompileError(message.splitlines()[0], error.line, error.column) from error
        unknown = sorted(_called(tree) - self._known)
        if unknown:
            names = ", ".join(unknown)
            raise CelCompileError(f"{names}: not available on the celpy engine (use --cel-engine cpp)")
        return self._env.program(tree, functions=self._functions)

    def convert(self, value: Any) -> Any:
        return convert(value)

    def bindings(self, values: Mapping[str, Any]) -> Any:
        return dict(values)


_MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter", "dyn"})
_NAMESPACES = frozenset({"cel", "math", "strings", "sets", "optional", "base64", "lists", "ip", "regex"})


def _called(tree: lark.Tree[Any]) -> set[str]:
    """The names of every function and method `tree` calls (`math.greatest` with its namespace)."""
    names: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "ident_arg":
            names.add(str(node.children[0]))
        elif node.data == "member_dot_arg":
            receiver = node.children[0]
            while isinstance(receiver, lark.Tree) and receiver.data in ("member", "primary"):
                receiver = receiver.children[0]
            namespace = (
                str(receiver.children[0]) if isinstance(receiver, lark.Tree) and receiver.data == "ident" else ""
            )
            name = str(node.children[1])
            names.add(f"{namespace}.{name}" if namespace in _NAMESPACES else name)
    return names
