"""Comprehensions and their errors on both engines: cel-cpp's results, errors of constant size (issue #35).

Each row of `SAME` is evaluated on both engines and must give the same value, or an error with the same
message: which error a comprehension keeps when several elements fail is cel-cpp's choice (the first
for `all`, `exists` and `map`, the last for `exists_one` and `filter`), and celpy's errors are worded as
cel-cpp's (issue #40). The rest are the bounds inside a comprehension: the step budget and the deadline
per element, the size of an error value, the length of a message.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

import pytest

from rulesched.rules.cel import ENGINE_NAMES, CelEvalError, Engine, EngineName, Limits, deadline, make_engine
from rulesched.rules.cel.base import MESSAGE_LIMIT
from rulesched.rules.cel.library import NOT_ITERABLE

CONTEXT: dict[str, Any] = {
    "pod": {
        "metadata": {"annotations": {"a": "x", "b": "1", "c": "y"}},
        "spec": {"mixed": [1, "a", 2, "b"], "tolerations": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "big": "x" * 100_000},
    },
    "node": {},
}

SAME = [
    # CEL's error semantics: an element that decides wins over an error, else the first error
    "pod.spec.mixed.all(x, x > 0)",
    "pod.spec.mixed.exists(x, x > 0)",
    "pod.spec.mixed.all(x, x == 1)",
    "pod.spec.mixed.exists(x, x == 'zz')",
    "[0, 'a'].all(x, 10 / x > 0)",
    "['a', 0].all(x, 10 / x > 0)",
    "[0, 'a'].exists(x, 10 / x > 0)",
    "[0, 'a', false].all(x, 10 / x > 0 && x)",
    "[0, 'a', true].all(x, x == true || 10 / x > 0)",
    "pod.metadata.annotations.all(k, int(pod.metadata.annotations[k]) >= 0)",
    "pod.metadata.annotations.exists(k, int(pod.metadata.annotations[k]) >= 0)",
    "pod.metadata.annotations.all(k, v, int(v) >= 0)",
    # exists_one and filter keep the last error; map the first
    "[0, 'a', 1].exists_one(x, 10 / x > 0)",
    "[0, 'a', 0].exists_one(x, 10 / x > 0)",
    "[1, 1, 'a'].exists_one(x, x > 0)",
    "[1, 1].exists_one(x, x > 0)",
    "[0, 'a', 1].filter(x, 10 / x > 0)",
    "['a', 0, 1].filter(x, 10 / x > 0)",
    "['a', 0].map(x, 10 / x)",
    "[1, 2, 3].map(x, x > 1, x * 2)",
    "[0, 'a', 2].map(x, 10 / x > 1, x * 2)",
    "{'a': 1, 'b': 2}.filter(k, k == 'b')",
    "pod.metadata.annotations.transformMap(k, v, int(v))",
    # a body that is not a bool
    "[1, 2].all(x, dyn(x))",
    "[1, 2].exists(x, dyn(x))",
    "[1, 2].filter(x, dyn(x))",
    "[1, 2].exists_one(x, dyn(x))",
    # && and || outside comprehensions: the left error of two
    "(1 / 0 > 1) && (dyn('a') < 1)",
    "(dyn('a') < 1) && (1 / 0 > 1)",
    "(1 / 0 > 1) || (dyn('a') < 1)",
    "dyn(1) && true",
    # a range that is neither a list nor a map
    "pod.spec.tolerations.all(t, t == 'x')",
    "pod.spec.tolerations.exists(t, t == 'x')",
    "pod.spec.tolerations.exists_one(t, true)",
    "pod.spec.tolerations.map(t, t)",
    "pod.spec.tolerations.filter(t, true)",
    "dyn(1).all(t, true)",
    # celpy's errors in cel-cpp's words
    "pod.spec.lables",
    "pod.metadata.annotations['zz']",
    "pod.metadata.annotations[dyn(1)]",
    "pod.spec.mixed[10]",
    "[1, 2].all(x, dyn('a').x == 1)",
    "int('x')",
    "uint('x')",
    "double('x')",
    "[1].map(x, 1 % 0)",
    "[1].map(x, 1 / 0)",
    "pod.spec.mixed.exists_one(x, x > 0)",
]


@pytest.fixture(scope="module")
def engines() -> dict[str, Engine]:
    return {name: make_engine(name) for name in ENGINE_NAMES}


def outcome(engine: Engine, expression: str, limits: Limits | None = None, context: dict[str, Any] = CONTEXT) -> Any:
    """The value of `expression` in `context`, or the `CelEvalError` it raised."""
    if limits is not None:
        engine.limits = limits
    program = engine.compile(expression)
    bindings = engine.bindings({name: engine.convert(value) for name, value in context.items()})
    try:
        return program.evaluate(bindings)
    except CelEvalError as error:
        return error


def shown(result: Any) -> Any:
    return ("error", str(result)) if isinstance(result, CelEvalError) else ("value", result)


@pytest.mark.parametrize("expression", SAME)
def test_both_engines_give_the_same_value_or_the_same_error(engines: dict[str, Engine], expression: str) -> None:
    cpp, celpy = (shown(outcome(engines[name], expression)) for name in ("cpp", "celpy"))
    assert celpy == cpp


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_a_range_that_is_no_list_or_map_is_the_same_error_at_once(engine: EngineName) -> None:
    error = outcome(make_engine(engine), "pod.spec.big.all(c, c == 'x')")
    assert isinstance(error, CelEvalError)
    assert str(error) == NOT_ITERABLE


@pytest.mark.parametrize("engine", ENGINE_NAMES)
@pytest.mark.parametrize("size", [30, 1000])
def test_errors_that_meet_keep_one_of_constant_size(engine: EngineName, size: int) -> None:
    # Before, celpy's `all` wrapped both errors' repr in the next error: the message doubled per element.
    context = {"pod": {"spec": {"numbers": [f"not-a-number-{i}" for i in range(size)]}}, "node": {}}
    expression = " || ".join(f"pod.spec.numbers.{macro}(x, int(x) > 0)" for macro in ("all", "exists", "exists_one"))
    error = outcome(make_engine(engine), expression, context=context)
    assert str(error) == "cannot convert string to int"


def test_a_chain_of_failing_conjunctions_keeps_one_error() -> None:
    # celpy's `&&` of two errors raised a TypeError embedding both: 30 terms made 2^30 characters.
    expression = " && ".join(["int(pod.spec.tolerations) > 0"] * 30)
    error = outcome(make_engine("celpy"), expression)
    assert str(error) == "cannot convert string to int"


def test_the_deadline_is_checked_at_each_element() -> None:
    # Between tree nodes the clock is read every 1,024 steps; a comprehension reads it at each element.
    engine = make_engine("celpy")
    program = engine.compile("[1, 2, 3].all(x, true)")
    bindings = engine.bindings({name: engine.convert(value) for name, value in CONTEXT.items()})
    with deadline(time.monotonic() - 1), pytest.raises(CelEvalError, match="deadline"):
        program.evaluate(bindings)


def test_an_error_counts_against_the_size_budget() -> None:
    error = outcome(make_engine("celpy"), "pod.spec.missing_field_name", Limits(size=20))
    assert "over the limit of 20" in str(error)


@pytest.mark.parametrize(
    "expression",
    ["{'a': 1}[pod.spec.big]", "pod.spec.big.x", "[pod.spec.big].all(x, x.y == 1)", "pod.spec.big < 1"],
)
def test_an_error_about_a_large_value_has_a_bounded_message(engines: dict[str, Engine], expression: str) -> None:
    error = outcome(engines["celpy"], expression.replace("< 1", "< dyn(1)"))
    assert isinstance(error, CelEvalError)
    assert len(str(error)) <= MESSAGE_LIMIT


def test_debug_logging_does_not_write_the_values_celpy_evaluates(caplog: pytest.LogCaptureFixture) -> None:
    # celpy logs each tree node's values at debug level: a 100,000-character string per node read.
    caplog.set_level(logging.DEBUG)
    outcome(make_engine("celpy"), "[pod.spec.big, pod.spec.big].all(x, x.size() > 0 && x.y == 1)")
    assert sum(len(record.getMessage()) for record in caplog.records) < 10_000


@pytest.mark.parametrize("body", ["int(x) > 0", "x / 2 == 1"])
def test_failing_elements_leave_no_garbage_for_the_collector(body: str) -> None:
    # The extender holds off garbage collection while it answers: each element's error, holding the Python
    # exception it was made from and that one's frame, was a reference cycle (145,000 objects per 1,000).
    context = {"pod": {"spec": {"numbers": [f"not-a-number-{i}" for i in range(1000)]}}, "node": {}}
    engine = make_engine("celpy")
    program = engine.compile(f"pod.spec.numbers.all(x, {body})")
    bindings = engine.bindings({name: engine.convert(value) for name, value in context.items()})
    gc.collect()
    gc.disable()
    try:
        with pytest.raises(CelEvalError):
            program.evaluate(bindings)
        assert gc.collect() < 1000
    finally:
        gc.enable()
