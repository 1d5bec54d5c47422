"""Shared fixtures: a fake Kubernetes API on loopback, the real client's access to it, and the guard that
fails a test reading files outside the repository."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rulesched.cluster.kube import KubeAccess
from tests import outside_reads
from tests.kubeapi import KubeAPI, access_for

outside_reads.install()


def pytest_collection_finish(session: pytest.Session) -> None:
    found = outside_reads.take()
    if found:
        raise pytest.UsageError("collecting the tests " + outside_reads.describe(found))


@pytest.fixture(autouse=True)
def _no_reads_outside_the_repository() -> Iterator[None]:
    outside_reads.take()
    yield
    found = outside_reads.take()
    if found:
        pytest.fail("this test " + outside_reads.describe(found))


@pytest.fixture
def api() -> Iterator[KubeAPI]:
    """A Kubernetes API server speaking the recorded v1.32 wire format, on 127.0.0.1."""
    server = KubeAPI()
    yield server
    server.close()


@pytest.fixture
def access(api: KubeAPI, tmp_path: Path) -> Iterator[KubeAccess]:
    """The real `kubernetes` client, configured through a kubeconfig file pointing at `api`."""
    access = access_for(api, tmp_path)
    yield access
    access.close()
