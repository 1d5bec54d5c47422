"""Contradictory settings refuse to start: one clear line each, exit 2 (issue #12)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

from rulesched.cli import main
from tests.paths import EXAMPLE_NODES, RULES

CONTRADICTIONS = [
    (["--enable-bind", "--cluster", "off"], "--enable-bind needs a cluster, but --cluster is off"),
    (["--tls-key-file", "k.pem"], "--tls-key-file needs --tls-cert-file"),
    (["--tls-cert-file", "c.pem"], "--tls-cert-file needs --tls-key-file"),
    (["--tls-client-ca-file", "ca.pem"], "--tls-client-ca-file needs --tls-cert-file and --tls-key-file"),
    (
        ["--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--tls-client-name", "kube-scheduler"],
        "--tls-client-name needs --tls-client-ca-file",
    ),
    (["--metrics-interval", "120"], "--metrics-max-age is shorter than --metrics-interval"),
    (
        ["--record", "recording", "--record-segment-bytes", "100000", "--record-max-bytes", "50000"],
        "--record-max-bytes is smaller than --record-segment-bytes: not even one segment would be kept",
    ),
]


@pytest.mark.parametrize(("flags", "line"), CONTRADICTIONS, ids=[" ".join(f) for f, _ in CONTRADICTIONS])
def test_contradictory_settings_exit_2_with_one_line(
    flags: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--rules", str(RULES), *flags]) == 2
    error = capsys.readouterr().err
    assert error.splitlines() == [error.splitlines()[0]], error
    assert error.startswith(f"rulesched: {line}"), error


def test_every_contradiction_is_reported_each_on_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--enable-bind", "--cluster", "off", "--tls-key-file", "k.pem"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "rulesched: --enable-bind needs a cluster, but --cluster is off",
        "rulesched: --tls-key-file needs --tls-cert-file",
    ]


def test_enable_bind_when_no_cluster_is_found_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # --nodes with --cluster auto means no cluster: nothing could bind.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["serve", "--rules", str(RULES), "--nodes", str(EXAMPLE_NODES), "--enable-bind"]) == 1
    assert "--enable-bind needs a cluster, and none was found" in capsys.readouterr().err


def test_a_bad_value_still_names_its_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--max-candidates", "0"]) == 2
    assert capsys.readouterr().err.startswith("rulesched: --max-candidates: ")


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tls-files")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.crt"))
    for name in ("server", "other"):
        leaf = ca.issue_cert("127.0.0.1")
        leaf.cert_chain_pems[0].write_to_path(str(directory / f"{name}.crt"))
        leaf.private_key_pem.write_to_path(str(directory / f"{name}.key"))
    (directory / "not-pem.txt").write_text("not a certificate\n")
    return directory


UNUSABLE_TLS = [
    (["missing.crt", "server.key"], "--tls-cert-file {d}/missing.crt: no such file"),
    (["server.crt", "missing.key"], "--tls-key-file {d}/missing.key: no such file"),
    (["not-pem.txt", "server.key"], "--tls-cert-file {d}/not-pem.txt with --tls-key-file {d}/server.key: not a"),
    (["server.crt", "other.key"], "--tls-cert-file {d}/server.crt with --tls-key-file {d}/other.key: not a"),
    (["server.crt", "server.key", "missing-ca.crt"], "--tls-client-ca-file {d}/missing-ca.crt: no such file"),
    (["server.crt", "server.key", "not-pem.txt"], "--tls-client-ca-file {d}/not-pem.txt holds no PEM certificate"),
]


@pytest.mark.parametrize(("files", "line"), UNUSABLE_TLS, ids=["/".join(f) for f, _ in UNUSABLE_TLS])
def test_unusable_tls_files_refuse_to_start_with_one_line(
    tls_files: Path, files: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, uvicorn found out after start-up and the process ended with a traceback.
    flags = ["--tls-cert-file", "--tls-key-file", "--tls-client-ca-file"]
    given = [part for flag, name in zip(flags, files, strict=False) for part in (flag, str(tls_files / name))]
    assert main(["serve", "--rules", str(RULES), "--cluster", "off", "--port", "0", *given]) == 1
    error = capsys.readouterr().err
    assert len(error.splitlines()) == 1, error
    assert error.startswith(f"rulesched: {line.format(d=tls_files)}"), error
