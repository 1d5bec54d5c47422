"""`rulesched replay --output markdown`: a pull-request comment that says what changes, always within GitHub's
comment limit: a generated recording far larger than a comment (long names, thousands of rules) is cut to
fit, with a note of what was left out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rulesched.cli import main
from rulesched.tools.replay.markdown import GITHUB_LIMIT, LIMIT, NAME, code
from tests.paths import EXAMPLES, RULES

RECORDING = EXAMPLES / "recording"
LONG = "x" * 200
NODES = [f"node-{i:02d}-{LONG}" for i in range(12)]
RULE_SET = f"audit-{LONG}"
OLD_RULES = [f"{RULE_SET}/rule-{i:04d}" for i in range(3000)]
DRAIN = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata: {name: drain-odd}
spec:
  filters:
  - name: even-nodes-only
    expression: "int(node.metadata.name.split('-')[1]) % 2 == 0"
  scores:
  - name: highest-number
    expression: "double(int(node.metadata.name.split('-')[1]))"
    normalize: Clamp
"""


def line(record: dict[str, Any]) -> str:
    return json.dumps(record) + "\n"


def large_recording(path: Path, pods: int) -> Path:
    """A segment of `pods` pods (long names), a filter and a prioritize call each over 12 nodes, whose recorded
    decisions passed every node and name 3,000 rules that rejected some: far more than a comment holds."""
    records = [{"type": "header", "format": "rulesched-recording", "version": 1, "segment": 1}]
    for i, name in enumerate(NODES):
        node = {"metadata": {"name": name, "resourceVersion": "1"}, "status": {"allocatable": {"cpu": "4"}}}
        records.append({"type": "node", "id": f"n{i}", "object": node})
        records.append({"type": "context", "id": f"c{i}", "name": name, "node": f"n{i}", "metrics": {}})
    contexts = [f"c{i}" for i in range(len(NODES))]
    for p in range(pods):
        pod = {"metadata": {"name": f"pod-{p:05d}-{LONG}", "namespace": "default", "uid": f"uid-{p}"}, "spec": {}}
        records.append({"type": "pod", "id": f"k{p}", "object": pod})
        rejections = dict.fromkeys(OLD_RULES[p * 10 % 3000 : p * 10 % 3000 + 10], 1)
        common: dict[str, Any] = {
            "mode": "names",
            "now": "2026-11-25T07:37:46+00:00",
            "pod": f"k{p}",
            "namespace": None,
        }
        common |= {"candidates": contexts, "unknown": {}, "rules": {"generation": 1, "hash": "h"}}
        decision = {"passed": NODES, "rejected": {}, "rejections": rejections, "deadlineExceeded": False}
        records.append({"type": "call", "verb": "filter", **common, "decision": decision})
        scores = {name: (10 if i == 1 else 0) for i, name in enumerate(NODES)}
        records.append({"type": "call", "verb": "prioritize", **common, "decision": {"scores": scores}})
    path.write_text("".join(line(r) for r in records))
    return path


def replay(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(["replay", *argv])
    return status, capsys.readouterr().out


@pytest.fixture(scope="module")
def drain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("drain")
    (directory / "drain.yaml").write_text(DRAIN)
    return directory


def test_a_large_recording_fits_a_github_comment(
    tmp_path: Path, drain: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = large_recording(tmp_path / "segment-000001.jsonl", pods=300)
    assert recording.stat().st_size > 10 * GITHUB_LIMIT
    status, markdown = replay(capsys, str(recording), "--rules", str(drain), "--output", "markdown")
    _, text = replay(capsys, str(recording), "--rules", str(drain), "--output", "json")
    found = json.loads(text)
    assert status == 0
    assert len(markdown) <= LIMIT < GITHUB_LIMIT
    assert len(markdown.encode()) < GITHUB_LIMIT
    assert len(found["rejections"]) == 3001  # every old rule, and the new one
    shown = markdown.count("\n| `audit-")
    assert 0 < shown < 3000
    assert f"… {3000 - shown} more rules not shown" in markdown
    assert f"| compared | {found['pods']} |" in markdown
    assert found["pods"] == 300
    assert f"| feasible nodes change | {found['feasibleChanged']} |" in markdown
    assert f"| top node changes | {found['topNodeChanged']} |" in markdown
    assert found["topNodeChanged"] == 300  # node 11 now ranks first, where node 01 did
    assert "<details><summary>Biggest changes (10)</summary>" in markdown
    assert "| `drain-odd/even-nodes-only` | 0 | 1800 | +1800 |" in markdown  # the biggest change comes first
    assert LONG not in markdown  # every long name cut
    assert markdown.count("</details>") == markdown.count("<details>") == 1


def test_a_small_report_shows_everything(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rules = [str(RULES), str(EXAMPLES / "drafts" / "drain-zone-b.yaml")]
    status, markdown = replay(
        capsys,
        str(RECORDING),
        "--rules",
        rules[0],
        "--rules",
        rules[1],
        "-o",
        "markdown",
        "--fail-on",
        "unschedulable>0",
    )
    assert status == 1
    assert markdown.startswith("### ❌ rulesched replay: decisions change\n")
    assert "`--fail-on unschedulable>0`: 3, **breached**" in markdown
    assert "| become unschedulable | 3 |" in markdown
    assert "| `zone-b-maintenance/avoid-zone-b` | 0 | 10 | +10 |" in markdown
    assert "- `ml-team/train-1` filter: loses `gpu-node1` **(unschedulable)**" in markdown
    assert "not shown" not in markdown


def test_the_same_rules_say_nothing_changes(capsys: pytest.CaptureFixture[str]) -> None:
    status, markdown = replay(capsys, str(RECORDING), "--rules", str(RULES), "--output", "markdown")
    assert status == 0
    assert markdown.startswith("### ✅ rulesched replay: no pod's decision changes\n")
    assert "<details>" not in markdown
    assert "Rejections per rule" not in markdown


def test_a_cell_cannot_break_the_table() -> None:
    assert code("a|b`c\nd") == "`a\\|b'c d`"
    assert code("n" * 500) == f"`{'n' * (NAME - 1)}…`"
