"""`rulesched check` with nodes or a recording: the reload canary offline; and `check` of no rules at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from rulesched.cli import main
from tests.extender.test_reload_canary import MISSPELT, NOWHERE, WEB_ONLY, rule_set
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, EXAMPLES, RULES

CLUSTER = EXAMPLES / "cluster"
RECORDING = EXAMPLES / "recording"


def checked(directory: Path, *options: str) -> list[str]:
    return ["check", str(directory), *options]


@pytest.fixture
def drafts(tmp_path: Path) -> Path:
    (tmp_path / "fine.yaml").write_text((RULES / "gpu-reserve.yaml").read_text())
    return tmp_path


@pytest.mark.parametrize("engine", ["cpp", "celpy"])
def test_a_rule_failing_on_every_node_fails_the_check_naming_it(
    drafts: Path, engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (drafts / "zone.yaml").write_text(MISSPELT)
    assert main(checked(drafts, "--nodes", str(EXAMPLE_NODES), "--cel-engine", engine)) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"{drafts / 'zone.yaml'}: zone/zone-rule: refused by the canary: it could not be")
    assert "could not be evaluated on any node for any of the 1 pod tried that it applies to: " in lines[0]
    assert lines[-1] == "1 rule(s) refused by the canary; nothing would be loaded"


def test_a_filter_rejecting_every_node_fails_the_check(drafts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (drafts / "nowhere.yaml").write_text(NOWHERE)
    assert main(checked(drafts, "--nodes", str(EXAMPLE_NODES))) == 1
    assert "nowhere/nowhere-rule: refused by the canary: it rejected every node" in capsys.readouterr().err


def test_an_audit_filter_rejecting_every_node_rejects_none_and_passes(drafts: Path) -> None:
    (drafts / "nowhere.yaml").write_text(NOWHERE.replace("    expression:", "    mode: Audit\n    expression:"))
    assert main(checked(drafts, "--nodes", str(EXAMPLE_NODES))) == 0


def test_without_nodes_the_canary_does_not_run(drafts: Path) -> None:
    (drafts / "nowhere.yaml").write_text(NOWHERE)
    assert main(checked(drafts)) == 0


def test_the_pods_given_are_tried_instead_of_the_stand_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: web-1, namespace: default, labels: {app: web}}\n"
        "  spec: {containers: []}\n"
    )
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "web.yaml").write_text(WEB_ONLY)
    assert main(checked(rules, "--nodes", str(EXAMPLE_NODES))) == 1
    assert "web/web-rule" in capsys.readouterr().err
    assert main(checked(rules, "--nodes", str(EXAMPLE_NODES), "--pods", str(pods))) == 0


def test_the_shipped_rules_pass_the_canary_on_the_example_cluster() -> None:
    files = ["--metrics", str(EXAMPLE_METRICS), "--pods", str(CLUSTER / "pods.yaml")]
    options = ["--nodes", str(EXAMPLE_NODES), *files, "--namespaces", str(CLUSTER / "namespaces.yaml")]
    assert main(checked(RULES, *options)) == 0
    assert main(checked(RULES, "--recording", str(RECORDING))) == 0


def test_a_recording_s_calls_are_tried(drafts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (drafts / "score.yaml").write_text(rule_set("score", "double(node.metadata.labels['nope'])", kind="scores"))
    assert main(checked(drafts, "--recording", str(RECORDING))) == 1
    assert "score/score-rule: refused by the canary: it could not be evaluated" in capsys.readouterr().err


def test_a_node_file_that_cannot_be_read_is_an_error(drafts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(checked(drafts, "--nodes", str(drafts / "missing.yaml"))) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_pods_without_nodes_is_a_usage_error(drafts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(checked(drafts, "--pods", str(CLUSTER / "pods.yaml"))) == 2
    assert "go with --nodes" in capsys.readouterr().err


def test_a_directory_without_rules_fails_unless_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(checked(tmp_path)) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path}: no rule sets; a server given these rules would let every node pass" in err
    assert main(checked(tmp_path, "--allow-empty")) == 0
    assert capsys.readouterr().out.startswith("ok: 0 rule set(s)")


def test_a_rule_reading_metrics_is_judged_only_where_there_are_metrics(drafts: Path) -> None:
    # It type-checks, and fails wherever there is a sample: the index is 1 or more in a list of one.
    (drafts / "usage.yaml").write_text(rule_set("usage", "[0.0][int(metrics.cpu.usage) + 1] < 1.0"))
    nodes = ["--nodes", str(EXAMPLE_NODES)]
    assert main(checked(drafts, *nodes)) == 0, "no metrics: every rule reading them fails, which says nothing"
    assert main(checked(drafts, *nodes, "--metrics", str(EXAMPLE_METRICS))) == 1
    assert main(checked(RULES, *nodes)) == 0, "the founding rule's score fails where there are no metrics yet"
