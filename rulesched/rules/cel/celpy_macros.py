"""The comprehension macros and the logical operators of the celpy engine, with cel-cpp's results.

cel-python folds `all` and `exists` with `reduce`, and when two error values meet it raises a
`TypeError` whose message embeds the `repr` of both, which the next element wraps again: the message
doubled with every element. Here each macro is a loop over the range (a list's elements, a map's keys)
that asks `tick` before each element (one step of the budget, one look at the deadline), and when
errors meet one is kept, the one cel-cpp keeps, so an error value has a constant size:

- `all` / `exists`: an element whose body is false (true) decides; otherwise the first error;
- `map`: the first error (no later element can change it, so the loop stops there);
- `exists_one` and `filter`: the last error (cel-cpp's step is a conditional on the body);
- a range that is neither a list nor a map is an error at once (`NOT_ITERABLE`, as on cel-cpp).

`&&` and `||` follow the same rule outside comprehensions: `false && error` is false, and of two
errors the left one is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import celpy.evaluation
from celpy import celtypes

from rulesched.rules.cel.library import NOT_ITERABLE

Error = celpy.evaluation.CELEvalError
Body = Callable[[Any], Any]
"""A macro's body: the value of the expression for one element bound to the macro's variable."""
Tick = Callable[[], None]
"""Called before each element; raises to stop the evaluation (the budget, the deadline)."""

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_JUMP = "No matching overloads found : <jump_condition>"
"""cel-cpp's words for a `filter` or `exists_one` body that is not a bool."""


def _logical(decider: bool, name: str) -> Callable[[Any, Any], Any]:
    """CEL's commutative `&&` (decider false) or `||` (decider true), as cel-cpp evaluates it."""

    def combine(left: Any, right: Any) -> Any:
        if _is(left, decider) or _is(right, decider):
            return celtypes.BoolType(decider)
        for value in (left, right):
            if isinstance(value, Error):
                return value
        if not (isinstance(left, celtypes.BoolType) and isinstance(right, celtypes.BoolType)):
            return Error(f"No matching overloads found : {name}")
        return celtypes.BoolType(not decider)

    return combine


def _is(value: Any, truth: bool) -> bool:
    return isinstance(value, celtypes.BoolType) and bool(value) is truth


logical_and = _logical(False, "_&&_")
logical_or = _logical(True, "_||_")


def comprehension(name: str, receiver: Any, bodies: Sequence[Body], tick: Tick) -> Any:
    """The value of `receiver.<name>(x, bodies…)`; `bodies` has two entries for `map(x, predicate, f)`."""
    if isinstance(receiver, Error):
        return receiver
    if not isinstance(receiver, (celtypes.ListType, celtypes.MapType)):
        return Error(NOT_ITERABLE)
    elements = _ticking(receiver, tick)
    if name == "all":
        return _fold(elements, bodies[0], logical_and, False)
    if name == "exists":
        return _fold(elements, bodies[0], logical_or, True)
    if name == "exists_one":
        return _exists_one(elements, bodies[0])
    if name == "filter":
        return _filter_map(elements, bodies[0], _itself)
    if len(bodies) == 2:
        return _filter_map(elements, bodies[0], bodies[1])
    return _map(elements, bodies[0])


def _ticking(receiver: Iterable[Any], tick: Tick) -> Iterable[Any]:
    for element in receiver:
        tick()
        yield element


def _fold(elements: Iterable[Any], body: Body, combine: Callable[[Any, Any], Any], decider: bool) -> Any:
    accumulated: Any = celtypes.BoolType(not decider)
    for element in elements:
        accumulated = combine(accumulated, body(element))
        if _is(accumulated, decider):
            return accumulated  # decided: cel-cpp's loop condition stops here
    return accumulated


def _condition(value: Any) -> Any:
    """A body's value as a condition: a bool, or the error it is (or that it is no bool)."""
    if isinstance(value, (celtypes.BoolType, Error)):
        return value
    return Error(_JUMP)


def _exists_one(elements: Iterable[Any], body: Body) -> Any:
    count, error = 0, None
    for element in elements:
        holds = _condition(body(element))
        if isinstance(holds, Error):
            error = holds
        elif holds:
            count += 1
    return error if error is not None else celtypes.BoolType(count == 1)


def _map(elements: Iterable[Any], body: Body) -> Any:
    values: list[Any] = []
    for element in elements:
        value = body(element)
        if isinstance(value, Error):
            return value
        values.append(value)
    return celtypes.ListType(values)


def _itself(element: Any) -> Any:
    return element


def _filter_map(elements: Iterable[Any], predicate: Body, transform: Body) -> Any:
    """`map(x, predicate, transform)` and `filter(x, predicate)` (the transform `_itself`): a predicate's
    error replaces the result, a transform's first error stays (cel-cpp's step: `predicate ? result +
    [transform] : result`)."""
    values: list[Any] = []
    error = None
    for element in elements:
        holds = _condition(predicate(element))
        if isinstance(holds, Error):
            error = holds
        elif holds and error is None:
            value = transform(element)
            if isinstance(value, Error):
                error = value
            else:
                values.append(value)
    return error if error is not None else celtypes.ListType(values)
