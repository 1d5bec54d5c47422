"""The editor schemas (schemas/, `rulesched schema KIND`): generated from the loader's models, accepting every
shipped and documented file, rejecting a broken one at the field `rulesched check` names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from rulesched.cli import main
from rulesched.rules.cel import make_engine
from rulesched.rules.errors import RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.tools.recording_read import Header
from rulesched.tools.ruletest.model import RuleTest
from rulesched.tools.schemas import FILES, KINDS, render
from tests.paths import EXAMPLES, REPO, RULES
from tests.test_docs import blocks

SCHEMAS = REPO / "schemas"
BROKEN_EXAMPLE = EXAMPLES / "broken-rules" / "broken.yaml"
SHIPPED = sorted(p for p in [*RULES.rglob("*.yaml"), *EXAMPLES.rglob("*.yaml")] if p != BROKEN_EXAMPLE)
"""Every YAML file shipped: rule files, RuleTests and their fixtures (NodeLists and such, not ours to check)."""
OURS = {"RuleSet", "MetricSource", "RuleTest"}
RECORDING = EXAMPLES / "recording" / "segment-000001.jsonl"


def schema(kind: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / FILES[kind]).read_text())
    return loaded


def as_editor_sees(data: Any) -> Any:
    """A YAML document as JSON: an unquoted timestamp is a string to a YAML 1.2 editor."""
    return json.loads(json.dumps(data, default=str))


def documents(path: Path) -> list[Any]:
    return [as_editor_sees(d) for d in yaml.safe_load_all(path.read_text()) if d is not None]


def field_of(error: jsonschema.ValidationError) -> str:
    """The field a schema error is about, written as `rulesched check` writes it (`spec.filters[0].weight`);
    of a value that matches none of its forms (a list or null), the form it came closest to."""
    error = jsonschema.exceptions.best_match([error])
    path = list(error.absolute_path)
    instance: Any = error.instance
    schema: Any = error.schema
    if error.validator == "additionalProperties":
        path += sorted(set(instance) - set(schema.get("properties", {})))[:1]
    elif error.validator == "required":
        required: Any = error.validator_value
        path += [name for name in required if name not in instance][:1]
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")


def schema_fields(kind: str, document: Any) -> set[str]:
    validator = jsonschema.Draft7Validator(schema(kind))
    return {field_of(e) for e in validator.iter_errors(document)}


@pytest.mark.parametrize("kind", KINDS)
def test_the_committed_schemas_are_what_the_code_generates(kind: str) -> None:
    assert (SCHEMAS / FILES[kind]).read_text() == render(kind), "run: rulesched schema --write schemas"


def test_the_schemas_are_valid_json_schemas_and_nothing_else_is_in_the_folder() -> None:
    for kind in KINDS:
        jsonschema.Draft7Validator.check_schema(schema(kind))
    assert sorted(p.name for p in SCHEMAS.iterdir()) == sorted(FILES.values())


def test_schema_prints_a_kind_case_insensitively(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "ruletest"]) == 0
    assert json.loads(capsys.readouterr().out) == schema("RuleTest")
    assert main(["schema", "Nodes"]) == 2
    assert "want one of RuleFile, RuleSet" in capsys.readouterr().err


def test_schema_writes_every_kind(tmp_path: Path) -> None:
    assert main(["schema", "--write", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES.values())


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_rule_file_and_ruletest_validates(path: Path) -> None:
    for document in documents(path):
        if document.get("kind") in OURS:
            assert schema_fields(document["kind"], document) == set()
        if document.get("kind") in ("RuleSet", "MetricSource"):
            assert schema_fields("RuleFile", document) == set()


def test_the_shipped_files_hold_every_kind() -> None:
    kinds = {d.get("kind") for path in SHIPPED for d in documents(path)}
    assert kinds >= OURS


def test_every_documented_rule_file_and_ruletest_validates() -> None:
    rule_blocks, ruletest_blocks = blocks("doc-test: rules"), blocks("doc-test: ruletest-fields")
    assert rule_blocks
    assert ruletest_blocks
    for block in rule_blocks:
        for document in yaml.safe_load_all(block.text):
            assert schema_fields("RuleFile", as_editor_sees(document)) == set(), str(block)
    for block in ruletest_blocks:
        assert schema_fields("RuleTest", as_editor_sees(yaml.safe_load(block.text))) == set(), str(block)


def test_a_recording_header_validates() -> None:
    header = json.loads(RECORDING.read_text().splitlines()[0])
    assert schema_fields("RecordingHeader", header) == set()
    assert schema_fields("RecordingHeader", header | {"version": "1"}) == {"version"}
    Header.model_validate(header)


def test_replay_refuses_a_header_its_model_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = RECORDING.read_text().splitlines(keepends=True)
    header = json.loads(lines[0]) | {"segment": "one"}
    segment = tmp_path / "segment-000001.jsonl"
    segment.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    assert schema_fields("RecordingHeader", header) == {"segment"}
    assert main(["replay", str(segment), "--rules", str(RULES)]) == 2
    assert (
        capsys.readouterr().err
        == f"rulesched: {segment}: invalid recording header: segment: Input should be a valid integer\n"
    )


RULE_SET = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata: {name: example}
spec:
  filters:
  - name: labelled
    expression: "'zone' in node.metadata.labels"
  scores:
  - name: least-cpu
    expression: "1.0"
"""
METRIC_SOURCE = """\
apiVersion: rulesched.io/v1alpha1
kind: MetricSource
metadata: {name: prom}
spec:
  prometheus: {url: "http://prometheus:9090", interval: 15s}
  queries:
  - {name: cpu5m, query: "avg by (node) (rate(x[5m]))"}
"""
DELETE = "<delete>"
# One mistake each, as a person makes them: (base document, (path to change, new value or DELETE))
BROKEN = {
    "typo-in-a-field": (RULE_SET, (("spec", "filters", 0, "failurPolicy"), "Fail")),
    "weight-zero": (RULE_SET, (("spec", "scores", 0, "weight"), 0)),
    "weight-a-string": (RULE_SET, (("spec", "scores", 0, "weight"), "2")),
    "unknown-mode": (RULE_SET, (("spec", "filters", 0, "mode"), "Warn")),
    "bad-rule-name": (RULE_SET, (("spec", "filters", 0, "name"), "Has Spaces")),
    "no-expression": (RULE_SET, (("spec", "filters", 0, "expression"), DELETE)),
    "flag-as-text": (RULE_SET, (("spec", "filters", 0, "resolvableByPreemption"), "yes")),
    "wrong-api-version": (RULE_SET, (("apiVersion",), "rulesched.io/v1")),
    "bad-rule-set-name": (RULE_SET, (("metadata", "name"), "Example")),
    "bad-duration": (METRIC_SOURCE, (("spec", "prometheus", "interval"), "15x")),
    "no-url": (METRIC_SOURCE, (("spec", "prometheus", "url"), DELETE)),
    "bad-query-name": (METRIC_SOURCE, (("spec", "queries", 0, "name"), "cpu-5m")),
    "no-queries": (METRIC_SOURCE, (("spec", "queries"), [])),
}


