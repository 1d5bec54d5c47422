"""One conformance table, run against both CEL engines: same expression, same context, same answer.

Where an engine strays from the CEL spec (celpy mixes int and double; it refuses `1 == 1.0` at
run time) the adapter corrects it, and this table is what proves it. The Kubernetes CEL libraries
have a table of their own (tests/cel_library_cases.py: Kubernetes' library test cases, ported, and
the documentation's examples), run on both engines in process and through `rulesched eval`.
"""

from __future__ import annotations

import dataclasses
import datetime
import gc
import json
import time
from pathlib import Path
from typing import Any

import pytest

from rulesched.cli import main
from rulesched.rules.cel import ENGINE_NAMES, CelCompileError, CelEvalError, Engine, VariableSource, make_engine
from rulesched.rules.cel.libs import OVERLOADS
from rulesched.rules.errors import LoadError, RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from tests.builders import rule_set, write_rules
from tests.cel_library_cases import DOCUMENTED, KUBERNETES, KUBERNETES_DIFFERENCES, Error, Refused
from tests.paths import REPO
from tests.test_docs import CONSOLE_BLOCKS, Block, console_session
from tests.test_docs import run as run_command

NOW = datetime.datetime(2026, 11, 22, 1, 0, tzinfo=datetime.UTC)


CONTEXT: dict[str, Any] = {
    "pod": {
        "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web", "zone": "z1"}},
        "spec": {"priority": 100, "containers": [{"name": "c", "image": "nginx"}]},
    },
    "node": {
        "metadata": {"name": "node-a", "labels": {"filter.xy.com": "yes", "zone": "z1"}},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ]
        },
    },
    "metrics": {"cpu": {"usage": 0.5, "utilization": 0.25}, "age": 12.0},
    "allocatable": {"cpu": 2.0, "memory": 4294967296.0, "pods": 110.0},
    "requests": {"cpu": 0.25, "memory": 67108864.0},
    "variables": {},
    "now": NOW,
}

TABLE: list[tuple[str, Any]] = [
    # every context variable
    ("pod.metadata.name", "web-1"),
    ("node.metadata.labels['zone']", "z1"),
    ("metrics.cpu.usage", 0.5),
    ("allocatable.cpu", 2.0),
    ("requests.memory", 67108864.0),
    ("now == timestamp('2026-11-22T01:00:00Z')", True),
    ("now - duration('1h') < now", True),
    ("'filter.xy.com' in node.metadata.labels", True),
    ("pod.metadata.labels.zone == node.metadata.labels.zone", True),
    ("metrics.cpu.usage + requests.cpu < allocatable.cpu * 0.8", True),
    # has() and missing keys
    ("has(metrics.cpu)", True),
    ("has(metrics.memory)", False),
    ("has(pod.metadata.annotations)", False),
    ("has(node.metadata.labels.zone)", True),
    ("node.metadata.labels['missing']", Error("")),
    ("metrics.memory.usage", Error("")),
    ("'missing' in node.metadata.labels", False),
    ("has(metrics.memory) ? metrics.memory.usage : 0.0", 0.0),
    # has(e.f) when e is absent or not a map: an error, as in cel-go (celpy's own has() said false)
    ("has(metrics.memory.usage)", Error("")),
    ("has(node.metadata.labels.zone.x)", Error("")),
    ("!has(metrics.memory) || has(metrics.memory.usage)", True),
    # macros
    ("node.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')", True),
    ("node.status.conditions.all(c, c.type != 'DiskPressure')", True),
    ("node.status.conditions.exists_one(c, c.status == 'True')", True),
    ("node.status.conditions.map(c, c.type)", ["MemoryPressure", "Ready"]),
    ("node.status.conditions.filter(c, c.status == 'True').size()", 1),
    ("size(pod.spec.containers)", 1),
    ("[1, 2, 3].all(x, x > 0)", True),
    # int and double: no silent mixing in arithmetic, value comparison across kinds
    ("pod.spec.priority + 1", 101),
    ("pod.spec.priority * 2.0", Error("no matching overload")),
    ("double(pod.spec.priority) * 2.0", 200.0),
    ("pod.spec.priority == 100.0", True),
    ("pod.spec.priority < 100.5", True),
    ("allocatable.pods > 100", True),
    ("int(allocatable.cpu) + 1", 3),
    ("allocatable.cpu * 2", Error("no matching overload")),
    ("7 / 2", 3),
    ("7.0 / 2.0", 3.5),
    ("-metrics.cpu.usage", -0.5),
    # errors
    ("1 / 0", Error("divide")),
    ("pod.metadata.name + 1", Error("no matching overload")),
    ("int('x')", Error("")),
    ("false || node.metadata.labels['missing'] == 'x'", Error("")),
    ("true || node.metadata.labels['missing'] == 'x'", True),
    ("false && node.metadata.labels['missing'] == 'x'", False),
    # strings and regex
    ("pod.metadata.name.startsWith('web')", True),
    ("pod.metadata.name.matches('^web-[0-9]+$')", True),
    ("pod.metadata.namespace.contains('ho')", True),
    ("pod.metadata.name.find('[0-9]+')", "1"),
    ("'a' + 'a' == 'aa'", True),
    ("[1] + [2] == [1, 2]", True),
    ("pod.metadata.name + '!' == 'web-1!'", True),
    # cross-type numeric comparisons, as Kubernetes CEL has them (arithmetic still does not mix)
    ("1 < 1.5", True),
    ("1 == 1.0", True),
    ("2.0 > 1 && 1u < 2.5 && 3 >= 3u", True),
    ("pod.spec.priority >= 99.5", True),
    ("[1, 2].all(x, x < 2.5)", True),
    ("1 != 1.5", True),
    # quantity()
    ("quantity('1500m') == quantity('1.5')", True),
    ("quantity('1Gi').isGreaterThan(quantity('1G'))", True),
    ("quantity('500Mi').isLessThan(quantity('1Gi'))", True),
    ("quantity('2').compareTo(quantity('2000m'))", 0),
    ("quantity('1Ki').asInteger()", 1024),
    ("quantity('250m').asApproximateFloat()", 0.25),
    ("quantity('1.5').isInteger()", False),
    ("quantity('1').add(quantity('500m')) == quantity('1.5')", True),
    ("quantity('1').sub(2).sign()", -1),
    ("quantity('1e3').asInteger()", 1000),
    ("isQuantity('1Gi')", True),
    ("isQuantity('1K')", False),
    ("quantity(dyn('1K'))", Error("invalid quantity")),
    ("quantity('1.5').asInteger()", Error("not an integer")),
]


