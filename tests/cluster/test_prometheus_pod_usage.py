"""A MetricSource's `podUsage`: cAdvisor's per-pod series from the loopback Prometheus feed the usage estimates.

The answers are real Prometheus 2.42 recordings of cAdvisor series (`q07`: CPU rate, `v05`: working set),
their `node` label renamed to the `namespace` and `pod` of the shop's pods (tests/test_usage.py): node-a and
node-b are the Deployment web's two pods, node-c and node-d the Job batch's, node-e names no pod.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.usage.pod_metrics import PodMetricsPoller
from rulesched.cluster.usage.prometheus_pods import STATUS_NAME, PodUsageFeed
from rulesched.cluster.usage.store import UsageOptions, UsageStore
from rulesched.rules.cel import Engine
from rulesched.rules.errors import RulesLoadFailed
from rulesched.rules.loader import load_rule_book
from rulesched.rules.metricsource import MetricSource
from rulesched.settings import Settings
from tests.builders import make_pod
from tests.cluster.test_usage import ESTIMATE_RULES, EXAMPLE_NODES, owned, shop_pods
from tests.kubeapi import KubeAPI, wait_for
from tests.prometheus import Prometheus
from tests.server import running_server

CPU = "sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!=''}[5m]))"
MEMORY = "sum by (namespace, pod) (container_memory_working_set_bytes{container!=''})"
PODS = {
    "node-a": "web-5d8f7c9b4-abcde",
    "node-b": "web-5d8f7c9b4-fghij",
    "node-c": "batch-4xk2p",
    "node-d": "batch-9tq7m",
}
RENAMES = {f'"node":"{node}"': f'"namespace":"shop","pod":"{pod}"' for node, pod in PODS.items()}
BATCH_CPU = 1.9011836148433667
"""node-c's CPU in q07, the larger of the batch pods' (the 0.9 quantile of two is the larger)."""
BATCH_MEMORY = 7730941132.0
SLOW = 20.0
"""Seconds a change may take to show: generous, since the suite shares two cores with everything else."""


def metric_source(url: str, **pod_usage: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rulesched.io/v1alpha1",
        "kind": "MetricSource",
        "metadata": {"name": "cadvisor"},
        "spec": {
            "prometheus": {"url": url, "interval": "300ms", "timeout": "300ms", "maxAge": "1s"},
            "podUsage": {"cpu": CPU, "memory": MEMORY, **pod_usage},
        },
    }


def new_batch_pod() -> dict[str, Any]:
    """A new pod of the Job batch: requests 500m, its siblings use 1.35 and 1.9 cores."""
    return owned(make_pod("batch-new", "shop", None, {"cpu": "500m"}), "Job", "batch")


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    with Prometheus() as server:
        server.answer(MEMORY, "v05-stale-explicit-timestamps-linger", **RENAMES)
        yield server  # CPU unanswered: the recorded 400 for bad PromQL


@pytest.fixture
def feeds() -> Iterator[list[PodUsageFeed]]:
    """The feeds a test makes, stopped after it (their clients closed)."""
    made: list[PodUsageFeed] = []
    yield made
    for feed in made:
        feed.stop()


def make_feed(
    feeds: list[PodUsageFeed], store: UsageStore, source: dict[str, Any], max_series: int = 100
) -> PodUsageFeed:
    pods = shop_pods()
    feed = PodUsageFeed(store, lambda: pods, max_series)
    feeds.append(feed)
    feed.configure([MetricSource.model_validate(source)])
    return feed


def answer_cpu(prometheus: Prometheus) -> None:
    prometheus.answer(CPU, "q07-cadvisor-cpu-by-node", **RENAMES)


def pod_usage_status(client: httpx.Client) -> dict[str, Any]:
    queries = client.get("/rules").json()["sources"]["customMetrics"]["queries"]
    found: dict[str, Any] = next(q for q in queries if q["query"] == STATUS_NAME)
    return found


def rules_with_pod_usage(directory: Path, url: str) -> Path:
    """A rules directory: ESTIMATE_RULES and the MetricSource `cadvisor` declaring podUsage on `url`."""
    rules = directory / "rules"
    rules.mkdir()
    (rules / "light.yaml").write_text(ESTIMATE_RULES)
    (rules / "cadvisor.yaml").write_text(json.dumps(metric_source(url)))
    return rules


def offline_settings(directory: Path, url: str) -> Settings:
    """No cluster: the shop's pods on k8s-node1 (`--pods`), `rules_with_pod_usage` and `--prometheus on`."""
    placed = [{**p, "spec": {**p["spec"], "nodeName": "k8s-node1"}} for p in shop_pods()]
    (directory / "pods.json").write_text(json.dumps({"kind": "PodList", "items": placed}))
    return Settings(
        rules_dir=rules_with_pod_usage(directory, url),
        nodes_file=EXAMPLE_NODES,
        pods_file=directory / "pods.json",
        cluster="off",
        prometheus="on",
        enable_explain=True,
    )


