"""metrics-server through a loopback API server: samples, staleness, absence (404), outages (503) and recovery."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.metrics.metrics_server import MetricsServerSource
from tests.kubeapi import KubeAPI, access_for, wait_for

GI = 2.0**30
LOGGER = "rulesched.cluster.metrics.metrics_server"


@pytest.fixture
def source(access: KubeAccess) -> MetricsServerSource:
    return MetricsServerSource(access.api, interval=60, max_age=90)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def test_poll_reads_every_node_sample_as_numbers(source: MetricsServerSource) -> None:
    assert source.usage("node-a") is None
    assert source.poll()
    node_a, node_c = source.usage("node-a"), source.usage("node-c")
    assert node_a is not None
    assert (node_a.cpu, node_a.memory) == (0.25, 1 * GI)
    assert node_c is not None
    assert node_c.cpu == pytest.approx(0.152614315)
    assert node_c.memory == 1530504 * 1024
    assert source.usage("node-zz") is None
    status = source.status()
    assert (status.nodes, status.last_poll_ok, status.last_error) == (5, True, "")
    assert status.newest_age is not None
    assert status.newest_age < 5


def test_stale_sample_counts_as_absent(api: KubeAPI, source: MetricsServerSource) -> None:
    api.set_usage("node-b", "2", "4Gi", age=200)
    api.set_usage("node-d", "3", "4Gi", age=30)
    assert source.poll()
    assert source.usage("node-b") is None
    fresh = source.usage("node-d")
    assert fresh is not None
    assert fresh.cpu == 3.0


def test_metrics_server_absent_gives_no_usage_and_is_logged_once(
    api: KubeAPI, source: MetricsServerSource, caplog: pytest.LogCaptureFixture
) -> None:
    api.set_metrics_status(404)
    assert [source.poll() for _ in range(3)] == [False, False, False]
    assert source.usage("node-a") is None
    assert warnings(caplog) == [
        "metrics-server unavailable (metrics.k8s.io is not served (404): is metrics-server installed?): "
        "scoring goes on without fresh metrics"
    ]
    status = source.status()
    assert (status.nodes, status.newest_age, status.last_poll_ok) == (0, None, False)


def test_metrics_server_back_is_used_again_and_logged(
    api: KubeAPI, source: MetricsServerSource, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    api.set_metrics_status(404)
    assert not source.poll()
    api.set_metrics_status(200)
    assert source.poll()
    assert source.poll()
    assert source.usage("node-a") is not None
    infos = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.INFO]
    assert infos == ["metrics-server is back: samples for 5 nodes"]


def test_failing_metrics_server_keeps_the_last_samples(
    api: KubeAPI, source: MetricsServerSource, caplog: pytest.LogCaptureFixture
) -> None:
    assert source.poll()
    api.set_metrics_status(503)
    assert not source.poll()
    assert not source.poll()
    assert source.usage("node-a") is not None
    assert source.status().last_error == "503 Service Unavailable: service unavailable"
    assert len(warnings(caplog)) == 1


def test_unreachable_api_is_a_failed_poll(tmp_path: Path, caplog: pytest.LogCaptureFixture, closed_port: int) -> None:
    access = access_for(f"http://127.0.0.1:{closed_port}", tmp_path)
    source = MetricsServerSource(access.api, connect_timeout=1.0, read_timeout=1.0)
    try:
        assert not source.poll()
        assert "NewConnectionError" in source.status().last_error
        assert len(warnings(caplog)) == 1
    finally:
        access.close()


def test_background_thread_polls_every_interval(api: KubeAPI, access: KubeAccess) -> None:
    source = MetricsServerSource(access.api, interval=0.05, max_age=90)
    source.start()
    try:
        wait_for(lambda: source.usage("node-a") is not None, what="the first poll")
        api.set_usage("node-a", "3500m", "2Gi")
        wait_for(lambda: getattr(source.usage("node-a"), "cpu", None) == 3.5, what="the new sample")
    finally:
        source.stop()
    assert not source.loop.status().running
