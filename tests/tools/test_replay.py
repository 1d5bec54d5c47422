"""`rulesched replay`: recordings made by a real server, decided again with other rules; the impact report.

The recordings carry the traffic of `tests/recordings.py` (4 pods, one a batch pod; a filter and a
prioritize call each) decided by the live rules of `tests/rulebooks.py`; the numbers below follow from
the shadow rules' known differences.
"""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from rulesched.cli import main
from tests.recordings import record
from tests.rulebooks import LIVE, SHADOW, rules_dir


@pytest.fixture(scope="module", params=["names", "full"])
def recording(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording made in each wire mode."""
    path, _ = record(tmp_path_factory.mktemp(request.param), request.param)
    return path


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("books")
    return {"live": rules_dir(base / "live", LIVE), "shadow": rules_dir(base / "shadow", SHADOW)}


def replay(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["replay", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def report(capsys: pytest.CaptureFixture[str], recording: Path, *argv: str) -> dict[str, Any]:
    status, out, err = replay(capsys, str(recording), *argv, "--output", "json")
    assert status == 0, err
    found: dict[str, Any] = json.loads(out)
    return found


def test_the_same_rules_change_nothing(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    found = report(capsys, recording, "--rules", str(books["live"]))
    assert found["requests"] == {"filter": 4, "prioritize": 4, "skipped": 0}
    assert found["pods"] == 4
    assert (found["feasibleChanged"], found["unschedulable"], found["topNodeChanged"]) == (0, 0, 0)
    assert found["examples"] == []
    assert found["rejections"] == [{"rule": "xy-least-cpu/require-xy-label", "before": 4, "after": 4}]


def test_the_json_report_of_the_shadow_rules(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    found = report(capsys, recording, "--rules", str(books["shadow"]), "--fail-on", "unschedulable>1")
    assert found == {
        "recording": {"path": str(recording), "segments": 1, "truncatedSegments": []},
        "rules": {"new": str(books["shadow"]), "baseline": "the recorded decisions"},
        "requests": {"filter": 4, "prioritize": 4, "skipped": 0},
        "pods": 4,
        "feasibleChanged": 4,
        "unschedulable": 1,
        "schedulableAgain": 0,
        "topNodeChanged": 4,
        "rejections": [
            {"rule": "xy-least-cpu/drain-node1", "before": 0, "after": 4},
            {"rule": "xy-least-cpu/no-batch", "before": 0, "after": 3},
            {"rule": "xy-least-cpu/require-xy-label", "before": 4, "after": 4},
        ],
        "examples": [  # the biggest change first (a pod made unschedulable), then in the order they came
            {"pod": "default/job-1", "verb": "filter", "lost": ["k8s-node1", "k8s-node2"], "gained": [],
             "unschedulable": True},
            *[example for i in (1, 2, 3) for example in (
                {"pod": f"default/web-{i}", "verb": "filter", "lost": ["k8s-node1"], "gained": [],
                 "unschedulable": False},
                {"pod": f"default/web-{i}", "verb": "prioritize", "topBefore": "k8s-node2", "topAfter": "k8s-node1"},
            )],
            {"pod": "default/job-1", "verb": "prioritize", "topBefore": "k8s-node2", "topAfter": "k8s-node1"},
        ],
        "thresholds": [{"threshold": "unschedulable>1", "actual": 1, "breached": False}],
    }  # fmt: skip


def test_a_baseline_of_old_rules_gives_what_the_recorded_decisions_give(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    against_recorded = report(capsys, recording, "--rules", str(books["shadow"]))
    against_old = report(capsys, recording, "--rules", str(books["shadow"]), "--baseline", str(books["live"]))
    assert against_old["rules"]["baseline"] == str(books["live"])
    del against_old["rules"], against_recorded["rules"]
    assert against_old == against_recorded
    # and the other way round: the shadow rules as the baseline, the live ones new
    reverse = report(capsys, recording, "--rules", str(books["live"]), "--baseline", str(books["shadow"]))
    assert (reverse["unschedulable"], reverse["schedulableAgain"], reverse["feasibleChanged"]) == (0, 1, 4)


@pytest.mark.parametrize(
    ("fail_on", "status"),
    [
        ("", 0),
        ("unschedulable>0", 1),
        ("unschedulable>1", 0),
        ("top_node_changed>=4", 1),
        ("feasible_changed>10,unschedulable>=1", 1),
        ("pods==4", 1),
    ],
)
def test_fail_on_thresholds_give_the_exit_status(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str], fail_on: str, status: int
) -> None:
    got, out, _ = replay(capsys, str(recording), "--rules", str(books["shadow"]), "--fail-on", fail_on)
    assert got == status
    assert ("BREACHED" in out) == (status == 1)


def test_a_threshold_that_cannot_be_read_is_a_usage_error(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = replay(capsys, str(recording), "--rules", str(books["shadow"]), "--fail-on", "moved>0")
    assert status == 2
    assert err == (
        "rulesched: --fail-on 'moved>0': want METRIC>N (or >=, <, <=, ==) with METRIC one of pods, "
        "feasible_changed, unschedulable, schedulable_again, top_node_changed\n"
    )


def test_the_text_report(recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = replay(capsys, str(recording), "--rules", str(books["shadow"]), "--fail-on", "unschedulable>0")
    assert status == 1
    lines = out.splitlines()
    assert lines[0] == f"replayed 8 calls (4 filter, 4 prioritize) of 4 pods from {recording} (1 segment)"
    assert "pods that become unschedulable:   1" in lines
    assert "  default/job-1 filter: loses k8s-node1, k8s-node2 (unschedulable)" in lines
    assert "  default/web-1 prioritize: top node k8s-node2 -> k8s-node1" in lines
    assert lines[-1] == "fail-on unschedulable>0: 1 (BREACHED)"


def test_the_junit_report_has_a_testcase_per_threshold(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--rules", str(books["shadow"]), "-o", "junit", "--fail-on", "unschedulable>0,pods>10"]
    status, out, _ = replay(capsys, str(recording), *argv)
    assert status == 1
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = {c.get("name"): c.find("failure") is not None for c in suite.iter("testcase")}
    assert cases == {"unschedulable>0": True, "pods>10": False}


def _segment(recording: Path) -> Path:
    [segment] = list(recording.iterdir())
    return segment


def _rewrite_header(recording: Path, target: Path, **header: Any) -> Path:
    lines = gzip.decompress(_segment(recording).read_bytes()).splitlines(keepends=True)
    first = json.loads(lines[0]) | header
    target.mkdir()
    (target / "segment-000001.jsonl.gz").write_bytes(
        gzip.compress(json.dumps(first).encode() + b"\n" + b"".join(lines[1:]))
    )
    return target


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({"version": 2, "rulesched": "9.0.0"}, "recording format version 2 (written by rulesched 9.0.0) is newer than "
         "this rulesched reads (version 1): replay it with that rulesched version or a newer one"),
        ({"version": 0, "rulesched": "0.0.1"}, "recording format version 0 (written by rulesched 0.0.1) is not one "
         "this rulesched reads (versions 1): record again with this version"),
        ({"format": "something-else"},
         "not a rulesched recording (its first line is not a rulesched-recording header)"),
    ],
)  # fmt: skip
def test_a_recording_of_a_version_not_read_here_is_refused_with_why(
    recording: Path,
    books: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    header: dict[str, Any],
    message: str,
) -> None:
    other = _rewrite_header(recording, tmp_path / "other", **header)
    status, out, err = replay(capsys, str(other), "--rules", str(books["live"]))
    assert status == 2
    assert out == ""
    assert err == f"rulesched: {other / 'segment-000001.jsonl.gz'}: {message}\n"


def test_a_segment_cut_short_is_read_up_to_where_it_ends(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = gzip.decompress(_segment(recording).read_bytes())
    cut = tmp_path / "cut"
    cut.mkdir()
    last_call = data.rindex(b'{"type":"call"')
    (cut / "segment-000001.jsonl").write_bytes(data[: last_call + 40])  # uncompressed segments are read too
    found = report(capsys, cut, "--rules", str(books["live"]))
    assert found["recording"]["truncatedSegments"] == ["segment-000001.jsonl"]
    assert found["requests"] == {"filter": 4, "prioritize": 3, "skipped": 0}


def test_a_missing_recording_is_a_clear_error(
    books: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = replay(capsys, str(tmp_path / "nowhere"), "--rules", str(books["live"]))
    assert status == 2
    assert "no such recording" in err


def test_a_recorded_decision_becomes_a_ruletest_that_passes(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "incident"
    status, printed, _ = replay(capsys, str(recording), "--rules", str(books["live"]), "--to-ruletest", "default/job-1",
                                "--out", str(out))  # fmt: skip
    assert status == 0
    written = out / "job-1.yaml"
    assert printed == f"wrote {written}; run it with: rulesched test {written}\n"
    import yaml

    document = yaml.safe_load(written.read_text())
    assert document["spec"]["cases"][0]["expect"] == {
        "feasible": ["k8s-node1", "k8s-node2"],
        "rejected": {"k8s-master": "missing label filter.xy.com (rule xy-least-cpu/require-xy-label)"},
        "scores": {"k8s-node1": 0, "k8s-node2": 10},
        "best": "k8s-node2",
    }
    assert main(["test", str(written)]) == 0
    # Against the shadow rules the same test fails: it guards the recorded decision.
    document["spec"]["rules"] = [str(books["shadow"])]
    written.write_text(yaml.safe_dump(document))
    assert main(["test", str(written)]) == 1


def test_a_pod_not_in_the_recording_is_named_with_the_ones_that_are(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = replay(capsys, str(recording), "--rules", str(books["live"]), "--to-ruletest", "default/nope",
                            "--out", str(tmp_path))  # fmt: skip
    assert status == 2
    assert err == (
        f"rulesched: {recording}: no filter call of pod default/nope "
        "(pods in it: default/web-1, default/web-2, default/web-3, default/job-1)\n"
    )


def test_calls_cut_short_by_the_deadline_are_skipped_against_the_recorded_decisions(
    recording: Path, books: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = gzip.decompress(_segment(recording).read_bytes()).splitlines(keepends=True)
    first_call = next(i for i, line in enumerate(lines) if b'"type":"call"' in line)
    call = json.loads(lines[first_call])
    call["decision"]["deadlineExceeded"] = True  # as the extender records a call its deadline cut short
    lines[first_call] = json.dumps(call).encode() + b"\n"
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "segment-000001.jsonl").write_bytes(b"".join(lines))
    found = report(capsys, tmp_path / "cut", "--rules", str(books["shadow"]))
    assert found["requests"] == {"filter": 3, "prioritize": 4, "skipped": 1}
    assert found["feasibleChanged"] == 3  # web-1's only filter call was skipped
    # against old rules it is decided again like any other call
    found = report(capsys, tmp_path / "cut", "--rules", str(books["shadow"]), "--baseline", str(books["live"]))
    assert found["requests"] == {"filter": 4, "prioritize": 4, "skipped": 0}
