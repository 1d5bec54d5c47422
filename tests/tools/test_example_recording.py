"""The example recording (`examples/recording/`, made by its `record.py`) and the RuleTest made from it
(`examples/incident/`) stay what the shipped rules and the replay tool give: the worked example of
docs/guides/changing-rules-safely.md stands on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rulesched.cli import main
from tests.paths import EXAMPLES, RULES

RECORDING = EXAMPLES / "recording"
INCIDENT = EXAMPLES / "incident"


def test_the_example_recording_is_what_the_shipped_rules_decide(capsys: pytest.CaptureFixture[str]) -> None:
    # Fails when a change to rules/ changes a recorded decision: run examples/recording/record.py again.
    capsys.readouterr()
    assert main(["replay", str(RECORDING), "--rules", str(RULES), "-o", "json", "--fail-on", "feasible_changed>0"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["pods"], found["feasibleChanged"], found["topNodeChanged"]) == (5, 0, 0)


def test_the_incident_ruletest_is_what_replay_makes_of_the_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["replay", str(RECORDING), "--rules", str(RULES), "--to-ruletest", "ml-team/train-1", "--out", str(tmp_path)]
    assert main(argv) == 0
    for made in sorted((tmp_path / "fixtures").iterdir()):
        assert made.read_text() == (INCIDENT / "fixtures" / made.name).read_text(), made.name
    made_test = yaml.safe_load((tmp_path / "train-1.yaml").read_text())
    kept_test = yaml.safe_load((INCIDENT / "train-1.yaml").read_text())
    assert kept_test["spec"].pop("rules") == ["../../rules"]
    made_test["spec"].pop("rules")
    assert made_test == kept_test
    assert main(["test", str(INCIDENT)]) == 0
