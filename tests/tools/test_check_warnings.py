"""`rulesched check` warns about rules that load but can never matter, and still exits 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from rulesched.cli import main
from tests.builders import rule_set, write_rules
from tests.paths import RULES


def check(capsys: pytest.CaptureFixture[str], path: Path) -> list[str]:
    """The warnings `rulesched check path` prints; it must succeed."""
    assert main(["check", str(path)]) == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert all(line.startswith("warning: ") for line in lines)
    return lines


def test_the_shipped_rules_have_no_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    assert check(capsys, RULES) == []


@pytest.mark.parametrize(
    "expression",
    ["1.0", "requests.cpu * 2.0", "size(pod.spec.containers)", "now.getHours()"],
)
def test_a_score_that_reads_no_node_data_is_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, expression: str
) -> None:
    spec = f"""
    scores:
    - name: constant
      expression: {expression!r}
    """
    path = write_rules(tmp_path, rule_set("flat", spec))
    assert check(capsys, tmp_path) == [
        f"warning: {path}:7: flat/constant: score reads no node, metrics or allocatable data:"
        " it is the same on every node and cannot rank them"
    ]


@pytest.mark.parametrize(
    "expression",
    [
        "allocatable.cpu",
        "has(metrics.cpu) ? -metrics.cpu.usage : 0.0",
        "size(node.metadata.labels)",
        "variables.free",
    ],
)
def test_a_score_that_reads_the_node_is_fine(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, expression: str
) -> None:
    spec = f"""
    variables:
    - name: free
      expression: allocatable.cpu - requests.cpu
    scores:
    - name: ranks
      expression: {expression!r}
    """
    write_rules(tmp_path, rule_set("ranking", spec))
    assert check(capsys, tmp_path) == []


def test_a_variable_that_reads_no_node_data_does_not_make_a_score_rank(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = """
    variables:
    - name: wanted
      expression: requests.cpu
    scores:
    - name: wanted-cpu
      expression: variables.wanted
    """
    write_rules(tmp_path, rule_set("flat", spec))
    assert [line.split(": ", 2)[2].split(":")[0] for line in check(capsys, tmp_path)] == ["flat/wanted-cpu"]


@pytest.mark.parametrize("expression", ["true", "1 == 2", "'pod' == 'pod'"])
def test_a_constant_match_condition_is_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, expression: str
) -> None:
    spec = f"""
    matchConditions:
    - name: always
      expression: {expression!r}
    filters:
    - name: labelled
      expression: "'a' in node.metadata.labels"
    """
    path = write_rules(tmp_path, rule_set("constant", spec))
    assert check(capsys, tmp_path) == [
        f"warning: {path}:7: constant/always: match condition reads neither pod nor now:"
        " it is constant, so the rule set applies to all pods or none"
    ]


def test_match_conditions_reading_the_pod_or_the_time_are_fine(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = """
    matchConditions:
    - name: namespaced
      expression: pod.metadata.namespace != 'kube-system'
    - name: daytime
      expression: now.getHours() < 20
    filters:
    - name: labelled
      expression: "'a' in node.metadata.labels"
    """
    write_rules(tmp_path, rule_set("fine", spec))
    assert check(capsys, tmp_path) == []


def test_warnings_are_counted_in_the_summary(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = """
    matchConditions:
    - name: always
      expression: "true"
    scores:
    - name: constant
      expression: "1"
    """
    write_rules(tmp_path, rule_set("useless", spec))
    assert main(["check", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 2
    assert captured.out == "ok: 1 rule set(s) in 1 file(s): useless; 2 warning(s)\n"
