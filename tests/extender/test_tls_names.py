"""Mutual TLS restricted by name: `--tls-client-name` accepts only the named client certificates of the CA.

The CA alone says a certificate is the cluster's; the names say it is kube-scheduler's. A certificate from
the right CA under another name is refused before a byte of HTTP is read, and the server keeps serving.
"""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from rulesched.extender.connection import certificate_names
from rulesched.settings import Settings
from tests.paths import RULES
from tests.server import running_server

ALLOWED = "kube-scheduler.rulesched.test"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def files(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tls-names")
    ca.cert_pem.write_to_path(str(directory / "ca.crt"))
    for name, identity in (("server", "127.0.0.1"), ("scheduler", ALLOWED), ("other", "other.rulesched.test")):
        leaf = ca.issue_cert(identity)
        leaf.cert_chain_pems[0].write_to_path(str(directory / f"{name}.crt"))
        leaf.private_key_pem.write_to_path(str(directory / f"{name}.key"))
    return directory


@pytest.fixture(scope="module")
def port(files: Path) -> Iterator[int]:
    settings = Settings(
        rules_dir=RULES,
        cluster="off",
        tls_cert_file=files / "server.crt",
        tls_key_file=files / "server.key",
        tls_client_ca_file=files / "ca.crt",
        tls_client_names=("spiffe://cluster.local/ns/rulesched/sa/kube-scheduler", ALLOWED),
    )
    with running_server(settings) as url:
        yield int(url.rsplit(":", 1)[1])


def get(port: int, files: Path, client: str) -> int:
    context = ssl.create_default_context(cafile=str(files / "ca.crt"))
    context.load_cert_chain(str(files / f"{client}.crt"), str(files / f"{client}.key"))
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        assert json.loads(response.read()) == {"status": "ok"}
        return response.status
    finally:
        connection.close()


def test_a_named_client_certificate_is_served(port: int, files: Path) -> None:
    assert get(port, files, "scheduler") == 200


def test_a_certificate_of_the_ca_under_another_name_is_refused(port: int, files: Path) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        get(port, files, "other")
    assert get(port, files, "scheduler") == 200, "the server stopped serving after refusing a client"


def test_certificate_names_are_the_common_name_and_dns_and_uri_alternative_names() -> None:
    peer = {
        "subject": ((("organizationName", "o"),), (("commonName", "cn.example"),)),
        "subjectAltName": (("DNS", "dns.example"), ("URI", "spiffe://x/y"), ("IP Address", "10.0.0.1")),
    }
    assert certificate_names(peer) == {"cn.example", "dns.example", "spiffe://x/y"}
