"""The load-time type check raises no false alarm (issue #40, point 3): every shipped rule set, example and
documented rule file, every RuleTest that passes, every Kubernetes CEL library case and conformance case
that compiles still does. Where the check and the evaluation could disagree, these tests show which wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main
from rulesched.rules.cel import CelEvalError, Engine
from rulesched.rules.cel.typecheck import TypeCheckError, typed
from rulesched.rules.errors import LoadError
from rulesched.rules.loader import Document, compile_documents
from tests.builders import decide, load_spec, make_context, make_node, make_pod
from tests.cel_library_cases import KUBERNETES_DIFFERENCES, Refused
from tests.paths import REPO
from tests.rules.test_cel_conformance import CONTEXT, LIBRARY_CASES, TABLE
from tests.test_docs import RULE_BLOCKS

TYPE_CHECK_MESSAGES = ("undefined field", "no matching overload", "which has no field", "ranges over", "must be a")
"""What the type check's errors say (and only they, among the errors of files that load today)."""
ON_PURPOSE = {"examples/broken-rules/broken.yaml", "examples/typo-rules/zone-a.yaml"}
"""Rule files broken on purpose (docs/rules/language.md shows what `rulesched check` says of them)."""
CHECK_WINS = [
    "has(node.metadata.labels.zone.x)",
    "pod.metadata.name + 1",
    "pod.spec.priority * 2.0",
    "allocatable.cpu * 2",
]
"""Conformance cases that fail on every input when evaluated: the check refuses them at load."""


def rule_set_documents() -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, document) for every RuleSet in rules/, examples/ and the docs' rule files."""
    for path in sorted([*(REPO / "rules").rglob("*.yaml"), *(REPO / "examples").rglob("*.yaml")]):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "RuleSet":
                yield str(path.relative_to(REPO)), document
    for block in RULE_BLOCKS:
        for document in yaml.safe_load_all(block.text):
            if isinstance(document, dict) and document.get("kind") == "RuleSet":
                yield str(block), document


DOCUMENTS = list(rule_set_documents())


def type_errors(where: str, document: dict[str, Any], engine: Engine) -> list[LoadError]:
    _, errors = compile_documents([Document(file=where, data=document, node=None)], engine)
    return [e for e in errors if any(m in e.message for m in TYPE_CHECK_MESSAGES) and where not in ON_PURPOSE]


def test_every_place_rules_are_found_is_read() -> None:
    places = {where.split("/")[0] for where, _ in DOCUMENTS}
    assert {"rules", "examples"} <= places
    assert any(".md" in where for where, _ in DOCUMENTS)
    assert len(DOCUMENTS) >= 20


@pytest.mark.parametrize(("where", "document"), DOCUMENTS, ids=[w for w, _ in DOCUMENTS])
def test_every_shipped_example_and_documented_rule_set_type_checks(
    engine: Engine, where: str, document: dict[str, Any]
) -> None:
    assert type_errors(where, document, engine) == []


@pytest.mark.parametrize("tests", ["rules/tests", "examples/incident", "examples/usage-estimates"])
def test_the_rule_tests_that_passed_pass(tests: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", str(REPO / tests)]) == 0, capsys.readouterr()


CASES = [
    source
    for source, expected in [*TABLE, *LIBRARY_CASES, *((s, a) for s, (a, _) in KUBERNETES_DIFFERENCES.items())]
    if not isinstance(expected, Refused) and source not in CHECK_WINS
]


def test_every_case_that_compiles_type_checks() -> None:
    refused = []
    for source in CASES:
        try:
            typed(source, {})
        except TypeCheckError as error:
            refused.append((source, error.message))
    assert refused == []
    assert len(CASES) > 600


@pytest.mark.parametrize("source", CHECK_WINS)
def test_where_the_check_is_stricter_it_wins_over_an_evaluation_that_always_fails(engine: Engine, source: str) -> None:
    with pytest.raises(TypeCheckError):
        typed(source, {})
    program = engine.compile(source)
    values = {name: engine.convert(value) for name, value in CONTEXT.items()}
    with pytest.raises(CelEvalError):
        program.evaluate(engine.bindings(values))


def test_where_a_value_does_not_fit_the_schema_the_evaluation_decides(engine: Engine, tmp_path: Path) -> None:
    """The check trusts the schema (`priority` is an int); a pod whose JSON says otherwise is an evaluation
    error on each node, which the rule's failurePolicy handles, as for any other input."""
    book = load_spec(tmp_path, engine, "filters:\n- name: urgent\n  expression: pod.spec.priority > 10\n")
    pod = make_pod()
    pod["spec"]["priority"] = "high"
    decision = decide(book, pod, [make_context(make_node("node-a"))])
    verdict = decision.nodes["node-a"]
    [result] = verdict.filters
    assert result.error is not None
    assert verdict.passed is False


def test_a_result_the_check_cannot_know_is_named_by_its_cel_type_when_it_is_wrong(
    engine: Engine, tmp_path: Path
) -> None:
    """`dyn(…)` hides a type from the check: the evaluation decides, and says `string` as CEL does."""
    book = load_spec(tmp_path, engine, "filters:\n- name: named\n  expression: dyn(node.metadata.name)\n")
    decision = decide(book, make_pod(), [make_context(make_node("node-a"))])
    [result] = decision.nodes["node-a"].filters
    assert result.error == "filter returned string, not bool"
