"""`rulesched test`: the shipped RuleTest suites pass on both engines; failures and broken files are explained."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rulesched.cli import main
from rulesched.rules.loader import rule_files
from rulesched.tools.ruletest.load import load_tests
from tests.builders import rule_set, write_rules
from tests.paths import REPO, RULES

TESTS = RULES / "tests"
FIXTURES = TESTS / "fixtures"


def write_test(directory: Path, spec: str, name: str = "example", file: str = "test.yaml") -> Path:
    """A RuleTest file named `file` in `directory` whose spec is the (dedented) YAML `spec`."""
    body = textwrap.indent(textwrap.dedent(spec).strip("\n"), "  ")
    path = directory / file
    path.write_text(f"apiVersion: rulesched.io/v1alpha1\nkind: RuleTest\nmetadata:\n  name: {name}\nspec:\n{body}\n")
    return path


def founding_example(expect: str) -> str:
    """A spec on the founding example's snapshot with one case expecting `expect` (YAML, dedented)."""
    return f"""
    rules: {RULES / "xy-least-cpu.yaml"}
    nodes: {FIXTURES / "classic-nodes.yaml"}
    metrics: {FIXTURES / "classic-metrics.yaml"}
    cases:
    - name: founding example
      pod: {FIXTURES / "pod.yaml"}
      expect:
{textwrap.indent(textwrap.dedent(expect).strip(), " " * 8)}
    """


