"""`bench/run.py --quick` runs every scenario against real servers and writes sane results.

Speed is never asserted here (the machine is shared and noisy): only that each scenario ran, that
rulesched answered as the hand-written extender did, and that the numbers are well-formed.

These tests start a dozen server processes and take about 20 s, so they are marked `slow`: the README's
test command runs them as a step of their own (`pytest -m slow`) after the rest (`pytest -m 'not slow'`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.run import go_toolchain
from tests.paths import REPO as ROOT

_TIMEOUT = 240
GO = go_toolchain()

pytestmark = pytest.mark.slow


def test_quick_benchmark_covers_every_scenario(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--json", str(output)]
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=_TIMEOUT, check=False)
    assert finished.returncode == 0, finished.stderr[-3000:]
    report = json.loads(output.read_text())
    scenarios = report["scenarios"]
    found = {(s["server"], s["mode"], s["pods"]) for s in scenarios}
    kinds = ("baseline", "lean", "rulesched-cpp", "rulesched-cpp-shadow", "rulesched-celpy", *(("go",) if GO else ()))
    servers = {"floor"} | {f"{kind}/{rules}" for kind in kinds for rules in ("founding", "pod-dependent")}
    assert found == {
        (server, mode, pods) for server in servers for mode in ("names", "full") for pods in ("replica", "new", "cold")
    }
    for scenario in scenarios:
        assert_sane(scenario)
    assert set(report["memory"]) == servers
    assert all(m["peak_rss_mb"] > 0 for m in report["memory"].values())
    assert "| server |" in finished.stdout
    assert len(report["burst"]) == 6, "the burst scenario runs after the HTTP ones"


def assert_sane(scenario: dict[str, Any]) -> None:
    assert scenario["count"] >= 3
    assert scenario["mismatches"] == 0
    for verb in ("filter", "prioritize", "total"):
        p50, p99 = scenario[verb]["p50"], scenario[verb]["p99"]
        assert 0 < p50 <= p99
    if scenario["server"].startswith("rulesched"):
        assert scenario["ratio_to_best"] > 0


def test_benchmark_runs_only_the_servers_modes_and_pods_asked_for(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--json", str(output)]
    chosen = ["--only", "cpp/founding,baseline/founding", "--modes", "names", "--pods", "replica,cold"]
    finished = subprocess.run(
        [*command, *chosen, "--max-pods", "2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=_TIMEOUT,
        check=False,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    scenarios = json.loads(output.read_text())["scenarios"]
    assert {s["count"] for s in scenarios} == {2}  # --max-pods: no more pods than asked for
    found = {(s["server"], s["mode"], s["pods"]) for s in scenarios}
    assert found == {
        (server, "names", pods)
        for server in ("rulesched-cpp/founding", "baseline/founding")
        for pods in ("replica", "cold")
    }
    refused = subprocess.run(
        [*command, "--modes", "names,fast"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert refused.returncode != 0
    assert "choose among names, full; got 'names,fast'" in refused.stderr


@pytest.mark.skipif(not GO, reason="no Go toolchain: pip install '.[bench]' or set GO=/path/to/go")
def test_go_extender_is_built_and_compared(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--json", str(output)]
    chosen = ["--only", "go/founding,cpp/founding", "--modes", "names", "--pods", "replica"]
    finished = subprocess.run(
        command + chosen, cwd=ROOT, env=env, capture_output=True, text=True, timeout=_TIMEOUT, check=False
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    scenarios = {s["server"]: s for s in json.loads(output.read_text())["scenarios"]}
    assert set(scenarios) == {"go/founding", "rulesched-cpp/founding"}
    assert scenarios["go/founding"]["mismatches"] == 0
    assert scenarios["rulesched-cpp/founding"]["ratio_to_go"] == scenarios["rulesched-cpp/founding"]["ratio_to_best"]


def test_http_floor_measures_each_uvicorn_option_asked_for() -> None:
    script = str(ROOT / "bench" / "http_floor.py")
    command = [sys.executable, script, "--size", "10", "--pods", "3", "--only", "httptools"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert finished.returncode == 0, finished.stderr[-3000:]
    rows = [line.split("|")[1].strip() for line in finished.stdout.splitlines()[2:]]
    assert rows == ["asyncio+httptools", "asyncio+httptools+bare", "uvloop+httptools", "uvloop+httptools+bare"]


@pytest.mark.parametrize("script", ["burst.py", "run.py"])
def test_burst_scenario_runs_and_spreads(tmp_path: Path, script: str) -> None:
    """`bench/burst.py`, alone or as the benchmark's burst scenario (`bench/run.py --only burst`): replicas
    whose placements feed `recent` and `pods` spread; steady ones pile up."""
    output = tmp_path / "burst.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if script == "burst.py":
        command = [sys.executable, str(ROOT / "bench" / "burst.py"), "--nodes", "60", "--replicas", "12"]
    else:
        command = [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--only", "burst"]
    finished = subprocess.run(
        [*command, "--json", str(output)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    report = json.loads(output.read_text())
    found = report["results"] if script == "burst.py" else report["burst"]
    results = {(r["rules"], r["pod_events"]): r for r in found}
    assert len(results) == 6
    assert all(r["replicas"] == 12 and r["p50_ms"] > 0 for r in results.values())
    assert results[("founding (usage only)", True)]["nodes_used"] == 1
    assert results[("founding (usage + recent)", False)]["nodes_used"] == 1
    assert results[("founding (usage + recent)", True)]["nodes_used"] > 1
    assert results[("founding + recent + pods spread", True)]["most_on_one_node"] <= 3
    if script == "run.py":
        assert report["scenarios"] == []  # --only burst: no HTTP scenario
        assert "| founding (usage + recent) | yes |" in finished.stdout


def test_stage_profile_reports_every_stage_of_both_verbs() -> None:
    script = str(ROOT / "bench" / "stages.py")
    command = [sys.executable, script, "--size", "50", "--count", "3", "--rules", "pod-dependent", "--pods", "new"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert finished.returncode == 0, finished.stderr[-3000:]
    rows = [line.split("|")[1].strip() for line in finished.stdout.splitlines()[2:]]
    stages = [
        f"{verb}/{stage}"
        for verb in ("filter", "prioritize")
        for stage in ("decode", "validate", "candidates", "evaluate", "encode", "observe")
    ]
    assert rows == [*stages, "in process, filter + prioritize"]


def test_poll_scenario_measures_the_first_request_after_each_poll(tmp_path: Path) -> None:
    """`bench/poll.py`: a real server polls a loopback metrics-server; the first request after each poll
    is measured against the steady ones, and the nodes asked about were made ready ahead of it."""
    output = tmp_path / "poll.json"
    script = str(ROOT / "bench" / "poll.py")
    command = [
        sys.executable,
        script,
        "--size",
        "50",
        "--polls",
        "2",
        "--interval",
        "0.5",
        "--settle",
        "0.1",
        "--json",
        str(output),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    finished = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert finished.returncode == 0, finished.stderr[-3000:]
    result = json.loads(output.read_text())
    assert result["polls"] == 2
    assert result["mismatches"] == 0
    assert result["first_after_poll_p50_ms"] > 0
    assert result["steady_p50_ms"] > 0
    assert result["ratio"] > 0
    assert result["refreshed_ahead"] >= 2 * 50


def test_rss_scenario_reports_bytes_per_cached_node_and_the_ratio_to_lean_python(tmp_path: Path) -> None:
    output = tmp_path / "rss.json"
    script = str(ROOT / "bench" / "rss.py")
    chosen = ["--sizes", "20,60", "--pods", "2", "--only", "lean,cpp/founding", "--json", str(output)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    finished = subprocess.run(
        [sys.executable, script, *chosen], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    rows = {row["server"]: row for row in json.loads(output.read_text())["rows"]}
    assert set(rows) == {"lean/founding", "rulesched-cpp/founding"}
    assert all(row["rss_mb_20"] > 0 and row["rss_mb_60"] > 0 and "bytes_per_node" in row for row in rows.values())
    assert rows["rulesched-cpp/founding"]["ratio_to_lean"] > 0
    assert "| rulesched-cpp/founding |" in finished.stdout
