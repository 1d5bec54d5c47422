"""Shared fixtures, defined once: each CEL engine, a Kubernetes API on loopback, the real client's access to
it, a node cache on it, a port that refuses connections, and the guard that fails a test reading files
outside the repository."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.nodes.nodecache import NodeCache
from rulesched.rules.cel import ENGINE_NAMES, Engine, make_engine
from tests import outside_reads
from tests.kubeapi import KubeAPI, access_for, refused_port

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


@pytest.fixture(params=ENGINE_NAMES, scope="module")
def engine(request: pytest.FixtureRequest) -> Engine:
    """Each CEL engine in turn (a test using it runs once per engine)."""
    name = request.param
    assert name in ENGINE_NAMES
    return make_engine(name)


@pytest.fixture
def cache(access: KubeAccess) -> Iterator[NodeCache]:
    """A started node cache on `api`, its first list done; short pauses between retries."""
    from tests.kubeapi import make_cache

    cache = make_cache(access)
    cache.start()
    assert cache.wait_ready(5), "the first list did not complete"
    yield cache
    cache.stop()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port where connections are refused (held, so no other test can start a server on it)."""
    with refused_port() as port:
        yield port