@pytest.mark.parametrize("engine", ["cpp", "celpy"])
def test_the_shipped_rule_tests_pass(capsys: pytest.CaptureFixture[str], engine: str) -> None:
    assert main(["test", str(TESTS), "--cel-engine", engine]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "20 passed, 0 failed, 0 error(s) in 8 RuleTest(s)"


def test_every_shipped_rule_file_has_a_rule_test() -> None:
    suites, problems = load_tests([TESTS])
    assert problems == []
    tested = {suite.test.spec.rules for suite in suites}
    assert {f"../{path.name}" for _, path in rule_files([RULES])} <= tested


def test_the_server_does_not_load_the_rule_tests() -> None:
    assert [Path(name).name for name, _ in rule_files([RULES])] == [
        "batch-spread.yaml",
        "cpu-window.yaml",
        "gpu-reserve.yaml",
        "memory-pressure.yaml",
        "team-pools.yaml",
        "xy-least-cpu.yaml",
        "zone-preference.yaml",
    ]


def test_rulesched_test_runs_as_a_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rulesched", "test", "rules/tests", "--verbose"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED rules/tests/xy-least-cpu.yaml:11: xy-least-cpu: labelled nodes only, least CPU first [cpp]" in (
        done.stdout.splitlines()
    )


def test_without_paths_it_runs_rules_tests(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert main(["test"]) == 0
    assert "20 passed" in capsys.readouterr().out


def test_a_passing_case(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    expect = """
    feasible: [k8s-node2, k8s-node1]
    rejected: {k8s-master: "rule xy-least-cpu/require-xy-label"}
    best: k8s-node2
    order: [k8s-node2, k8s-node1]
    scores: {k8s-node2: 10, k8s-node1: 0}
    """
    path = write_test(tmp_path, founding_example(expect))
    assert main(["test", str(path)]) == 0
    assert capsys.readouterr().out == "1 passed, 0 failed, 0 error(s) in 1 RuleTest(s)\n"


def test_a_wrong_expectation_fails_with_a_diff_per_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    expect = """
    appliedRuleSets: [zone-preference]
    feasible: [k8s-master, k8s-node1]
    rejected: {k8s-node1: "label", k8s-master: "CPU"}
    best: k8s-node1
    order: [k8s-node1, k8s-node2]
    scores: {k8s-node2: 7, k8s-nod3: 1}
    """
    path = write_test(tmp_path, founding_example(expect))
    assert main(["test", str(path)]) == 1
    master = "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"
    assert capsys.readouterr().out.splitlines() == [
        f"FAILED {path}:10: example: founding example",
        "  scores: k8s-nod3 is not a node of the snapshot (nodes: k8s-master, k8s-node1, k8s-node2)",
        "  appliedRuleSets: expected [zone-preference], actual [xy-least-cpu]",
        "  feasible: expected [k8s-master, k8s-node1], actual [k8s-node1, k8s-node2]",
        f"    k8s-master should pass but was rejected: {master}",
        "    k8s-node2 passed but should not",
        "  rejected: k8s-node1 passed (score 0), expected a rejection containing 'label'",
        f"  rejected: k8s-master was rejected with '{master}', which does not contain 'CPU'",
        "  best: expected k8s-node1, actual k8s-node2",
        "    k8s-node1 passed with score 0; ranking [k8s-node2 (10), k8s-node1 (0)]",
        "  order: expected [k8s-node1, k8s-node2], actual [k8s-node2 (10), k8s-node1 (0)]",
        "  scores: k8s-node2 expected 7, actual passed with score 10",
        "  actual decision:",
        "    applied rule sets: [xy-least-cpu]",
        "    ranking: [k8s-node2 (10), k8s-node1 (0)]",
        f"    rejected k8s-master: {master}",
        "0 passed, 1 failed, 0 error(s) in 1 RuleTest(s)",
    ]


def test_a_score_of_a_rejected_node_shows_the_reason(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write_test(tmp_path, founding_example("scores: {k8s-master: 10}"))
    assert main(["test", str(path)]) == 1
    out = capsys.readouterr().out
    assert "  scores: k8s-master expected 10, actual rejected: missing label filter.xy.com" in out


def test_a_case_may_use_an_inline_pod_and_a_time(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        textwrap.dedent("""
        apiVersion: rulesched.io/v1alpha1
        kind: RuleSet
        metadata: {name: office-hours}
        spec:
          filters:
          - name: masters-at-night-only
            expression: "!('node-role.kubernetes.io/control-plane' in node.metadata.labels) || now.getHours() >= 20"
            message: control-plane nodes only at night
        """)
    )
    spec = f"""
    rules: rules.yaml
    nodes: {FIXTURES / "classic-nodes.yaml"}
    cases:
    - name: day
      now: "2026-11-22T10:00:00Z"
      pod: {{metadata: {{name: p, namespace: default}}, spec: {{containers: []}}}}
      expect: {{rejected: {{k8s-master: control-plane nodes only at night}}}}
    - name: night
      now: "2026-11-22T22:00:00"
      pod: {{metadata: {{name: p, namespace: default}}, spec: {{containers: []}}}}
      expect: {{feasible: [k8s-master, k8s-node1, k8s-node2]}}
    """
    assert main(["test", str(write_test(tmp_path, spec)), "--verbose"]) == 0
    assert "2 passed" in capsys.readouterr().out


def test_a_file_that_is_not_yaml_is_an_error_with_its_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: rulesched.io/v1alpha1\nkind: RuleTest\nspec: [a, b\n")
    assert main(["test", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    # where the sequence left open begins, not the end of the stream where PyYAML noticed it
    message = "invalid YAML at column 7: while parsing a flow sequence, expected ',' or ']', but got '<stream end>'"
    assert captured.err.startswith(f"ERROR {path}:3: {message}")
    assert captured.out == "0 passed, 0 failed, 1 error(s) in 0 RuleTest(s)\n"


def test_a_schema_error_names_the_field_and_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write_test(tmp_path, founding_example("bestNode: k8s-node2"))
    assert main(["test", str(path)]) == 2
    assert (
        capsys.readouterr().err == f"ERROR {path}:13: spec.cases[0].expect.bestNode: Extra inputs are not permitted\n"
    )


def test_a_missing_fixture_is_an_error_with_its_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = founding_example("best: k8s-node2").replace(str(FIXTURES / "classic-metrics.yaml"), "nope.yaml")
    path = write_test(tmp_path, spec)
    assert main(["test", str(path)]) == 2
    assert (
        capsys.readouterr().err
        == f"ERROR {path}:8: spec.metrics: {tmp_path / 'nope.yaml'}: cannot read: No such file or directory\n"
    )


def test_a_missing_pod_fails_only_its_case(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = founding_example("best: k8s-node2").replace(str(FIXTURES / "pod.yaml"), "pod-nope.yaml")
    path = write_test(tmp_path, spec)
    assert main(["test", str(path)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"ERROR {path}:10: example: founding example"
    assert (
        out[1]
        == f"  {path}:11: spec.cases[0].pod: {tmp_path / 'pod-nope.yaml'}: cannot read: No such file or directory"
    )


def test_rules_that_do_not_load_are_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_rules(tmp_path / "rules", rule_set("bad", "filters:\n- {name: f, expression: '1 +'}"), name="bad.yaml")
    path = write_test(tmp_path, founding_example("best: k8s-node2").replace(str(RULES / "xy-least-cpu.yaml"), "rules"))
    assert main(["test", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"ERROR {path}:6: the rules do not load:"
    assert err[1].startswith(f"  {tmp_path / 'rules' / 'bad.yaml'}:7: bad/f: spec.filters[0].expression: CEL: ")


def test_a_named_file_without_a_rule_test_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", str(FIXTURES / "pod.yaml")]) == 2
    assert capsys.readouterr().err == f"ERROR {FIXTURES / 'pod.yaml'}: no RuleTest document in this file\n"


def test_no_rule_test_found_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["test", str(tmp_path)]) == 2
    assert capsys.readouterr().out.splitlines()[-1] == "no RuleTest found"


def test_the_file_engine_wins_over_the_flag(tmp_path: Path) -> None:
    path = write_test(tmp_path, founding_example("best: k8s-node2") + "celEngine: celpy\n")
    junit = tmp_path / "junit.xml"
    assert main(["test", str(path), "--junit", str(junit)]) == 0
    assert ET.parse(junit).getroot().find("testsuite/properties/property[@name='celEngine']").get("value") == "celpy"  # type: ignore[union-attr]


def test_junit_has_a_suite_per_rule_test_and_a_case_per_case(tmp_path: Path) -> None:
    write_test(tmp_path, founding_example("best: k8s-node1"), name="wrong", file="wrong.yaml")
    (tmp_path / "broken.yaml").write_text("apiVersion: rulesched.io/v1alpha1\nkind: RuleTest\nmetadata: {name: x}\n")
    junit = tmp_path / "junit.xml"
    assert main(["test", str(TESTS), str(tmp_path), "--junit", str(junit)]) == 2
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("22", "1", "1")
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert set(suites) == {
        "all-rules",
        "batch-spread",
        "cpu-window",
        "team-pools",
        "gpu-reserve",
        "memory-pressure",
        "xy-least-cpu",
        "zone-preference",
        "wrong",
        str(tmp_path / "broken.yaml"),
    }
    assert [case.get("name") for case in suites["xy-least-cpu"].iter("testcase")] == [
        "labelled nodes only, least CPU first",
        "kube-system pods are left alone",
        "a node without metrics yet scores 0 but still passes",
    ]
    failure = suites["wrong"].find("testcase/failure")
    assert failure is not None
    assert failure.get("message") == "best: expected k8s-node1, actual k8s-node2"
    assert "ranking [k8s-node2 (10), k8s-node1 (0)]" in (failure.text or "")
    error = suites[str(tmp_path / "broken.yaml")].find("testcase/error")
    assert error is not None
    assert error.get("message") == f"{tmp_path / 'broken.yaml'}:1: spec: Field required"
