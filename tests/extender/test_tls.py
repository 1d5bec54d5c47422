"""rulesched over mutual TLS, as overlays/main-scheduler runs it, and the pod's probes as deployed.

The real server runs as a subprocess (`python -m rulesched serve ...`) on a loopback port it binds, with
certificates made here by a test CA (trustme). With a client CA a client certificate is mandatory:
clients without one, or with one from another CA, are refused, and a client holding a certificate from
the CA (kube-scheduler's tlsConfig) gets answers. The exec probes of deploy/ then run against real
servers, exactly as the manifests write them but for the port and the certificate directory.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import ssl
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml

from tests.paths import REPO, RULES
from tests.server import spawned

START_TIMEOUT = 30.0
CERTS_IN_POD = "/etc/rulesched/tls/"
BASE_DEPLOYMENT = REPO / "deploy" / "base" / "deployment.yaml"
TLS_PATCH = REPO / "deploy" / "overlays" / "main-scheduler" / "deployment-patch.yaml"

KeyPair = tuple[Path, Path]


@dataclass(frozen=True)
class Pki:
    """Files made by a test CA: the server's, named as Secret rulesched-tls mounts them, and clients'."""

    directory: Path
    ca: Path
    server: KeyPair
    client: KeyPair
    stranger: KeyPair  # signed by another CA


@dataclass(frozen=True)
class Server:
    """A running `rulesched serve` subprocess: its port and where its log goes."""

    port: int
    log: Path


# --- certificates and servers ----------------------------------------------------------------------


def _write_leaf(ca: trustme.CA, identity: str, directory: Path, name: str) -> KeyPair:
    leaf = ca.issue_cert(identity)
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(directory / "ca.crt"))
    return Pki(
        directory=directory,
        ca=directory / "ca.crt",
        server=_write_leaf(ca, "127.0.0.1", directory, "tls"),
        client=_write_leaf(ca, "kube-scheduler.rulesched.test", directory, "client"),
        stranger=_write_leaf(trustme.CA(), "stranger.rulesched.test", directory, "stranger"),
    )


@contextlib.contextmanager
def serving(options: Sequence[str], log: Path) -> Iterator[Server]:
    """The real server, started as `rulesched serve` would be in the pod, stopped afterwards."""
    with spawned(["--rules", str(RULES), "--cluster", "off", "--log-format", "text", *options], log) as port:
        yield Server(port, log)


@pytest.fixture(scope="module")
def tls_server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    cert, key = pki.server
    options = ["--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-client-ca-file", str(pki.ca)]
    with serving(options, tmp_path_factory.mktemp("tls-server") / "rulesched.log") as server:
        yield server


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving([], tmp_path_factory.mktemp("plain-server") / "rulesched.log") as server:
        yield server


# --- clients ---------------------------------------------------------------------------------------


def client_context(pki: Pki, certificate: KeyPair | None) -> ssl.SSLContext:
    """Trusts the test CA (and checks the server's certificate names 127.0.0.1); presents `certificate`."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    if certificate is not None:
        context.load_cert_chain(str(certificate[0]), str(certificate[1]))
    return context


def exchange(server: Server, context: ssl.SSLContext, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """(status, decoded JSON answer) of one HTTPS request."""
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=10, context=context)
    try:
        payload = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=payload, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def make_node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def make_pod() -> dict[str, Any]:
    container = {"name": "web", "image": "web:1", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    return {
        "metadata": {"name": "web-0", "namespace": "default", "uid": "uid-web-0", "labels": {"app": "web"}},
        "spec": {"schedulerName": "rulesched", "containers": [container]},
    }


# --- mutual TLS ------------------------------------------------------------------------------------


def test_client_without_certificate_is_refused(pki: Pki, tls_server: Server) -> None:
    # With TLS 1.3 the refusal may only surface at the first read: an alert or a reset, never an answer.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        exchange(tls_server, client_context(pki, None), "GET", "/healthz")


def test_client_with_certificate_from_another_ca_is_refused(pki: Pki, tls_server: Server) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError)):
        exchange(tls_server, client_context(pki, pki.stranger), "GET", "/healthz")


def test_client_with_certificate_from_the_ca_is_healthy(pki: Pki, tls_server: Server) -> None:
    status, _ = exchange(tls_server, client_context(pki, pki.client), "GET", "/healthz")
    assert status == 200


def test_filter_answers_over_tls_in_full_mode(pki: Pki, tls_server: Server) -> None:
    nodes = [make_node("node-a", {"filter.xy.com": "yes"}), make_node("node-b", {})]
    body = {"Pod": make_pod(), "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}
    status, answer = exchange(tls_server, client_context(pki, pki.client), "POST", "/filter", body)
    assert status == 200
    assert not answer["Error"]
    passed = {node["metadata"]["name"]: node for node in answer["Nodes"]["items"]}
    failed = set(answer["FailedNodes"] or {}) | set(answer["FailedAndUnresolvableNodes"] or {})
    assert passed.keys() | failed == {"node-a", "node-b"}
    assert not passed.keys() & failed
    assert [node for node in nodes if node["metadata"]["name"] in passed] == list(passed.values())


def test_server_still_serves_after_refusing_clients(pki: Pki, tls_server: Server) -> None:
    for stranger in (None, pki.stranger):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            exchange(tls_server, client_context(pki, stranger), "GET", "/readyz")
    status, answer = exchange(tls_server, client_context(pki, pki.client), "GET", "/readyz")
    assert (status, answer["ready"]) == (200, True)


# --- the probes of deploy/, run against real servers -----------------------------------------------


def probe_code(manifest: Path, probe: str) -> str:
    """The Python program of the rulesched container's exec `probe` in `manifest`."""
    document = yaml.safe_load(manifest.read_text())
    [container] = [c for c in document["spec"]["template"]["spec"]["containers"] if c["name"] == "rulesched"]
    command = container[probe]["exec"]["command"]
    assert command[:2] == ["python", "-c"]
    code: str = command[2]
    return code


def run_probe(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize("probe", ["livenessProbe", "readinessProbe"])
def test_loopback_exec_probe_passes_against_the_server(probe: str, plain_server: Server) -> None:
    code = probe_code(BASE_DEPLOYMENT, probe)
    assert "127.0.0.1:8888" in code
    done = run_probe(code.replace("127.0.0.1:8888", f"127.0.0.1:{plain_server.port}"))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("probe", ["livenessProbe", "readinessProbe"])
def test_loopback_exec_probe_fails_when_nothing_listens(probe: str, closed_port: int) -> None:
    code = probe_code(BASE_DEPLOYMENT, probe)
    assert run_probe(code.replace("127.0.0.1:8888", f"127.0.0.1:{closed_port}")).returncode != 0


@pytest.mark.parametrize("probe", ["livenessProbe", "readinessProbe"])
def test_mutual_tls_exec_probe_passes_with_the_pods_own_certificate(probe: str, pki: Pki, tls_server: Server) -> None:
    # The probe presents tls.crt from the Secret as its client certificate (server and client usages).
    code = probe_code(TLS_PATCH, probe)
    assert CERTS_IN_POD in code
    assert ", 8443," in code
    adapted = code.replace(CERTS_IN_POD, f"{pki.directory}/").replace(", 8443,", f", {tls_server.port},")
    done = run_probe(adapted)
    assert done.returncode == 0, done.stderr
