"""`bench/shadow.py` (alone, and as `bench/run.py --only shadow-burst`) runs its scenario and reports sane counts.

Speed is never asserted (the machine is shared and noisy): only that both servers were sent every pod of
each pacing, that the rules were reloaded in the middle, and that the shadow server accounts for every
call it was sent (compared or dropped). Marked `slow`, as the other benchmark tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.paths import REPO as ROOT

pytestmark = pytest.mark.slow

_TIMEOUT = 240


def run(command: list[str], output: Path) -> tuple[dict[str, Any], str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    finished = subprocess.run(
        [sys.executable, *command, "--json", str(output)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=_TIMEOUT, check=False,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    report: dict[str, Any] = json.loads(output.read_text())
    return report, finished.stdout


def assert_sane(
    results: list[dict[str, Any]],
    pods: int,
    size: int,
    servers: tuple[str, ...] = ("live-only", "shadowed"),
    pacings: tuple[str, ...] = ("back-to-back", "paced"),
) -> None:
    found = {(r["server"], r["pacing"]): r for r in results}
    assert set(found) == {(s, p) for s in servers for p in pacings}
    for result in found.values():
        assert result["size"] == size
        assert result["pods"] == pods  # the reload in the middle is no pod
        assert result["reloads"] == 1, "the rules were not reloaded in the middle"
        assert 0 < result["filter"]["p50"] <= result["filter"]["p99"]
    for pacing in pacings:
        shadow = found[("shadowed", pacing)]["shadow"]
        assert shadow["calls"] == 2 * pods
        assert shadow["compared"] + shadow["dropped"] == 2 * pods
        assert shadow["made"]["betweenCalls"] + shadow["made"]["thread"] == shadow["compared"]
        assert "shadow" not in found[("live-only", pacing)]


def test_shadow_burst_reports_compared_and_dropped_beside_the_live_latency(tmp_path: Path) -> None:
    command = [str(ROOT / "bench" / "shadow.py"), "--sizes", "60", "--pods", "10", "--rounds", "1"]
    report, stdout = run(command, tmp_path / "shadow.json")
    assert_sane(report["results"], pods=10, size=60)
    assert "| 60 | back-to-back | shadowed | 10 |" in stdout


def test_a_control_server_shows_the_runs_own_noise(tmp_path: Path) -> None:
    """`--control`: a second server without shadow rules, sent the same calls, its ratios to the first beside
    the shadowed server's."""
    command = [str(ROOT / "bench" / "shadow.py"), "--sizes", "60", "--pods", "10", "--rounds", "1", "--control"]
    report, stdout = run(command, tmp_path / "shadow.json")
    assert_sane(report["results"], pods=10, size=60, servers=("live-only", "shadowed", "control"))
    rows = stdout.splitlines()
    assert len([row for row in rows if "| control | 10 |" in row]) == 2
    live = [row for row in rows if "| live-only | 10 |" in row]
    assert len(live) == 2
    assert all("| 1.0, 1.0, 1.0, 1.0 |" in row for row in live)  # the ratios are to live-only, not to the control
    assert all("shadow" not in r for r in report["results"] if r["server"] == "control")


def test_one_pacing_runs_alone(tmp_path: Path) -> None:
    """`--pacings back-to-back`: that pacing's results alone (the paced one takes most of a run's time)."""
    command = [str(ROOT / "bench" / "shadow.py"), "--sizes", "60", "--pods", "10", "--rounds", "1"]
    report, stdout = run([*command, "--pacings", "back-to-back"], tmp_path / "shadow.json")
    assert_sane(report["results"], pods=10, size=60, pacings=("back-to-back",))
    assert "| paced |" not in stdout


def test_an_unknown_pacing_is_refused_with_the_known_ones() -> None:
    finished = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "shadow.py"), "--pacings", "back-to-back,bursty"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert finished.returncode == 2
    assert "--pacings: 'back-to-back,bursty' is not a comma-separated list of back-to-back, paced" in finished.stderr


def test_the_benchmark_runs_the_shadow_burst_when_asked(tmp_path: Path) -> None:
    command = [str(ROOT / "bench" / "run.py"), "--quick", "--only", "shadow-burst"]
    report, stdout = run(command, tmp_path / "run.json")
    assert (report["scenarios"], report["burst"]) == ([], [])  # --only shadow-burst: nothing else
    assert_sane(report["shadow_burst"], pods=12, size=100)
    assert "Shadow burst (names mode; bench/shadow.py)" in stdout


def test_the_handoff_benchmark_measures_both_kinds_of_second_process(tmp_path: Path) -> None:
    """`bench/shadow_handoff.py`: what handing a call on costs in process, and what sending its state to a
    second process would (the bytes a call, and to pickle them)."""
    command = [str(ROOT / "bench" / "shadow_handoff.py"), "--sizes", "60", "--repeat", "3"]
    report, stdout = run(command, tmp_path / "handoff.json")
    (found,) = report["results"]
    assert found["size"] == 60
    assert found["statelessProcess"]["bytes"] > 10 * found["statefulProcess"]["bytes"] > 0
    assert found["inProcess"]["submitMs"] > 0
    assert found["statelessProcess"]["pickleMs"] > 0
    assert "| 60 |" in stdout