def test_a_rule_reads_the_estimate_prometheus_gives_and_the_fallback_while_it_fails(
    tmp_path: Path, prometheus: Prometheus
) -> None:
    settings = offline_settings(tmp_path, prometheus.url)
    call = {"Pod": new_batch_pod(), "NodeNames": ["k8s-node1"]}
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:

        def rejected() -> bool:
            return bool(client.post("/filter", json=call).json()["FailedAndUnresolvableNodes"])

        wait_for(lambda: pod_usage_status(client)["state"] == "failing", SLOW, "the CPU query's 400")
        assert "bad_data" in pod_usage_status(client)["lastError"]
        assert not rejected(), "nothing learnt: the fallback, its 500m request"
        assert client.post("/explain", json=call).json()["estimate"]["samples"] == 0.0

        answer_cpu(prometheus)
        wait_for(rejected, SLOW, "the estimate learnt from Prometheus")
        estimate = client.post("/explain", json=call).json()["estimate"]
        assert (estimate["cpu"], estimate["memory"]) == (pytest.approx(BATCH_CPU), BATCH_MEMORY)
        assert estimate["samples"] >= 1.0
        assert pod_usage_status(client)["nodes"] == 4, "the four shop pods with both values"

        prometheus.go_down()
        wait_for(lambda: pod_usage_status(client)["state"] == "failing", SLOW, "Prometheus down")
        assert rejected(), "a failed poll keeps what was learnt"
        prometheus.come_back()
        wait_for(lambda: pod_usage_status(client)["state"] == "ok", SLOW, "Prometheus back")


def test_metrics_server_gives_way_while_prometheus_answers_and_takes_over_after_max_age(
    api: KubeAPI, access: KubeAccess, prometheus: Prometheus, feeds: list[PodUsageFeed]
) -> None:
    answer_cpu(prometheus)
    store = UsageStore(UsageOptions(quantile=1.0))
    pods = shop_pods()
    feed = make_feed(feeds, store, metric_source(prometheus.url))
    metrics_server = PodMetricsPoller(access.api, store, lambda: pods, interval=60)
    for pod in pods:
        api.set_pod_usage("shop", pod["metadata"]["name"], "3", "64Mi")
    feed.poll()
    assert store.estimate(new_batch_pod()) == {"cpu": pytest.approx(BATCH_CPU), "memory": BATCH_MEMORY, "samples": 1}
    assert metrics_server.poll()
    assert store.estimate(new_batch_pod())["samples"] == 1.0, "metrics-server gave way to Prometheus"
    prometheus.go_down()
    feed.poll()
    assert feed.status()[0].state == "failing"
    time.sleep(1.0)  # the source's maxAge: Prometheus' last answer no longer counts
    assert metrics_server.poll()
    assert store.estimate(new_batch_pod()) == {"cpu": 3.0, "memory": BATCH_MEMORY, "samples": 2}


def test_a_removed_pod_usage_hands_back_to_metrics_server_at_once(
    api: KubeAPI, access: KubeAccess, prometheus: Prometheus, feeds: list[PodUsageFeed]
) -> None:
    answer_cpu(prometheus)
    store = UsageStore()
    pods = shop_pods()
    feed = make_feed(feeds, store, metric_source(prometheus.url))
    feed.poll()
    feed.configure([])
    assert feed.status() == []
    api.set_pod_usage("shop", "batch-4xk2p", "3", "64Mi")
    assert PodMetricsPoller(access.api, store, lambda: pods, interval=60).poll()
    assert store.estimate(new_batch_pod())["samples"] == 2.0


