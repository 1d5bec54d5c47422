"""The default engine: cel-expr-python, Google's CEL runtime (C++).

Expressions are parsed and type-checked at compile time. Rule set variables are compiled into the
program as nested `cel.bind(variables, {...}, …)`, so one evaluation needs one activation per node
and nothing is recomputed in Python. Run-time errors come back as values and are raised here as
`CelEvalError`.
"""

from __future__ import annotations

import datetime
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional

from rulesched.rules.cel import dialect
from rulesched.rules.cel.analysis import numbers_compared_as_dyn
from rulesched.rules.cel.base import (
    CelCompileError,
    CelEvalError,
    Engine,
    EngineName,
    Program,
    VariableSource,
    bounded,
)
from rulesched.rules.cel.library import NOT_ITERABLE, NOT_PLAIN, Overload, TypeName
from rulesched.rules.cel.libs import OVERLOADS
from rulesched.rules.cel.rewrite import rewritten
from rulesched.rules.vocabulary import NAMES

_TYPES: dict[TypeName, cel.Type] = {
    "string": cel.Type.STRING,
    "int": cel.Type.INT,
    "uint": cel.Type.UINT,
    "double": cel.Type.DOUBLE,
    "bool": cel.Type.BOOL,
    "list": cel.Type.List(cel.Type.DYN),
    "map": cel.Type.Map(cel.Type.DYN, cel.Type.DYN),
    "any": cel.Type.DYN,
}
_CONCRETE: dict[str, cel.Type] = {
    **{name: t for name, t in _TYPES.items() if name != "any"},
    "null": cel.Type.NULL,
    "bytes": cel.Type.BYTES,
    "timestamp": cel.Type.TIMESTAMP,
    "duration": cel.Type.DURATION,
}
"""What an `any` parameter becomes: cel-cpp's runtime dispatches a Python overload on concrete types
only (a `dyn` parameter matches nothing), so there is one overload per type."""
_POSITION = re.compile(r"<input>:(\d+):(\d+): ([^\n]*)")
_CROSS_NUMERIC = re.compile(
    r"no matching overload for '_(?:<|<=|>|>=|==|!=)_' applied to '\((?:int|uint|double), (?:int|uint|double)\)'"
)


def _declarations() -> dict[str, cel.Type]:
    """Each context name (`rules/vocabulary.py`) with its CEL type."""
    # The numeric maps are declared dyn, not map(string, double): cel-cpp's checker would reject
    # `allocatable.pods > 100` (double vs int), which the runtime (like Kubernetes CEL) allows.
    types = {"dyn": cel.Type.DYN, "numbers": cel.Type.DYN, "timestamp": cel.Type.TIMESTAMP}
    return {entry.name: types[entry.cel_type] for entry in NAMES}


def _concrete(overload: Overload) -> Iterator[cel.Overload]:
    """`overload` as cel-cpp overloads: one per combination of concrete types for its `any` parameters."""
    choices = [list(_CONCRETE.items()) if p == "any" else [(p, _TYPES[p])] for p in overload.parameters]
    for combination in itertools.product(*choices):
        names = [name for name, _ in combination]
        suffix = "" if names == list(overload.parameters) else "_" + "_".join(names)
        yield cel.Overload(
            overload.overload_id + suffix,
            return_type=_TYPES[overload.result],
            parameters=[t for _, t in combination],
            is_member=overload.member,
            impl=overload.impl,
        )


def _functions() -> list[cel.FunctionDecl]:
    by_name: dict[str, list[cel.Overload]] = {}
    for overload in OVERLOADS:
        by_name.setdefault(overload.function, []).extend(_concrete(overload))
    return [cel.FunctionDecl(name, overloads) for name, overloads in by_name.items()]


def _type_name(checked: cel.Type) -> str:
    return re.split(r"[<(]", checked.name().lower(), maxsplit=1)[0]


def _compile_error(error: Exception) -> CelCompileError:
    text = str(error)
    found = _POSITION.findall(text)
    if not found:
        return CelCompileError(text.removeprefix("INVALID_ARGUMENT: ").strip())
    line, column, _ = found[0]
    message = "; ".join(m.strip() for _, _, m in found)
    return CelCompileError(message, int(line), int(column))


def inline_variables(source: str, variables: Sequence[VariableSource]) -> str:
    """`source` wrapped so that `variables.<name>` is bound, each variable seeing the earlier ones."""
    text = source
    for index in range(len(variables) - 1, -1, -1):
        earlier = [f"'{v.name}': variables['{v.name}']" for v in variables[:index]]
        current = variables[index]
        entries = ", ".join([*earlier, f"'{current.name}': dyn((\n{current.expression}\n))"])
        text = f"cel.bind(variables, {{{entries}}}, (\n{text}\n))"
    return text


def literal(value: Any) -> str:
    """A JSON-like value (or a timestamp) as CEL source that evaluates to the same CEL value as the
    activation would convert it to; `ValueError` for what has no exact literal."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not -(2**63) < value < 2**63:
            raise ValueError(f"integer {value} is out of range for a CEL literal")
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} has no CEL literal")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime.datetime):
        return f"timestamp({json.dumps(value.isoformat())})"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{literal(str(k))}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise ValueError(f"a {type(value).__name__} has no CEL literal")


_STATUS = re.compile(r"^[A-Z_]+: | \[[A-Z_]+\]$")


def _run_time_message(error: Exception) -> str:
    """cel-cpp's exception text without its status code: "INTERNAL: Iteration budget exceeded [INTERNAL]"
    becomes "Iteration budget exceeded"."""
    text = _STATUS.sub("", str(error).strip()) or type(error).__name__
    if "budget" in text.lower():
        return f"evaluation budget exceeded: {text} (cel-cpp's comprehension iteration limit)"
    return text


def _words(message: str) -> str:
    """cel-cpp's message, with a clearer one where both engines must agree (a macro over a non-list)."""
    return NOT_ITERABLE if message == "No matching overloads found : <iter_range>" else message


