"""The audit of running pods (issue #26): `controllers.audit.audit` and `rulesched audit`, on real files, real CEL."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rulesched.cli import main
from rulesched.controllers.audit.audit import Violation, audited_filters
from rulesched.rules.cel import make_engine
from rulesched.rules.errors import RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.tools.audit import AuditInputs, audit_files
from tests.audit_inputs import PAYMENTS, write_inputs
from tests.builders import NOW, rule_set, write_rules
from tests.paths import EXAMPLES, RULES

BATCH_1 = [
    ("jobs", "batch-1", "payments", "fits", "a", "does not fit", True),
    ("jobs", "batch-1", "payments", "no-batch-on-payments", "a", "batch pods do not run on payments nodes", True),
    ("jobs", "batch-1", "payments", "soft", "a", "soft says no", False),
]


def found(paths: dict[str, Path], engine: str = "cpp") -> list[tuple[object, ...]]:
    book = load_rule_book([paths["rules"]], make_engine(engine))  # type: ignore[arg-type]
    result = audit_files(book, AuditInputs(paths["nodes"], paths["pods"]), now=NOW)
    return [(v.namespace, v.pod, v.rule_set, v.rule, v.node, v.message, v.enforce) for v in result.violations]


@pytest.mark.parametrize("engine", ["cpp", "celpy"])
def test_a_running_pod_its_rules_reject_on_its_node_is_a_violation(tmp_path: Path, engine: str) -> None:
    assert found(write_inputs(tmp_path), engine) == [
        *BATCH_1,
        ("jobs", "batch-2", "payments", "soft", "b", "soft says no", False),
    ]


def test_the_pod_itself_is_not_counted_in_its_nodes_allocated(tmp_path: Path) -> None:
    """batch-2 (1.5 of 2 CPUs) runs alone on b: counting it twice would make it not fit where it runs."""
    assert not [f for f in found(write_inputs(tmp_path)) if f[1] == "batch-2" and f[3] == "fits"]


def test_a_filter_with_audit_false_is_not_audited(tmp_path: Path) -> None:
    rules = PAYMENTS.replace("    message: does not fit\n", "    message: does not fit\n    audit: false\n")
    assert [f[3] for f in found(write_inputs(tmp_path, rules))] == ["no-batch-on-payments", "soft", "soft"]


def test_a_rule_set_with_audit_false_is_not_audited(tmp_path: Path) -> None:
    rules = PAYMENTS.replace("spec:\n", "spec:\n  audit: false\n")
    paths = write_inputs(tmp_path, rules)
    assert found(paths) == []
    assert audited_filters(load_rule_book([paths["rules"]], make_engine("cpp"))) == frozenset()


def test_audit_must_be_a_boolean(tmp_path: Path) -> None:
    write_rules(tmp_path, rule_set("x", 'audit: "no"\nfilters:\n- name: f\n  expression: "true"\n'))
    with pytest.raises(RulesLoadFailed, match=r"spec\.audit: Input should be a valid boolean"):
        load_rule_book([tmp_path], make_engine("cpp"))


def test_violations_sort_by_pod_then_rule() -> None:
    late = Violation("jobs", "b", "rs", "a", "n", "m")
    early = Violation("jobs", "a", "rs", "z", "n", "m")
    assert sorted([late, early]) == [early, late]


def test_the_command_prints_each_violation_and_fails_on_enforce(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = write_inputs(tmp_path)
    args = ["audit", "--rules", str(paths["rules"]), "--nodes", str(paths["nodes"]), "--pods", str(paths["pods"])]
    assert main(args) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "3 pods on 2 nodes audited: 4 violations"
    assert "jobs/batch-1 on a: rule payments/fits: does not fit" in out
    assert "jobs/batch-2 on b: rule payments/soft: soft says no [Audit mode]" in out
    assert main([*args, "--fail-on", "never"]) == 0


def test_fail_on_any_counts_audit_mode_filters(tmp_path: Path) -> None:
    rules = PAYMENTS.replace("spec:\n", "spec:\n  audit: true\n").replace("tier'] == 'batch'", "tier'] == 'none'")
    paths = write_inputs(tmp_path, rules)
    args = ["audit", "--rules", str(paths["rules"]), "--nodes", str(paths["nodes"]), "--pods", str(paths["pods"])]
    assert main(args) == 0  # nothing applies: no violation at all
    soft_only = PAYMENTS.replace("!has(node.metadata.labels) ||", "true ||").replace("allocated.cpu +", "0.0 +")
    paths = write_inputs(tmp_path / "soft", soft_only)
    args = ["audit", "--rules", str(paths["rules"]), "--nodes", str(paths["nodes"]), "--pods", str(paths["pods"])]
    assert main(args) == 0
    assert main([*args, "--fail-on", "any"]) == 1


def test_json_output_counts_per_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_inputs(tmp_path)
    args = ["audit", "--rules", str(paths["rules"]), "--nodes", str(paths["nodes"]), "--pods", str(paths["pods"])]
    assert main([*args, "-o", "json"]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["counts"][0] == {"ruleSet": "payments", "rule": "soft", "mode": "Audit", "pods": 2}
    assert answer["total"] == 4
    assert answer["violations"][0] | {"uid": ""} == {
        "namespace": "jobs",
        "pod": "batch-1",
        "uid": "",
        "node": "a",
        "ruleSet": "payments",
        "rule": "fits",
        "mode": "Enforce",
        "message": "does not fit",
    }


def test_junit_output_fails_a_case_per_pod_and_rule_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_inputs(tmp_path)
    args = ["audit", "--rules", str(paths["rules"]), "--nodes", str(paths["nodes"]), "--pods", str(paths["pods"])]
    main([*args, "-o", "junit"])
    suite = ET.fromstring(capsys.readouterr().out.split("\n", 1)[1])
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    failure = suite.find("testcase[@classname='jobs/batch-1']/failure")
    assert failure is not None
    assert "payments/no-batch-on-payments on a" in (failure.text or "")


def test_unusable_input_is_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = write_inputs(tmp_path)
    (tmp_path / "broken.json").write_text("{")
    broken = str(tmp_path / "broken.json")
    args = ["audit", "--rules", str(paths["rules"]), "--nodes", broken, "--pods", str(paths["pods"])]
    assert main(args) == 2
    assert "broken.json" in capsys.readouterr().err


def test_a_recording_is_audited_in_the_latest_state_it_saw(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = EXAMPLES / "cluster"
    files = ["--nodes", str(cluster / "nodes.yaml"), "--pods", str(cluster / "pods.yaml")]
    files += ["--metrics", str(cluster / "metrics.yaml"), "--namespaces", str(cluster / "namespaces.yaml")]
    assert main(["audit", "--rules", str(RULES), *files, "-o", "json"]) == 1
    from_files = json.loads(capsys.readouterr().out)
    assert main(["audit", "--rules", str(RULES), "--recording", str(EXAMPLES / "recording"), "-o", "json"]) == 1
    from_recording = json.loads(capsys.readouterr().out)
    assert from_recording["violations"] == from_files["violations"]
    assert from_recording["violations"][0]["pod"] == "train-0"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--nodes", "n.yaml"], "audit needs --nodes and --pods (or --recording)"),
        (["--recording", "r", "--pods", "p.yaml"], "audit --recording reads the nodes, pods"),
        (["--recording", "no-such-recording"], "no-such-recording: no such recording"),
    ],
)
def test_usage_errors_are_status_2(args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--rules", str(RULES), *args]) == 2
    assert said in capsys.readouterr().err
