"""The CEL adapter's interface: what both engines implement, their errors, limits and deadline.

`cpp` is cel-expr-python (Google's C++ runtime, fast, the default); `celpy` is cel-python (pure
Python, the portable reference). Both give the same results on the conformance table in
`tests/rules/test_cel_conformance.py`; where an engine strays from the CEL spec the adapter corrects it.

Rule expressions read the context variables of docs/rules/language.md. A rule set's `variables` are compiled
into each program that reads them, so a program is self-contained: callers evaluate it against one
node's bindings and get a plain Python value (or a `CelEvalError`) back. `Program.bind` fixes the
per-pod names of a program, so that per-node bindings can be cached and shared by every pod.

Nothing an expression or an input value does escapes as another exception: whatever goes wrong in an
evaluation (an engine exception, a budget, a deadline) is a `CelEvalError` (docs/rules/cost.md).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

EngineName = Literal["cpp", "celpy"]
UnknownFields = Literal["error", "warn"]
"""What a field a Kubernetes kind's schema lacks is at load: an error, or a warning (read as dyn)."""
ENGINE_NAMES: tuple[EngineName, ...] = ("cpp", "celpy")


class CelCompileError(Exception):
    """An expression that does not parse or type-check; `line` and `column` are 1-based."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


class CelCostError(CelCompileError):
    """An expression whose estimated worst-case cost is over the limit (`Limits.cost`)."""

    def __init__(self, message: str, estimate: int, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message, line, column)
        self.estimate = estimate


class CelEvalError(Exception):
    """An expression that failed on one input: a missing key, a wrong type, a division by zero, a budget."""


MESSAGE_LIMIT = 1024
"""Longest message of an evaluation error (characters): a library's error may quote an input string."""


def bounded(message: str) -> str:
    """`message` cut to `MESSAGE_LIMIT` characters, ending with `…` when cut."""
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 1] + "…"


@dataclass(frozen=True, slots=True)
class Limits:
    """What one expression may cost (docs/rules/cost.md); the defaults are Kubernetes' where it has one."""

    cost: int = 1_000_000
    """Largest estimated worst-case cost of one expression at load time (Kubernetes' PerCallLimit)."""
    steps: int = 1_000_000
    """Evaluation steps (celpy: tree nodes visited, each comprehension iteration at least one) per evaluation."""
    size: int = 1_000_000
    """Longest string, list or map one evaluation may build (characters or elements)."""
    unknown_fields: UnknownFields = "error"
    """A field the Kubernetes schema rulesched ships lacks (`pod.spec.newField`): refused at load, or a
    warning and read as dyn (for a field only a newer Kubernetes has; docs/rules/language.md)."""


DEADLINE_MESSAGE = "not evaluated: the request's deadline passed"


class _Clock(threading.local):
    deadline: float | None = None
    expired: bool = False


@dataclass(slots=True)
class Expiry:
    """Whether the deadline of a `deadline` block passed during its evaluations (set when it ends)."""

    expired: bool = False


_clock = _Clock()


class deadline:  # noqa: N801  (used as a function: `with deadline(at) as expiry:`)
    """Evaluations in this thread give up past `at` (a `time.monotonic()` value): each program not yet
    started fails at once with `DEADLINE_MESSAGE`, and celpy stops one in progress. The `Expiry` given
    tells, once the block ends, whether that happened. (A class, not a generator: entered on every call.)"""

    __slots__ = ("at", "expiry", "previous")

    def __init__(self, at: float | None) -> None:
        self.at = at
        self.expiry = Expiry()
        self.previous: tuple[float | None, bool] = (None, False)

    def __enter__(self) -> Expiry:
        self.previous = _clock.deadline, _clock.expired
        _clock.deadline, _clock.expired = self.at, False
        return self.expiry

    def __exit__(self, *failure: object) -> None:
        self.expiry.expired = _clock.expired
        _clock.deadline, _clock.expired = self.previous


def past_deadline() -> bool:
    """True (and the expiry recorded) when this thread's deadline has passed."""
    at = _clock.deadline
    if at is None or time.monotonic() < at:
        return False
    _clock.expired = True
    return True


@dataclass(frozen=True, slots=True)
class VariableSource:
    """A rule set variable as the engine needs it: its name and its (already valid) expression."""

    name: str
    expression: str


class Program(ABC):
    """One compiled expression, evaluated many times."""

    source: str
    result_type: str
    """What the type checker proved the result to be: bool, int, double, string, list, map or dyn."""

    @abstractmethod
    def evaluate(self, bindings: Any) -> Any:
        """The plain Python result for one node's bindings; raises `CelEvalError`."""

    @abstractmethod
    def bind(self, values: Mapping[str, Any]) -> Program:
        """This program with some context names fixed to JSON-like values (a trimmed pod, `requests`,
        `now`), evaluated against bindings that lack them: a per-node binding can then be built once and
        reused for every pod. Raises `CelCompileError` when a value cannot be bound; callers fall back
        to bindings that carry every value."""

    def evaluate_many(self, bindings: Sequence[Any]) -> list[Any]:
        """Results for many nodes in one call; a failed node gives its `CelEvalError` in place, and
        past the deadline every remaining node gets the deadline's error."""
        results: list[Any] = []
        for one in bindings:
            if _clock.deadline is not None and past_deadline():
                results.append(CelEvalError(DEADLINE_MESSAGE))
                continue
            try:
                results.append(self.evaluate(one))
            except CelEvalError as error:
                # Without its traceback: that refers to this frame, whose `bindings` and `results` would
                # then live in a reference cycle until the next garbage collection (which the extender
                # holds off while it answers), tens of megabytes on a first request over thousands of nodes.
                results.append(error.with_traceback(None))
        return results


class Engine(ABC):
    """Compiles expressions and prepares the values they run against."""

    name: ClassVar[EngineName]
    limits: Limits = Limits()

    @abstractmethod
    def compile(self, source: str, variables: Sequence[VariableSource] = ()) -> Program:
        """Compile `source` with the rule set variables it reads; raises `CelCompileError`."""

    @abstractmethod
    def convert(self, value: Any) -> Any:
        """A JSON-like value in the engine's own representation; done once, reused by many bindings."""

    @abstractmethod
    def bindings(self, values: Mapping[str, Any]) -> Any:
        """One node's context (converted values by name), ready for `Program.evaluate`."""
