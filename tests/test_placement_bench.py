"""`bench/placement.py` at a tiny size: every placement ran through the real server, and the estimates
learnt from the pod metrics balance the nodes better than requests do (no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.placement import STRATEGIES, main, measure, targets


def test_a_tiny_run_places_every_way_and_the_estimates_balance_better() -> None:
    report = measure(seeds=1, loads=["mid"], threshold=1.1, max_seconds=120, nodes=4, trials=6)
    assert not report["cut short"]
    by = {r["strategy"]: r for r in report["results"]}
    assert set(by) == set(STRATEGIES)
    for result in by.values():
        assert result["max"] >= result["mean"] > 0
    assert by["rulesched (estimates)"]["stddev"] < by["rulesched (requests)"]["stddev"] < by["requests"]["stddev"]
    assert by["rulesched (estimates)"]["max/mean"] <= by["requests"]["max/mean"]
    assert by["rulesched (tuned)"]["max/mean"] <= by["requests"]["max/mean"]
    assert set(report["tuned"]) == {"mid"}
    assert report["tuned"]["mid"]["extender"] >= 1
    assert targets(report["results"]) == []


def test_targets_name_the_seed_that_misses() -> None:
    results = [
        {"load": "mid", "seed": 3, "strategy": "requests", "stddev": 1.0, "max/mean": 1.3},
        {"load": "mid", "seed": 3, "strategy": "rulesched (estimates)", "stddev": 0.6, "max/mean": 1.2},
    ]
    assert targets(results) == ["seed 3: max/mean 1.20 > 1.15", "seed 3: stddev 0.60 > half of 1.00"]


def test_the_command_line_writes_its_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "placement.json"
    assert main(["--seeds", "1", "--loads", "low", "--nodes", "3", "--trials", "3", "--json", str(output)]) == 0
    out = capsys.readouterr().out
    assert "| low | known usage |" in out
    assert "| low | rulesched (tuned) |" in out
    assert output.read_text().startswith("{")
