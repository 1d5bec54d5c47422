"""The `rulesched` command: `check` exit codes and output, `serve` start-up errors and a real start."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rulesched.cli import main
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, REPO, RULES

BROKEN = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: broken
spec:
  filters:
  - name: syntax
    expression: "'filter.xy.com' in"
  - name: not-bool
    expression: "1 + 2"
  scores:
  - name: bad-weight
    expression: "1.0"
    weight: 0
"""


def test_check_accepts_the_shipped_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(RULES)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ok: 6 rule set(s) in 6 file(s)")


@pytest.mark.parametrize("engine", ["cpp", "celpy"])
def test_check_prints_every_error_one_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str) -> None:
    (tmp_path / "broken.yaml").write_text(BROKEN)
    (tmp_path / "fine.yaml").write_text((RULES / "gpu-reserve.yaml").read_text())
    assert main(["check", str(tmp_path), "--cel-engine", engine]) == 1
    lines = capsys.readouterr().err.splitlines()
    file = str(tmp_path / "broken.yaml")
    assert lines[0].startswith(f"{file}:8: broken/syntax: spec.filters[0].expression: CEL: ")
    assert lines[0].endswith("""in "'filter.xy.com' in" at 1:19""")
    assert lines[1] == f"""{file}:10: broken/not-bool: spec.filters[1].expression: must be a bool, not int in '1 + 2'"""
    assert lines[2] == f"{file}:14: broken/bad-weight: spec.scores[0].weight: Input should be greater than 0"
    assert lines[3] == "3 error(s); nothing would be loaded"


def test_serve_rejects_invalid_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--port", "70000"]) == 2
    assert "--port: Input should be less than or equal to 65535" in capsys.readouterr().err


def test_serve_refuses_to_start_on_broken_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "broken.yaml").write_text(BROKEN)
    assert main(["serve", "--rules", str(tmp_path), "--cluster", "off"]) == 1
    err = capsys.readouterr().err
    assert "do not load" in err
    assert "broken/syntax" in err


def test_serve_refuses_a_missing_rules_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--rules", str(tmp_path / "nope"), "--cluster", "off"]) == 1
    assert "does not exist" in capsys.readouterr().err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_python_dash_m_rulesched_serves_the_example(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "rulesched", "serve", "--port", str(port)]
    command += ["--nodes", str(EXAMPLE_NODES), "--metrics", str(EXAMPLE_METRICS), "--log-format", "text"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        assert ready.json()["ready"] is True
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert "serving 6 rule sets" in output
