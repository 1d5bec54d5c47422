"""Shared fixtures: a fake Kubernetes API on loopback, and the real client's access to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rulesched.cluster.kube import KubeAccess
from tests.kubeapi import KubeAPI, access_for


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