def changed(text: str, path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(text)
    parent: Any = document
    for key in path[:-1]:
        parent = parent[key]
    if value == DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return document


def check_fields(document: dict[str, Any], tmp_path: Path) -> set[str | None]:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(document))
    with pytest.raises(RulesLoadFailed) as failed:
        load_rule_book([tmp_path], make_engine("cpp"))
    return {error.field for error in failed.value.errors}


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_rule_file_fails_at_the_field_check_names(name: str, tmp_path: Path) -> None:
    text, (path, value) = BROKEN[name]
    document = changed(text, path, value)
    expected = check_fields(document, tmp_path)
    assert schema_fields("RuleFile", document) == expected
    assert schema_fields(document["kind"], document) == expected


def test_the_broken_example_fails_at_the_field_check_names() -> None:
    (document,) = documents(BROKEN_EXAMPLE)
    with pytest.raises(RulesLoadFailed) as failed:
        load_rule_book([EXAMPLES / "broken-rules"], make_engine("cpp"))
    fields = {e.field for e in failed.value.errors}
    assert schema_fields("RuleFile", document) == {"spec.scores[0].weight"} < fields


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "cases", 0, "expect", "best"), 3),
        (("spec", "cases", 0, "expect", "scores"), {"a": 11}),
        (("spec", "cases", 0, "expekt"), {}),
        (("spec", "celEngine"), "v8"),
        (("spec", "cases"), []),
    ],
)
def test_a_broken_ruletest_fails_at_the_field_the_loader_names(path: tuple[str | int, ...], value: object) -> None:
    document = changed((RULES / "tests" / "xy-least-cpu.yaml").read_text(), path, value)
    with pytest.raises(ValidationError) as failed:
        RuleTest.model_validate(document)
    loader = {".".join(map(str, e["loc"])) for e in failed.value.errors()}
    dotted = {f.replace("[", ".").replace("]", "") for f in schema_fields("RuleTest", as_editor_sees(document))}
    assert dotted == loader


# What the loader takes that a naive schema would refuse: each must pass both.
ACCEPTED = [
    (RULE_SET, ("spec", "filters"), None),  # every entry commented out: YAML null
    (RULE_SET, ("spec", "scores", 0, "weight"), 2),  # an integer weight
    (RULE_SET, ("metadata", "labels"), {"team": "a"}),  # metadata beyond the name
    (METRIC_SOURCE, ("spec", "prometheus", "interval"), 30),  # seconds as a number
    (METRIC_SOURCE, ("spec", "prometheus", "maxAge"), "1m30s"),
]


@pytest.mark.parametrize(("text", "path", "value"), ACCEPTED)
def test_the_schema_never_rejects_what_the_loader_takes(
    text: str, path: tuple[str | int, ...], value: object, tmp_path: Path
) -> None:
    document = changed(text, path, value)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(document))
    load_rule_book([tmp_path], make_engine("cpp"))
    assert schema_fields("RuleFile", document) == set()


def test_the_ruletest_schema_takes_what_pydantic_takes_for_numbers_and_times() -> None:
    text = (RULES / "tests" / "xy-least-cpu.yaml").read_text()
    for path, value in [
        (("spec", "cases", 0, "expect", "scores"), {"k8s-node2": "10"}),
        (("spec", "cases", 0, "now"), 1764000000),
        (("spec", "cases", 0, "now"), "2026-11-22"),
    ]:
        document = changed(text, path, value)
        RuleTest.model_validate(document)
        assert schema_fields("RuleTest", document) == set(), (path, value)