@pytest.mark.parametrize(
    ("max_series", "renames", "message"),
    [
        (3, RENAMES, "5 series, more than 3 (--max-pods): aggregate by pod"),
        (100, {}, "no series has the labels 'namespace' and 'pod'; their labels: node"),
        (100, {**RENAMES, '"node":"node-b"': '"namespace":"shop","pod":"batch-4xk2p"'}, "several series for pod"),
    ],
)
def test_an_answer_that_does_not_name_pods_once_each_is_a_query_error(
    prometheus: Prometheus, feeds: list[PodUsageFeed], max_series: int, renames: dict[str, str], message: str
) -> None:
    prometheus.answer(CPU, "q07-cadvisor-cpu-by-node", **renames)
    store = UsageStore()
    feed = make_feed(feeds, store, metric_source(prometheus.url), max_series)
    feed.poll()
    status = feed.status()[0]
    assert (status.state, store.size()) == ("failing", 0)
    assert message in status.last_error


def test_the_labels_that_name_the_pod_are_configurable(prometheus: Prometheus, feeds: list[PodUsageFeed]) -> None:
    renames = {f'"node":"{node}"': f'"ns":"shop","pod_name":"{pod}"' for node, pod in PODS.items()}
    prometheus.answer(CPU, "q07-cadvisor-cpu-by-node", **renames)
    prometheus.answer(MEMORY, "v05-stale-explicit-timestamps-linger", **renames)
    store = UsageStore()
    feed = make_feed(feeds, store, metric_source(prometheus.url, namespaceLabel="ns", podLabel="pod_name"))
    feed.poll()
    assert store.estimate(new_batch_pod())["cpu"] == pytest.approx(BATCH_CPU)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"podUsage": {"cpu": CPU}}, "spec.podUsage.memory: Field required"),
        ({"podUsage": {"cpu": CPU, "memory": ""}}, "spec.podUsage.memory: String should have at least 1 character"),
        ({"podUsage": {"cpu": CPU, "memory": MEMORY, "podLabel": "pod name"}}, "String should match pattern"),
        ({"podUsage": {"cpu": CPU, "memory": MEMORY, "podLabel": "namespace"}}, "namespaceLabel and podLabel must"),
        ({"podUsage": {"cpu": CPU, "memory": MEMORY, "nodeLabel": "node"}}, "Extra inputs are not permitted"),
        ({"podUsage": None}, "a MetricSource needs queries, podUsage or both"),
    ],
)
def test_a_bad_pod_usage_is_refused_at_load(
    tmp_path: Path, engine: Engine, change: dict[str, Any], message: str
) -> None:
    source = metric_source("http://prometheus:9090")
    source["spec"].update(change)
    (tmp_path / "source.yaml").write_text(json.dumps(source))
    with pytest.raises(RulesLoadFailed) as failure:
        load_rule_book([tmp_path], engine)
    assert [message in str(e) for e in failure.value.errors] == [True], failure.value.errors


def test_only_one_metric_source_may_declare_pod_usage(tmp_path: Path, engine: Engine) -> None:
    for name in ("cadvisor", "thanos"):
        source = metric_source("http://prometheus:9090")
        source["metadata"]["name"] = name
        (tmp_path / f"{name}.yaml").write_text(json.dumps(source))
    with pytest.raises(RulesLoadFailed) as failure:
        load_rule_book([tmp_path], engine)
    assert [str(e) for e in failure.value.errors] == [
        f"{tmp_path}/thanos.yaml:1: thanos: spec.podUsage: podUsage is already declared by MetricSource cadvisor: "
        "the estimates learn from one"
    ]
    (tmp_path / "thanos.yaml").unlink()
    book = load_rule_book([tmp_path], engine)
    assert book.metric_sources[0].spec.podUsage is not None