def run(engine: Engine, source: str, context: dict[str, Any], variables: list[VariableSource] | None = None) -> Any:
    program = engine.compile(source, variables or [])
    bindings = engine.bindings({name: engine.convert(value) for name, value in context.items()})
    try:
        return program.evaluate(bindings)
    except CelEvalError as error:
        return error


@pytest.mark.parametrize(("source", "expected"), TABLE, ids=[source for source, _ in TABLE])
def test_conformance(engine: Engine, source: str, expected: Any) -> None:
    result = run(engine, source, CONTEXT)
    if isinstance(expected, Error):
        assert isinstance(result, CelEvalError), f"{engine.name}: {source} gave {result!r}, want an error"
        assert expected.fragment in str(result).lower()
    else:
        assert not isinstance(result, CelEvalError), f"{engine.name}: {source} failed: {result}"
        assert result == expected
        assert type(result) is type(expected)


def test_variables_see_earlier_variables_on_both_engines(engine: Engine) -> None:
    variables = [VariableSource("cpu", "metrics.cpu.usage"), VariableSource("twice", "variables.cpu * 2.0")]
    assert run(engine, "variables.twice + variables.cpu", CONTEXT, variables) == 1.5


def test_variables_compare_numbers_across_types_on_both_engines(engine: Engine) -> None:
    variables = [VariableSource("small", "pod.spec.priority < 100.5")]
    assert run(engine, "variables.small && allocatable.pods > 100", CONTEXT, variables) is True


def test_comparing_a_string_with_a_number_is_still_a_type_error(engine: Engine) -> None:
    with pytest.raises(CelCompileError, match="no matching overload for '_<_'"):
        engine.compile("'a' < 1")


def test_a_failing_variable_fails_the_expression_that_reads_it(engine: Engine) -> None:
    variables = [VariableSource("mem", "metrics.memory.usage")]
    assert isinstance(run(engine, "variables.mem > 0.0", CONTEXT, variables), CelEvalError)


@pytest.mark.parametrize(
    ("source", "fragment", "position"),
    [
        ("1 +", "syntax", (1, 4)),
        ("node.metadata.labels[", "", (1, 22)),
    ],
)
def test_syntax_errors_carry_a_position(engine: Engine, source: str, fragment: str, position: tuple[int, int]) -> None:
    with pytest.raises(CelCompileError) as caught:
        engine.compile(source)
    assert fragment in caught.value.message.lower()
    assert caught.value.line == position[0]


