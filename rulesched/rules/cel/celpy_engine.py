"""The reference engine: cel-python (`celpy`), pure Python, interpreted runner.

celpy strays from the CEL spec in ways the adapter corrects so that both engines agree (its function
bindings and value adapters are in `celpy_functions.py`):
- it mixes int and double in arithmetic (`100.0 - 50` → 50.0); CEL says no matching overload;
- it refuses heterogeneous numeric comparisons (`1 == 1.0`) that cel-cpp allows at run time;
- it has no type checker: when cel-expr-python is installed its checker is used, so both engines
  report the same load errors and result types;
- its comprehension macros combine two errors into one that embeds both: here the macros are
  `celpy_macros`' loops, with cel-cpp's results, and the errors are worded as cel-cpp's (`celpy_errors`).
The interpreted runner is used because the compiled one keeps state in module globals. It is metered
(`_Evaluator`): each evaluation has a budget of steps (a tree node, or an element of a comprehension,
each) and of the size of what it builds, and stops at the request's deadline (docs/rules/cost.md).
Input values celpy cannot represent (integers outside 64 bits) become error values, which fail only the
expressions that read them, as on cel-cpp.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

import celpy
import celpy.adapter
import celpy.celparser
import celpy.evaluation
import lark
from celpy import celtypes

from rulesched.rules.cel import celpy_errors, celpy_macros, dialect
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
from rulesched.rules.cel.celpy_functions import convert, functions, plain
from rulesched.rules.cel.rewrite import for_celpy, rewritten


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
            message = celpy_errors.message(celpy_errors.detached(error))
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
_SIZED_OR_ERROR = (*_SIZED, celpy.evaluation.CELEvalError)
# celpy logs the `repr` of the values of every tree node at debug level, and of some at info level.
logging.getLogger("celpy").setLevel(logging.WARNING)
_CHECK_EVERY = 1024
"""Steps between two looks at the clock."""


def _tick() -> None:
    """One step of the budget and a look at the clock, for each element of a comprehension."""
    meter = _meter
    meter.steps -= 1
    if meter.steps < 0:
        raise _BudgetExceededError(_STEPS_EXCEEDED)
    if past_deadline():
        raise _BudgetExceededError(_DEADLINE_PASSED)


_STEPS_EXCEEDED = "evaluation budget exceeded: too many steps (settings: cel_budget_steps)"
_DEADLINE_PASSED = "evaluation stopped: the request's deadline passed"


def _size(value: Any) -> int:
    """How many elements or characters `value` holds, for the size budget (an error: its message)."""
    if isinstance(value, _SIZED):
        return len(value)
    if isinstance(value, celpy.evaluation.CELEvalError):
        return sum(len(a) for a in value.args if isinstance(a, _SIZED))
    return 0


class _Evaluator(celpy.evaluation.Evaluator):
    """celpy's evaluator, metered: one step per tree node visited and per comprehension element, a size
    check of every value made; the macros are `celpy_macros`' (cel-cpp's results, errors of constant size)."""

    def visit_children(self, tree: lark.Tree[Any]) -> list[Any]:
        meter = _meter
        meter.steps -= 1
        if meter.steps < 0:
            raise _BudgetExceededError(_STEPS_EXCEEDED)
        if not meter.steps % _CHECK_EVERY and past_deadline():
            raise _BudgetExceededError(_DEADLINE_PASSED)
        values: list[Any] = super().visit_children(tree)
        for value in values:
            if isinstance(value, _SIZED_OR_ERROR) and _size(value) > meter.size:
                raise _BudgetExceededError(
                    f"evaluation budget exceeded: a value of {_size(value)} elements or characters was built,"
                    f" over the limit of {meter.size} (settings: cel_budget_size)"
                )
        return values

    def sub_evaluator(self, ast: lark.Tree[Any]) -> celpy.evaluation.Evaluator:
        return _Evaluator(ast, activation=self.activation)

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        name = str(tree.children[1])
        if name in celpy_macros.MACROS:
            variable, *bodies = cast(lark.Tree[Any], tree.children[2]).children
            receiver = self.visit(cast(lark.Tree[Any], tree.children[0]))
            return celpy_macros.comprehension(name, receiver, [self._body(variable, b) for b in bodies], _tick)
        # celpy takes `min` and `reduce` for macros of its own; in Kubernetes CEL `min()` is the lists
        # library's function (and `reduce` nothing), so they are method calls here.
        if name not in ("min", "reduce"):
            return super().member_dot_arg(tree)
        values = self.visit_children(tree)
        return self.method_eval(values[0], values[1], *values[2:])

    def member_dot(self, tree: lark.Tree[Any]) -> Any:
        return celpy_errors.member_dot(self, tree)

    def _body(self, variable: Any, body: lark.Tree[Any]) -> celpy_macros.Body:
        """A macro's body as a function of the value bound to its variable (evaluated in a nested scope)."""
        name = str(next(variable.find_data("ident")).children[0])
        nested = self.sub_evaluator(body)

        def evaluate(value: Any) -> Any:
            nested.set_activation({name: value})
            try:
                result = nested.visit(body)
            except celpy.evaluation.CELEvalError as error:
                result = error
            return celpy_errors.detached(result) if isinstance(result, celpy.evaluation.CELEvalError) else result

        return evaluate


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
        self._functions = functions()
        self._known = frozenset(self._functions) | frozenset(celpy.evaluation.base_functions) | _MACROS
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
