"""The rule loader: which files it reads, and the load error it reports for each kind of broken rule file.

Each broken file is checked against the whole LoadError (file, line, rule set, rule, field, expression,
position) and a fragment of its message, on both CEL engines, since both must report the same errors.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from rulesched.rules.cel import Engine
from rulesched.rules.errors import LoadError, RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from tests.builders import rule_set, write_rules


def load_errors(directory: Path, engine: Engine) -> tuple[LoadError, ...]:
    with pytest.raises(RulesLoadFailed) as failure:
        load_rule_book([directory], engine)
    return failure.value.errors


def assert_error(actual: LoadError, expected: LoadError, message_part: str) -> None:
    """`actual` is `expected` in every field, and its message contains `message_part`."""
    assert message_part in actual.message, actual.message
    assert dataclasses.replace(actual, message="") == expected


GOOD = rule_set(
    "good",
    """
    filters:
    - name: labelled
      expression: "has(node.metadata.labels)"
    """,
)

# (id, file content, expected error with file left empty, fragment of the message). Line numbers count
# from 1 in the file content; position is (line, column) inside the expression, 1-based.
BROKEN_FILES: list[tuple[str, str, LoadError, str]] = [
    (
        "invalid-yaml",
        "apiVersion: rulesched.io/v1alpha1\nkind: RuleSet\nmetadata:\n  name: broken\nspec:\n"
        "  filters:\n  - name: f\n    expression: 'true'\n     message: misindented\n",
        LoadError(file="", message="", line=9),
        "invalid YAML at column 6: expected <block end>",
    ),
    (
        "unquoted-colon-space",
        rule_set("x", "filters:\n- name: f\n  expression: has(x.y) ? x.y : 'z'"),
        LoadError(file="", message="", line=8),
        "at column 32: mapping values are not allowed here; a plain (unquoted) value cannot contain ': '",
    ),
    (
        "quote-never-closed",
        rule_set("x", "filters:\n- name: f\n  expression: \"node.metadata.name == 'a'\n- name: g\n  expression: x"),
        LoadError(file="", message="", line=8),
        "invalid YAML at column 17: while scanning a quoted scalar, found unexpected end of stream",
    ),
    (
        "duplicate-yaml-key",
        rule_set("x", "filters:\n- name: f\n  expression: 'true'\n  expression: 'false'"),
        LoadError(file="", message="", line=9),
        "invalid YAML at column 5: duplicate key 'expression'",
    ),
    (
        "document-not-a-mapping",
        "- apiVersion\n- kind\n",
        LoadError(file="", message="", line=1),
        "must be a mapping",
    ),
    (
        "wrong-api-version",
        "apiVersion: rulesched.io/v1\nkind: RuleSet\nmetadata:\n  name: x\nspec: {}\n",
        LoadError(file="", message="", line=1, rule_set="x", field="apiVersion"),
        "'rulesched.io/v1alpha1'",
    ),
    (
        "wrong-kind",
        "apiVersion: rulesched.io/v1alpha1\nkind: Policy\nmetadata:\n  name: x\nspec: {}\n",
        LoadError(file="", message="", line=2, rule_set="x", field="kind"),
        "'RuleSet'",
    ),
    (
        "missing-metadata-name",
        "apiVersion: rulesched.io/v1alpha1\nkind: RuleSet\nmetadata:\n  labels: {team: a}\nspec: {}\n",
        LoadError(file="", message="", line=4, field="metadata.name"),
        "Field required",
    ),
    (
        "null-metadata",
        "apiVersion: rulesched.io/v1alpha1\nkind: RuleSet\nmetadata:\nspec: {}\n",
        LoadError(file="", message="", line=3, field="metadata"),
        "valid dictionary",
    ),
    (
        "rule-set-name-not-a-dns-name",
        rule_set("XY_rules", "filters: []"),
        LoadError(file="", message="", line=4, rule_set="XY_rules", field="metadata.name"),
        "should match pattern",
    ),
    (
        "rule-name-with-space",
        rule_set("x", "filters:\n- name: has label\n  expression: 'true'"),
        LoadError(file="", message="", line=7, rule_set="x", rule="has label", field="spec.filters[0].name"),
        "should match pattern",
    ),
    (
        "variable-name-with-dash",
        rule_set("x", "variables:\n- name: cpu-used\n  expression: '1'"),
        LoadError(file="", message="", line=7, rule_set="x", rule="cpu-used", field="spec.variables[0].name"),
        "should match pattern",
    ),
    (
        "unknown-field-typo",
        rule_set("x", "filters:\n- name: f\n  expression: 'true'\n  failurPolicy: Ignore"),
        LoadError(file="", message="", line=9, rule_set="x", rule="f", field="spec.filters[0].failurPolicy"),
        "Extra inputs are not permitted",
    ),
    (
        "unknown-field-in-spec",
        rule_set("x", "filter:\n- name: f\n  expression: 'true'"),
        LoadError(file="", message="", line=7, rule_set="x", field="spec.filter"),
        "Extra inputs are not permitted",
    ),
    (
        "missing-expression",
        rule_set("x", "filters:\n- name: f\n  message: no expression"),
        LoadError(file="", message="", line=7, rule_set="x", rule="f", field="spec.filters[0].expression"),
        "Field required",
    ),
    (
        "empty-expression",
        rule_set("x", "filters:\n- name: f\n  expression: ''"),
        LoadError(file="", message="", line=8, rule_set="x", rule="f", field="spec.filters[0].expression"),
        "at least 1 character",
    ),
    (
        "weight-zero",
        rule_set("x", "scores:\n- name: s\n  expression: '1.0'\n  weight: 0"),
        LoadError(file="", message="", line=9, rule_set="x", rule="s", field="spec.scores[0].weight"),
        "greater than 0",
    ),
    (
        "weight-negative",
        rule_set("x", "scores:\n- name: s\n  expression: '1.0'\n  weight: -2"),
        LoadError(file="", message="", line=9, rule_set="x", rule="s", field="spec.scores[0].weight"),
        "greater than 0",
    ),
    (
        "weight-infinite",
        rule_set("x", "scores:\n- name: s\n  expression: '1.0'\n  weight: .inf"),
        LoadError(file="", message="", line=9, rule_set="x", rule="s", field="spec.scores[0].weight"),
        "finite number",
    ),
    (
        "weight-as-bool",
        rule_set("x", "scores:\n- name: s\n  expression: '1.0'\n  weight: true"),
        LoadError(file="", message="", line=9, rule_set="x", rule="s", field="spec.scores[0].weight"),
        "valid number",
    ),
    (
        "resolvable-as-string",
        rule_set("x", "filters:\n- name: f\n  expression: 'true'\n  resolvableByPreemption: 'yes'"),
        LoadError(file="", message="", line=9, rule_set="x", rule="f", field="spec.filters[0].resolvableByPreemption"),
        "valid boolean",
    ),
    (
        "bad-filter-mode",
        rule_set("x", "filters:\n- name: f\n  expression: 'true'\n  mode: DryRun"),
        LoadError(file="", message="", line=9, rule_set="x", rule="f", field="spec.filters[0].mode"),
        "'Enforce' or 'Audit'",
    ),
    (
        "bad-score-mode",
        rule_set("x", "scores:\n- name: s\n  expression: '1.0'\n  mode: enforce"),
        LoadError(file="", message="", line=9, rule_set="x", rule="s", field="spec.scores[0].mode"),
        "'Enforce' or 'Audit'",
    ),
    (
        "bad-normalize",
        rule_set("x", "scores:\n- name: s\n  expression: '1.0'\n  normalize: Linear"),
        LoadError(file="", message="", line=9, rule_set="x", rule="s", field="spec.scores[0].normalize"),
        "'MinMax' or 'Clamp'",
    ),
    (
        "bad-failure-policy",
        rule_set("x", "filters:\n- name: f\n  expression: 'true'\n  failurePolicy: Abort"),
        LoadError(file="", message="", line=9, rule_set="x", rule="f", field="spec.filters[0].failurePolicy"),
        "'Fail' or 'Ignore'",
    ),
    (
        "cel-syntax-error",
        rule_set("x", "filters:\n- name: f\n  expression: \"node.metadata.labels['a'] ==\""),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="f",
            field="spec.filters[0].expression",
            expression="node.metadata.labels['a'] ==",
            position=(1, 29),
        ),
        "CEL: Syntax error",
    ),
    (
        "nested-deeper-than-cel-allows",
        rule_set("x", "filters:\n- name: f\n  expression: " + "(" * 40 + "true" + ")" * 40),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="f",
            field="spec.filters[0].expression",
            expression="(" * 40 + "true" + ")" * 40,
            position=(1, 33),  # the first bracket past the limit
        ),
        "CEL: nested deeper than CEL allows (32 levels",
    ),
    (
        "nested-deeper-than-the-checker-allows",  # cel-cpp's checker counts the list and the operator: no position
        rule_set("x", 'filters:\n- name: f\n  expression: "' + "[" * 31 + "1" + "]" * 31 + ' == []"'),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="f",
            field="spec.filters[0].expression",
            expression="[" * 31 + "1" + "]" * 31 + " == []",
            position=(1, 31),  # the deepest bracket
        ),
        "CEL: nested deeper than CEL allows (32 levels",
    ),
    (
        "cel-syntax-error-on-second-line",
        rule_set("x", "scores:\n- name: s\n  expression: |-\n    1.0 +\n    * 2.0"),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="s",
            field="spec.scores[0].expression",
            expression="1.0 +\n* 2.0",
            position=(2, 1),
        ),
        "CEL: Syntax error",
    ),
    (
        "cel-type-error",
        rule_set("x", "filters:\n- name: f\n  expression: \"1 + 'a' == 2\""),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="f",
            field="spec.filters[0].expression",
            expression="1 + 'a' == 2",
            position=(1, 3),
        ),
        "no matching overload for '_+_'",
    ),
    (
        "filter-returns-int",
        rule_set("x", "filters:\n- name: f\n  expression: '1'"),
        LoadError(
            file="", message="", line=8, rule_set="x", rule="f", field="spec.filters[0].expression", expression="1"
        ),
        "must be a bool, not int",
    ),
    (
        "score-returns-string",
        rule_set("x", "scores:\n- name: s\n  expression: \"'high'\""),
        LoadError(
            file="", message="", line=8, rule_set="x", rule="s", field="spec.scores[0].expression", expression="'high'"
        ),
        "must be a number, not string",
    ),
    (
        "score-returns-bool",
        rule_set("x", "scores:\n- name: s\n  expression: 'true'"),
        LoadError(
            file="", message="", line=8, rule_set="x", rule="s", field="spec.scores[0].expression", expression="true"
        ),
        "must be a number, not bool",
    ),
    (
        "message-expression-not-a-string",
        rule_set("x", "filters:\n- name: f\n  expression: 'false'\n  messageExpression: '42'"),
        LoadError(
            file="",
            message="",
            line=9,
            rule_set="x",
            rule="f",
            field="spec.filters[0].messageExpression",
            expression="42",
        ),
        "must be a string, not int",
    ),
    (
        "match-condition-returns-string",
        rule_set("x", "matchConditions:\n- name: m\n  expression: pod.metadata.name + 'x'"),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="m",
            field="spec.matchConditions[0].expression",
            expression="pod.metadata.name + 'x'",
        ),
        "must be a bool",
    ),
    (
        "duplicate-filter-name",
        rule_set("x", "filters:\n- name: f\n  expression: 'true'\n- name: f\n  expression: 'false'"),
        LoadError(file="", message="", line=9, rule_set="x", rule="f", field="spec.filters[1].name"),
        "duplicate rule name 'f'",
    ),
    (
        "filter-and-score-with-one-name",
        rule_set("x", "filters:\n- name: f\n  expression: 'true'\nscores:\n- name: f\n  expression: '1'"),
        LoadError(file="", message="", line=10, rule_set="x", rule="f", field="spec.scores[0].name"),
        "duplicate rule name 'f'",
    ),
    (
        "duplicate-variable-name",
        rule_set("x", "variables:\n- name: v\n  expression: '1'\n- name: v\n  expression: '2'"),
        LoadError(file="", message="", line=9, rule_set="x", rule="v", field="spec.variables[1].name"),
        "duplicate variable name 'v'",
    ),
    (
        "duplicate-match-condition-name",
        rule_set("x", "matchConditions:\n- name: m\n  expression: 'true'\n- name: m\n  expression: 'true'"),
        LoadError(file="", message="", line=9, rule_set="x", rule="m", field="spec.matchConditions[1].name"),
        "duplicate match condition name 'm'",
    ),
    (
        "variable-used-before-defined",
        rule_set("x", "variables:\n- name: a\n  expression: variables.b + 1\n- name: b\n  expression: '1'"),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="a",
            field="spec.variables[0].expression",
            expression="variables.b + 1",
        ),
        "variables.b is used before it is defined",
    ),
    (
        "variable-reads-itself",
        rule_set("x", "variables:\n- name: a\n  expression: variables.a + 1"),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="a",
            field="spec.variables[0].expression",
            expression="variables.a + 1",
        ),
        "variables.a is used before it is defined",
    ),
    (
        "undefined-variable",
        rule_set("x", "filters:\n- name: f\n  expression: \"variables['nope'] == 1\""),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="f",
            field="spec.filters[0].expression",
            expression="variables['nope'] == 1",
        ),
        "variables.nope is not defined in this rule set",
    ),
    (
        "match-condition-reads-node",
        rule_set("x", "matchConditions:\n- name: m\n  expression: \"'gpu' in node.metadata.labels\""),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="m",
            field="spec.matchConditions[0].expression",
            expression="'gpu' in node.metadata.labels",
        ),
        "may read only pod, now and namespaceObject, not node",
    ),
    (
        "match-condition-reads-metrics-and-variables",
        rule_set("x", "matchConditions:\n- name: m\n  expression: has(metrics.cpu) && variables.x"),
        LoadError(
            file="",
            message="",
            line=8,
            rule_set="x",
            rule="m",
            field="spec.matchConditions[0].expression",
            expression="has(metrics.cpu) && variables.x",
        ),
        "not metrics, variables",
    ),
]


@pytest.mark.parametrize(
    ("content", "expected", "message_part"),
    [pytest.param(content, expected, part, id=name) for name, content, expected, part in BROKEN_FILES],
)
def test_broken_rule_file_reports_one_precise_error(
    tmp_path: Path, engine: Engine, content: str, expected: LoadError, message_part: str
) -> None:
    path = write_rules(tmp_path, content)
    (error,) = load_errors(tmp_path, engine)
    assert_error(error, dataclasses.replace(expected, file=str(path)), message_part)


def test_error_in_variable_is_reported_once_not_again_where_it_is_read(tmp_path: Path, engine: Engine) -> None:
    path = write_rules(
        tmp_path,
        rule_set(
            "x",
            "variables:\n- name: v\n  expression: 'metrics.cpu +'\n"
            "filters:\n- name: f\n  expression: variables.v > 1.0",
        ),
    )
    (error,) = load_errors(tmp_path, engine)
    expected = LoadError(
        file=str(path),
        message="",
        line=8,
        rule_set="x",
        rule="v",
        field="spec.variables[0].expression",
        expression="metrics.cpu +",
        position=(1, 14),
    )
    assert_error(error, expected, "CEL: Syntax error")


def test_file_that_is_not_utf8_is_an_error(tmp_path: Path, engine: Engine) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(rule_set("caf\u00e9", "filters: []").encode("latin-1"))
    assert load_errors(tmp_path, engine) == (LoadError(file=str(path), message="not UTF-8 text"),)


def test_variable_reading_an_undefined_variable_is_reported_once(tmp_path: Path, engine: Engine) -> None:
    path = write_rules(
        tmp_path,
        rule_set(
            "x",
            "variables:\n- name: a\n  expression: variables.zzz + 1\n- name: b\n  expression: variables.a * 2\n"
            "filters:\n- name: f\n  expression: variables.b > 1",
        ),
    )
    (error,) = load_errors(tmp_path, engine)
    expected = LoadError(
        file=str(path),
        message="",
        line=8,
        rule_set="x",
        rule="a",
        field="spec.variables[0].expression",
        expression="variables.zzz + 1",
    )
    assert_error(error, expected, "variables.zzz is not defined in this rule set")


def test_duplicate_rule_set_names_across_files_name_the_first_file(tmp_path: Path, engine: Engine) -> None:
    first = write_rules(tmp_path, rule_set("same", "filters: []"), name="a.yaml")
    second = write_rules(tmp_path, rule_set("same", "scores: []"), name="b.yaml")
    (error,) = load_errors(tmp_path, engine)
    expected = LoadError(file=str(second), message="", line=4, rule_set="same", field="metadata.name")
    assert_error(error, expected, f"duplicate rule set name, already defined in {first}")


def test_every_problem_in_every_file_is_reported_at_once(tmp_path: Path, engine: Engine) -> None:
    bad_yaml = write_rules(tmp_path, "a: [1, 2\n", name="a-bad-yaml.yaml")
    write_rules(tmp_path, GOOD, name="b-good.yaml")
    bad_rules = write_rules(
        tmp_path,
        rule_set("c", "filters:\n- name: f\n  expression: '1'\n  mode: Sometimes\n- name: g\n  expression: 'nope'"),
        name="c-bad-rules.yaml",
    )
    errors = load_errors(tmp_path, engine)
    assert [(e.file, e.line, e.rule, e.field) for e in errors] == [
        (str(bad_yaml), 1, None, None),  # where the sequence left open begins
        (str(bad_rules), 8, "f", "spec.filters[0].expression"),
        (str(bad_rules), 9, "f", "spec.filters[0].mode"),
        (str(bad_rules), 11, "g", "spec.filters[1].expression"),
    ]


def test_compile_errors_from_several_rules_and_files_come_together(tmp_path: Path, engine: Engine) -> None:
    first = write_rules(
        tmp_path,
        rule_set("a", "filters:\n- name: f\n  expression: '1'\n- name: g\n  expression: nope"),
        name="a.yaml",
    )
    second = write_rules(tmp_path, rule_set("b", "scores:\n- name: s\n  expression: \"'x'\""), name="b.yaml")
    errors = load_errors(tmp_path, engine)
    assert [(e.file, e.line, e.rule, e.field) for e in errors] == [
        (str(first), 8, "f", "spec.filters[0].expression"),
        (str(first), 10, "g", "spec.filters[1].expression"),
        (str(second), 8, "s", "spec.scores[0].expression"),
    ]


def test_one_bad_file_among_good_ones_loads_nothing(tmp_path: Path, engine: Engine) -> None:
    write_rules(tmp_path, GOOD, name="a.yaml")
    write_rules(tmp_path, rule_set("also-good", "filters: []"), name="b.yaml")
    write_rules(tmp_path, rule_set("bad", "filters:\n- name: f\n  expression: '1'"), name="c.yaml")
    errors = load_errors(tmp_path, engine)
    assert [e.rule_set for e in errors] == ["bad"]


def test_several_documents_per_file_and_empty_documents_skipped(tmp_path: Path, engine: Engine) -> None:
    text = "---\n" + rule_set("zeta", "filters: []") + "---\n# only a comment\n---\n" + rule_set("alpha", "")
    write_rules(tmp_path, text.replace("spec:\n\n", "spec: {}\n"))
    book = load_rule_book([tmp_path], engine)
    assert [rs.name for rs in book.rule_sets] == ["alpha", "zeta"]


def test_empty_rule_lists_are_allowed(tmp_path: Path, engine: Engine) -> None:
    write_rules(
        tmp_path, rule_set("x", "matchConditions:\nvariables: []\nfilters:\nscores:\n- name: s\n  expression: '1'")
    )
    book = load_rule_book([tmp_path], engine)
    (loaded,) = book.rule_sets
    assert (loaded.conditions, loaded.filters, [s.name for s in loaded.scores]) == ((), (), ["s"])


def test_error_line_counts_from_the_start_of_the_file_in_later_documents(tmp_path: Path, engine: Engine) -> None:
    path = write_rules(tmp_path, GOOD + "---\n" + rule_set("second", "filters:\n- name: f\n  expression: '1'"))
    (error,) = load_errors(tmp_path, engine)
    assert (error.file, error.line, error.rule_set, error.rule) == (str(path), 17, "second", "f")


def test_reads_yaml_and_yml_and_ignores_other_suffixes_and_hidden_entries(tmp_path: Path, engine: Engine) -> None:
    write_rules(tmp_path, rule_set("from-yaml", "filters: []"), name="a.yaml")
    write_rules(tmp_path, rule_set("from-yml", "filters: []"), name="b.yml")
    broken = "this: is: not: yaml: ["
    for ignored in ("c.json", "d.yaml.bak", "README.md", ".hidden.yaml"):
        write_rules(tmp_path, broken, name=ignored)
    write_rules(tmp_path / ".git", broken, name="e.yaml")
    write_rules(tmp_path / "nested", broken, name="f.yaml")
    book = load_rule_book([tmp_path], engine)
    assert [rs.name for rs in book.rule_sets] == ["from-yaml", "from-yml"]
    assert book.files == (str(tmp_path / "a.yaml"), str(tmp_path / "b.yml"))


def configmap_volume(root: Path, files: dict[str, str]) -> Path:
    """A directory laid out exactly as the kubelet mounts a ConfigMap volume."""
    root.mkdir()
    snapshot = root / "..2026_11_22_01_00_00.123456789"
    snapshot.mkdir()
    for name, text in files.items():
        (snapshot / name).write_text(text, encoding="utf-8")
    (root / "..data").symlink_to(snapshot.name)
    for name in files:
        (root / name).symlink_to(Path("..data") / name)
    return root


def test_configmap_mount_loads_the_visible_files_once(tmp_path: Path, engine: Engine) -> None:
    volume = configmap_volume(
        tmp_path / "rules", {"xy.yaml": rule_set("xy", "filters: []"), "gpu.yaml": rule_set("gpu", "scores: []")}
    )
    book = load_rule_book([volume], engine)
    assert [rs.name for rs in book.rule_sets] == ["gpu", "xy"]
    assert book.files == (str(volume / "gpu.yaml"), str(volume / "xy.yaml"))


def test_configmap_mount_reports_errors_under_the_visible_name(tmp_path: Path, engine: Engine) -> None:
    volume = configmap_volume(tmp_path / "rules", {"bad.yaml": rule_set("bad", "filters:\n- name: f")})
    (error,) = load_errors(volume, engine)
    assert (error.file, error.field) == (str(volume / "bad.yaml"), "spec.filters[0].expression")


def test_configmap_mount_reads_from_the_data_snapshot(tmp_path: Path, engine: Engine) -> None:
    volume = configmap_volume(tmp_path / "rules", {"xy.yaml": rule_set("old", "filters: []")})
    newer = volume / "..2026_11_22_01_05_00.987654321"
    newer.mkdir()
    (newer / "xy.yaml").write_text(rule_set("new", "filters: []"), encoding="utf-8")
    os.symlink(newer.name, volume / "..data_tmp")
    os.replace(volume / "..data_tmp", volume / "..data")  # the kubelet's atomic swap
    book = load_rule_book([volume], engine)
    assert [rs.name for rs in book.rule_sets] == ["new"]


def test_content_hash_is_stable_and_changes_with_content(tmp_path: Path, engine: Engine) -> None:
    path = write_rules(tmp_path, GOOD)
    first = load_rule_book([tmp_path], engine).hash
    assert load_rule_book([tmp_path], engine).hash == first
    path.write_text(GOOD.replace("has(node.metadata.labels)", "has(node.metadata.annotations)"), encoding="utf-8")
    changed = load_rule_book([tmp_path], engine).hash
    assert changed != first
    path.write_text(GOOD, encoding="utf-8")
    assert load_rule_book([tmp_path], engine).hash == first


def test_generation_is_the_one_asked_for(tmp_path: Path, engine: Engine) -> None:
    write_rules(tmp_path, GOOD)
    assert load_rule_book([tmp_path], engine, generation=7).generation == 7


def test_single_file_path_is_read_whatever_its_suffix(tmp_path: Path, engine: Engine) -> None:
    path = write_rules(tmp_path, GOOD, name="rules.txt")
    book = load_rule_book([path], engine)
    assert [rs.name for rs in book.rule_sets] == ["good"]


def test_missing_path_is_one_error(tmp_path: Path, engine: Engine) -> None:
    missing = tmp_path / "nope"
    assert load_errors(missing, engine) == (LoadError(file=str(missing), message="no such file or directory"),)


def test_error_text_names_file_line_rule_and_expression(tmp_path: Path, engine: Engine) -> None:
    path = write_rules(tmp_path, rule_set("x", "filters:\n- name: f\n  expression: '1 +'"))
    (error,) = load_errors(tmp_path, engine)
    assert str(error).startswith(f"{path}:8: x/f: spec.filters[0].expression: CEL: Syntax error")
    assert str(error).endswith("in '1 +' at 1:4")
    assert error.as_dict()["position"] == [1, 4]


def test_an_expression_of_400_kb_is_refused_at_once_with_one_error(tmp_path: Path, engine: Engine) -> None:
    huge = " || ".join(["node.metadata.name == 'a-node-name-of-twenty'"] * 9000)
    write_rules(tmp_path, rule_set("x", f'filters:\n- name: f\n  expression: "{huge}"'))
    load_errors(tmp_path, engine)  # the first load imports what loading needs
    started = time.monotonic()
    (error,) = load_errors(tmp_path, engine)
    assert time.monotonic() - started < 0.5
    assert error.field == "spec.filters[0].expression"
    assert error.expression is None
    assert str(error).endswith(f"has {len(huge)} characters; it begins {huge[:60]!r}")