@pytest.mark.parametrize(
    ("source", "result_type"),
    [
        ("'x' in node.metadata.labels", "bool"),
        ("metrics.cpu.usage", "dyn"),
        ("allocatable.cpu * 2.0", "double"),
        ("metrics.cpu.usage * 2.0", "double"),
        ("2.0 * 3.0", "double"),
        ("1 + 2", "int"),
        ("'a' + 'b'", "string"),
    ],
)
def test_both_engines_report_the_same_result_type(engine: Engine, source: str, result_type: str) -> None:
    assert engine.compile(source).result_type == result_type


def test_type_errors_are_compile_errors_on_both_engines(engine: Engine) -> None:
    with pytest.raises(CelCompileError, match="no matching overload"):
        engine.compile("1 + 'a'")


def test_evaluate_many_returns_errors_in_place(engine: Engine) -> None:
    program = engine.compile("node.metadata.labels['zone'] == 'z1'")
    nodes = [
        {"metadata": {"labels": {"zone": "z1"}}},
        {"metadata": {"labels": {}}},
        {"metadata": {"labels": {"zone": "z2"}}},
    ]
    bindings = [engine.bindings({k: engine.convert(v) for k, v in {**CONTEXT, "node": n}.items()}) for n in nodes]
    first, second, third = program.evaluate_many(bindings)
    assert first is True
    assert isinstance(second, CelEvalError)
    assert third is False


def test_errors_returned_in_place_leave_no_reference_cycle() -> None:
    """The extender holds the garbage collector off while it answers: what a request leaves behind must
    be freed by reference counting, or a first request over thousands of nodes keeps their bindings.
    For the default engine; celpy's evaluator makes reference cycles of its own."""
    engine = make_engine("cpp")
    program = engine.compile("node.metadata.labels['zone'] == 'z1'")
    bindings = [engine.bindings({k: engine.convert(v) for k, v in {**CONTEXT, "node": {"metadata": {}}}.items()})]
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        (error,) = program.evaluate_many(bindings)
        assert isinstance(error, CelEvalError)
        del error
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, CelEvalError)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert left == [], "a CelEvalError was only freed by the garbage collector"


# The Kubernetes CEL libraries (tests/cel_library_cases.py)

LIBRARY_CASES = [case for cases in KUBERNETES.values() for case in cases] + DOCUMENTED


def outcome(engine: Engine, source: str) -> Any:
    """The value of `source`, or the error it gives at load (`CelCompileError`) or at run time."""
    try:
        return run(engine, source, CONTEXT)
    except CelCompileError as error:
        return error


def assert_outcome(engine: Engine, source: str, result: Any, expected: Any) -> None:
    if isinstance(expected, Refused):
        assert isinstance(result, CelCompileError), f"{engine.name}: {source} gave {result!r}, want a load error"
        assert expected.fragment in result.message.lower(), result.message
    elif isinstance(expected, Error):
        assert isinstance(result, CelEvalError), f"{engine.name}: {source} gave {result!r}, want an error"
        assert expected.fragment in str(result).lower(), str(result)
    else:
        assert not isinstance(result, Exception), f"{engine.name}: {source} failed: {result}"
        assert result == expected
        assert type(result) is type(expected)


@pytest.mark.parametrize(("source", "expected"), LIBRARY_CASES, ids=[source for source, _ in LIBRARY_CASES])
def test_kubernetes_library_function(engine: Engine, source: str, expected: Any) -> None:
    assert_outcome(engine, source, outcome(engine, source), expected)


@pytest.mark.parametrize("source", sorted(KUBERNETES_DIFFERENCES))
def test_where_rulesched_differs_from_kubernetes_both_engines_agree(engine: Engine, source: str) -> None:
    """The library types are strings here (docs/rules/functions.md): the few ported Kubernetes cases that
    look at the type itself answer as documented, alike on both engines."""
    answer, _ = KUBERNETES_DIFFERENCES[source]
    assert_outcome(engine, source, outcome(engine, source), answer)


def eval_answer(capsys: pytest.CaptureFixture[str], source: str, engine_name: str) -> dict[str, Any]:
    main(["eval", source, "--cel-engine", engine_name, "--output", "json"])
    answer: dict[str, Any] = json.loads(capsys.readouterr().out)
    return answer