def _plain(result: cel.Value) -> Any:
    try:
        return result.plain_value()
    except Exception:  # pybind11's "Unable to convert": an optional or a type, which have no plain form
        raise CelEvalError(NOT_PLAIN) from None


def _error_text(result: cel.Value) -> str:
    try:
        return str(result.value()).strip()
    except Exception:  # an optional reports itself as an error whose value cannot be read
        return NOT_PLAIN


class CppProgram(Program):
    def __init__(self, source: str, result_type: str, expression: cel.Expression, text: str, env: cel.Env) -> None:
        self.source = source
        self.result_type = result_type
        self._expression = expression
        self._text = text
        self._env = env

    def bind(self, values: Mapping[str, Any]) -> Program:
        # Activations cannot be extended, so the values become literals; `dyn` keeps the checker's view
        # of them what it was (dyn), so that the bound program type-checks exactly as the original did.
        text = self._text
        try:
            for name, value in values.items():
                bound = literal(value) if name == "now" else f"dyn({literal(value)})"
                text = f"cel.bind({name}, {bound}, (\n{text}\n))"
            checked = self._env.compile(text)
        except (ValueError, RuntimeError) as error:
            raise CelCompileError(f"cannot bind {', '.join(values)}: {error}") from error
        return CppProgram(self.source, self.result_type, checked, text, self._env)

    def evaluate(self, bindings: Any) -> Any:
        try:
            result = self._expression.eval(bindings.activation())
            if result.type() != cel.Type.ERROR:
                return _plain(result)
            message = _words(_STATUS.sub("", _error_text(result)))
        except CelEvalError:
            raise
        except Exception as error:  # cel-cpp raises some run-time errors (budget, duplicate key)
            message = _run_time_message(error)
        # Raised outside the handler, so that it refers to no frame of this evaluation.
        raise CelEvalError(bounded(message))


ACTIVATION_EVALUATIONS = 64
"""Evaluations one node's activation serves before it is made again (`--cel-activation-evaluations`)."""


class RenewingActivation:
    """A node's cel-cpp `Activation`, made again after it has served `limit` evaluations.

    cel-cpp's activation keeps memory for every distinct program evaluated against it (about 70 bytes to
    kilobytes each), and a node's kept bindings live as long as its context: with a new program per new
    pod key (a per-pod rule bound to the pod), that grew without bound. Kept bindings are evaluated only
    on a cache miss (a new pod key), so evaluations count distinct programs closely enough; counting them
    cannot be fooled by a freed program's id being reused. Renewing costs one lazy conversion of the
    node's values again, shared by the next `limit` evaluations."""

    __slots__ = ("_activation", "_env", "_left", "_limit", "_values")

    def __init__(self, env: cel.Env, values: dict[str, Any], limit: int) -> None:
        self._env = env
        self._values = values
        self._limit = self._left = limit
        self._activation = env.Activation(values)

    def activation(self) -> Any:
        """The activation for one more evaluation."""
        self._left -= 1
        if self._left < 0:
            self._activation = self._env.Activation(self._values)
            self._left = self._limit - 1
        return self._activation


class CppEngine(Engine):
    name: ClassVar[EngineName] = "cpp"

    def __init__(self, activation_evaluations: int = ACTIVATION_EVALUATIONS) -> None:
        self._activation_evaluations = activation_evaluations
        self._env = cel.NewEnv(
            variables=_declarations(),
            functions=_functions(),
            # cel-go's string extensions are the library's own (libs/strings.py), not cel-cpp's; its math
            # extension is left out, as celpy has none (dialect.py refuses `math.*` on both engines).
            extensions=[
                ext_optional.ExtOptional(),
                ext_bindings.ExtBindings(),
            ],
        )

    def compile(self, source: str, variables: Sequence[VariableSource] = ()) -> Program:
        dialect.check(source)
        try:
            checked, text = self._checked(rewritten(source))
        except CelCompileError as error:
            if error.line is None and "recursion" in error.message:  # cel-cpp's own has no position (-1:-1)
                raise dialect.nesting_error(source) from error
            raise
        result_type = _type_name(checked.return_type())
        if variables:
            inlined = [VariableSource(v.name, rewritten(v.expression)) for v in variables]
            checked, text = self._checked(inline_variables(rewritten(source), inlined))
        return CppProgram(source, result_type, checked, text, self._env)

    def _checked(self, text: str) -> tuple[cel.Expression, str]:
        """`text` parsed and checked, and the text that was: Kubernetes CEL compares int, uint and double
        by value (`1 < 1.5`), as cel-cpp's runtime does but not its checker, so an expression refused for
        that alone is checked again with the compared operands as `dyn` (values unchanged)."""
        try:
            return self._env.compile(text), text
        except RuntimeError as error:
            if not _CROSS_NUMERIC.search(str(error)):
                raise _compile_error(error) from error
            wrapped = numbers_compared_as_dyn(text)
            try:
                return self._env.compile(wrapped), wrapped
            except RuntimeError:
                raise _compile_error(error) from error

    def convert(self, value: Any) -> Any:
        # The activation converts lazily and caches inside itself; there is nothing to do ahead.
        return value

    def bindings(self, values: Mapping[str, Any]) -> Any:
        return RenewingActivation(self._env, dict(values), self._activation_evaluations)
