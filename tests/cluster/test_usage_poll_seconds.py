"""`rulesched_usage_poll_seconds{source}`: each source of the pods' usage reports its own last poll's duration,
metrics-server's pod metrics (from the loopback Kubernetes API) and a MetricSource's `podUsage` (from the
loopback Prometheus, with the recordings of tests/cluster/test_prometheus_pod_usage.py); a source that
exists but has not polled yet is NaN, one that does not exist is not exported."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rulesched.cluster import build_cluster
from rulesched.cluster.usage.estimates import Estimates
from rulesched.cluster.usage.prometheus_pods import PodUsageFeed
from rulesched.cluster.usage.store import UsageStore
from rulesched.settings import Settings
from tests.cluster.test_prometheus_pod_usage import (
    MEMORY,
    RENAMES,
    SLOW,
    answer_cpu,
    make_feed,
    metric_source,
    offline_settings,
    pod_usage_status,
    rules_with_pod_usage,
)
from tests.cluster.test_usage import ESTIMATE_RULES, shop_settings
from tests.kubeapi import KubeAPI, wait_for
from tests.prometheus import Prometheus
from tests.server import running_server

NAN = float("nan")


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    with Prometheus() as server:
        server.answer(MEMORY, "v05-stale-explicit-timestamps-linger", **RENAMES)
        yield server  # CPU unanswered (the recorded 400) until the test answers it: no poll succeeds


def poll_seconds(client: httpx.Client) -> dict[str, float]:
    """The samples of `rulesched_usage_poll_seconds` in /metrics, by their `source` label."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        if family.name == "rulesched_usage_poll_seconds":
            found.update((sample.labels.get("source", "(none)"), sample.value) for sample in family.samples)
    return found


def timed(client: httpx.Client, source: str) -> bool:
    return math.isfinite(poll_seconds(client).get(source, NAN))


def test_a_pod_usage_poll_of_prometheus_is_timed_under_its_own_source(tmp_path: Path, prometheus: Prometheus) -> None:
    settings = offline_settings(tmp_path, prometheus.url)  # the pods from a file: metrics-server is not polled
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_for(lambda: pod_usage_status(client)["state"] == "failing", SLOW, "the CPU query's 400")
        seconds = poll_seconds(client)
        assert list(seconds) == ["prometheus"], "only the sources that are polled"
        assert math.isnan(seconds["prometheus"]), "no successful poll yet"
        answer_cpu(prometheus)
        wait_for(lambda: timed(client, "prometheus"), SLOW, "a podUsage poll timed")
        assert 0.0 <= poll_seconds(client)["prometheus"] < SLOW


def test_metrics_server_and_prometheus_each_report_their_own_last_poll(
    api: KubeAPI, tmp_path: Path, prometheus: Prometheus
) -> None:
    api.set_pod_usage("fx-alpha", "web-0", "250m", "64Mi")
    settings = Settings(
        rules_dir=rules_with_pod_usage(tmp_path, prometheus.url),
        kubeconfig=api.kubeconfig(tmp_path / "kubeconfig"),
        cluster="on",
        prometheus="on",
        metrics_interval=0.2,
    )
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        # Prometheus fails (the CPU query's 400): metrics-server's pod metrics are polled meanwhile.
        wait_for(lambda: timed(client, "metrics-server"), SLOW, "a pod metrics poll timed")
        assert math.isnan(poll_seconds(client)["prometheus"]), "podUsage declared, never answered"
        answer_cpu(prometheus)
        wait_for(lambda: timed(client, "prometheus"), SLOW, "a podUsage poll timed")
        seconds = poll_seconds(client)
    assert sorted(seconds) == ["metrics-server", "prometheus"]
    assert all(0.0 <= value < SLOW for value in seconds.values()), seconds


def test_metrics_server_alone_is_the_only_source_exported(api: KubeAPI, tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "light.yaml").write_text(ESTIMATE_RULES)
    settings = Settings(
        rules_dir=rules, kubeconfig=api.kubeconfig(tmp_path / "kubeconfig"), cluster="on", metrics_interval=0.2
    )
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_for(lambda: timed(client, "metrics-server"), SLOW, "a pod metrics poll timed")
        assert list(poll_seconds(client)) == ["metrics-server"]


def test_the_prometheus_source_follows_the_pod_usage_the_rules_declare(prometheus: Prometheus) -> None:
    store = UsageStore()
    answer_cpu(prometheus)
    made: list[PodUsageFeed] = []
    feed = make_feed(made, store, metric_source(prometheus.url))
    try:
        estimates = Estimates(store, pod_usage=feed)
        assert estimates.poll_seconds() == {"prometheus": None}, "declared, not polled yet"
        feed.poll()
        seconds = estimates.poll_seconds()["prometheus"]
        assert seconds is not None
        assert seconds >= 0.0
        feed.configure([])
        assert estimates.poll_seconds() == {}, "no MetricSource declares podUsage: no source"
    finally:
        feed.stop()


def test_a_pod_metrics_file_is_read_once_and_is_no_poll(tmp_path: Path) -> None:
    estimates = build_cluster(shop_settings(tmp_path)).estimates
    assert estimates is not None
    assert estimates.feed is not None
    assert estimates.poll_seconds() == {}