def expected_answer(expected: Any) -> tuple[str, Any]:
    if isinstance(expected, Refused):
        return "compile", expected.fragment
    if isinstance(expected, Error):
        return "runtime", expected.fragment
    return "value", expected


@pytest.mark.parametrize("engine_name", ENGINE_NAMES)
def test_the_library_table_through_rulesched_eval(capsys: pytest.CaptureFixture[str], engine_name: str) -> None:
    """What a rule author sees with `rulesched eval --output json` is the table's answer, on each engine."""
    for source, expected in LIBRARY_CASES:
        answer = eval_answer(capsys, source, engine_name)
        kind, want = expected_answer(expected)
        if kind == "value":
            assert answer == {"value": json.loads(json.dumps(want))}, source  # JSON's keys are strings
        else:
            assert answer["error"]["kind"] == kind, (source, answer)
            assert want in answer["error"]["message"].lower(), (source, answer)


CATASTROPHIC = "^(a+)+$"
"""Exponential for a backtracking matcher on 'aaa…a!'; linear for RE2."""


@pytest.mark.parametrize("function", ["find", "matches", "findAll"])
def test_a_catastrophic_regex_is_linear_on_both_engines(engine: Engine, function: str) -> None:
    """A pod label is chosen by whoever creates the pod: 'a' x 10,000 then '!' must not stall a request."""
    program = engine.compile(f"pod.metadata.labels.app.{function}('{CATASTROPHIC}')")
    pod = {"metadata": {"labels": {"app": "a" * 10_000 + "!"}}}
    bindings = engine.bindings({"pod": engine.convert(pod)})
    started = time.perf_counter()
    result = program.evaluate(bindings)
    assert time.perf_counter() - started < 0.5
    assert result in ("", False, [])


@pytest.mark.parametrize("pattern", ["a(?=b)", "a(?!b)", "(?<=a)b", "(a)\\\\1"])
def test_lookaround_and_backreferences_are_load_errors(engine: Engine, pattern: str) -> None:
    with pytest.raises(CelCompileError, match="invalid regular expression literal"):
        engine.compile(f"'ab'.matches('{pattern}')")


def test_a_literal_that_can_never_work_is_a_load_error_at_its_line(tmp_path: Path, engine: Engine) -> None:
    spec = (
        "filters:\n- name: bad-regex\n  expression: |\n"
        "    node.metadata.name != '' &&\n      node.metadata.name.matches('(')"
    )
    path = write_rules(tmp_path, rule_set("x", spec))
    with pytest.raises(RulesLoadFailed) as failure:
        load_rule_book([tmp_path], engine)
    (error,) = failure.value.errors
    assert "invalid regular expression literal '('" in error.message
    expected = LoadError(
        file=str(path),
        message="",
        line=8,
        rule_set="x",
        rule="bad-regex",
        field="spec.filters[0].expression",
        expression="node.metadata.name != '' &&\n  node.metadata.name.matches('(')\n",
        position=(2, 30),
    )
    assert dataclasses.replace(error, message="") == expected


def test_a_function_only_one_engine_has_is_refused_on_both(engine: Engine) -> None:
    with pytest.raises(CelCompileError, match=r"math\.least: not available on the celpy engine"):
        engine.compile("math.least(1, 2) == 1")


FUNCTION_PAGE_BLOCKS = [b for b in CONSOLE_BLOCKS if b.page.name == "functions.md"]


@pytest.mark.parametrize("block", FUNCTION_PAGE_BLOCKS, ids=str)
def test_the_functions_page_answers_alike_on_celpy(
    block: Block, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/rules/functions.md shows the default engine's answers (tests/test_docs.py runs them); celpy
    gives each of them too."""
    assert FUNCTION_PAGE_BLOCKS
    for command, shown in console_session(block.text):
        _, output = run_command(f"{command} --cel-engine celpy", capsys)
        assert output.rstrip("\n") == shown, command


def test_every_library_function_is_in_the_functions_reference() -> None:
    """docs/rules/functions.md names every function the libraries declare (the reserved `rulesched_*`
    helpers aside; Kubernetes' formats by their names)."""
    page = (REPO / "docs" / "rules" / "functions.md").read_text()
    names = {o.function for o in OVERLOADS if not o.function.startswith("rulesched_")}
    missing = [n for n in sorted(names) if f"`{n}" not in page and f"`{n.removeprefix('format.')}`" not in page]
    assert missing == []
