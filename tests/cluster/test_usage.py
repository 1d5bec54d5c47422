"""Usage estimates: a pod's workload, the bounded summary per workload, the fallback, the pod metrics poll
(from a PodMetricsList file and from the loopback API), and `recent.estimates` on the nodes."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.cluster import build_cluster
from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.pods.index import PodIndex
from rulesched.cluster.usage.pod_metrics import PodMetricsPoller
from rulesched.cluster.usage.pod_metrics_wire import pod_usage
from rulesched.cluster.usage.store import (
    FilePodMetrics,
    UsageOptions,
    UsageStore,
    parse_pod_metrics,
    quantile,
    record_poll,
    workload_of,
)
from rulesched.rules.estimate import Fallback, fallback_estimate, pod_limits
from rulesched.rules.pod_values import pod_view
from rulesched.settings import Settings
from tests.builders import make_pod
from tests.kubeapi import KubeAPI
from tests.paths import REPO
from tests.server import running_server

POD_METRICS = REPO / "tests" / "fixtures" / "pod-metrics" / "pods-list.json"
EXAMPLE_NODES = REPO / "examples" / "cluster" / "nodes.yaml"


def owned(pod: dict[str, Any], kind: str, name: str, template_hash: str = "") -> dict[str, Any]:
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": name, "controller": True}]
    if template_hash:
        pod["metadata"].setdefault("labels", {})["pod-template-hash"] = template_hash
    return pod


def shop_pods() -> list[dict[str, Any]]:
    """The pods of the PodMetricsList fixture, with their owners."""
    web = [
        owned(make_pod(n, "shop", {"app": "web"}, {"cpu": "500m"}), "ReplicaSet", "web-5d8f7c9b4", "5d8f7c9b4")
        for n in ("web-5d8f7c9b4-abcde", "web-5d8f7c9b4-fghij")
    ]
    batch = [
        owned(make_pod(n, "shop", {"job-name": "batch"}, {"cpu": "500m"}), "Job", "batch")
        for n in ("batch-4xk2p", "batch-9tq7m")
    ]
    return [*web, *batch, make_pod("tool", "shop", {"app": "tool"}, {"cpu": "100m"})]


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (owned(make_pod("web-5d8f7c9b4-x", "shop"), "ReplicaSet", "web-5d8f7c9b4", "5d8f7c9b4"), "shop/Deployment/web"),
        (owned(make_pod("rs-x", "shop"), "ReplicaSet", "rs"), "shop/ReplicaSet/rs"),
        (
            owned(make_pod("db-0", "shop", {"statefulset.kubernetes.io/pod-name": "db-0"}), "StatefulSet", "db"),
            "shop/StatefulSet/db",
        ),
        (make_pod("tool", "shop", {"app": "tool", "pod-template-hash": "abc"}), "shop/labels:app=tool"),
        (make_pod("lonely", "shop"), None),
    ],
)
def test_a_pod_belongs_to_its_controller_or_its_labels(pod: dict[str, Any], expected: str | None) -> None:
    assert workload_of(pod) == expected
    assert workload_of(pod_view(pod)) == expected, "a pod's view names the same workload"


def test_pod_metrics_sum_the_containers_of_each_pod() -> None:
    usage = parse_pod_metrics(json.loads(POD_METRICS.read_text()))
    cpu, memory = usage[("shop", "web-5d8f7c9b4-abcde")]
    assert cpu == pytest.approx(0.152614315 + 0.048112003)
    assert memory == (65536 + 32768) * 1024
    assert usage[("shop", "tool")][0] == pytest.approx(0.003)


def test_the_estimate_is_the_quantile_of_each_polls_quantile_over_the_window() -> None:
    store = UsageStore(UsageOptions(window=3, quantile=0.5))
    pod = owned(make_pod("w-1", "shop", None, {"cpu": "500m"}), "Job", "w")
    for poll in ([(0.1, 1.0), (0.3, 3.0), (0.2, 2.0)], [(0.9, 9.0)], [(0.4, 4.0)], [(0.5, 5.0)]):
        store.record({"shop/Job/w": poll})
    # polls kept: 0.9, 0.4, 0.5 (the first poll's 0.2 went out of the window); their median
    assert store.estimate(pod) == {"cpu": 0.5, "memory": 5.0, "samples": 3.0}
    assert quantile([], 0.9) == 0.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.9) == 4.0


def test_a_workload_never_seen_falls_back_on_requests_or_a_factor_of_limits() -> None:
    pod = make_pod("w-1", "shop", {"app": "new"}, {"cpu": "500m", "memory": "1Gi"})
    pod["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "2"}
    assert UsageStore().estimate(pod) == {"cpu": 0.5, "memory": 2.0**30, "samples": 0.0}
    by_limits = UsageStore(fallback=Fallback("limits", 0.5)).estimate(pod)
    assert by_limits == {"cpu": 1.0, "memory": 2.0**29, "samples": 0.0}, "memory has no limit: its request counts"
    assert pod_limits(pod) == {"cpu": 2.0, "memory": 2.0**30}
    assert fallback_estimate(pod, Fallback("requests", 1.5))["cpu"] == pytest.approx(0.75)


def test_the_store_keeps_at_most_its_workloads_the_least_recently_used_forgotten() -> None:
    store = UsageStore(UsageOptions(max_workloads=2))
    pods = {w: make_pod(f"{w}-1", "shop", {"app": w}, {"cpu": "100m"}) for w in ("a", "b", "c")}
    store.record({"shop/labels:app=a": [(1.0, 1.0)], "shop/labels:app=b": [(2.0, 2.0)]})
    assert store.estimate(pods["a"])["cpu"] == 1.0  # asked for: now the most recently used
    store.record({"shop/labels:app=c": [(3.0, 3.0)]})
    assert store.size() == 2
    assert store.estimate(pods["b"])["samples"] == 0.0, "b was forgotten: it falls back"
    assert store.estimate(pods["a"])["cpu"] == 1.0
    assert store.estimate(pods["c"])["cpu"] == 3.0


def test_a_poll_learns_each_workload_from_the_pods_known_by_name() -> None:
    store = UsageStore(UsageOptions(quantile=1.0))
    sampled = record_poll(store, json.loads(POD_METRICS.read_text()), [pod_view(p) for p in shop_pods()])
    assert sampled == 5
    new_web = owned(
        make_pod("web-5d8f7c9b4-zzzzz", "shop", {"app": "web"}, {"cpu": "500m"}),
        "ReplicaSet",
        "web-5d8f7c9b4",
        "5d8f7c9b4",
    )
    assert store.estimate(new_web)["cpu"] == pytest.approx(0.3), "the busiest web pod (q=1): 250m + 50m"
    new_batch = owned(make_pod("batch-new", "shop", None, {"cpu": "500m"}), "Job", "batch")
    assert store.estimate(new_batch)["cpu"] == pytest.approx(1.521093117)
    assert store.estimate(make_pod("other", "shop", {"app": "other"}, {"cpu": "500m"}))["cpu"] == 0.5


def test_recent_counts_each_placed_pod_with_its_estimate_and_preemption_takes_it_out() -> None:
    store = UsageStore(UsageOptions(quantile=1.0))
    record_poll(store, json.loads(POD_METRICS.read_text()), shop_pods())
    index = PodIndex()
    index.estimator = store.estimate
    batch = owned(make_pod("batch-x", "shop", None, {"cpu": "500m"}), "Job", "batch")
    batch["metadata"]["uid"] = "uid-batch-x"
    index.reserve(batch, "node-a")  # ranked first by this extender: counted at once
    bound = owned(make_pod("batch-y", "shop", None, {"cpu": "500m"}), "Job", "batch")
    bound["spec"]["nodeName"] = "node-a"
    index.apply("ADDED", bound)  # bound by another scheduler, after the sample
    recent = index.node_pods("node-a", datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)).recent
    assert recent["requests"]["cpu"] == pytest.approx(1.0)
    assert recent["estimates"]["cpu"] == pytest.approx(2 * 1.521093117)
    pods = index.node_pods("node-a", datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC))
    left = pods.without({bound["metadata"]["uid"]}).recent
    assert left["estimates"]["cpu"] == pytest.approx(1.521093117), "a victim's estimate leaves recent with it"


def test_without_an_estimator_recent_estimates_are_the_requests() -> None:
    index = PodIndex()
    pod = make_pod("w", "shop", {"app": "w"}, {"cpu": "700m"})
    index.reserve(pod, "node-a")
    recent = index.node_pods("node-a", None).recent
    assert recent["estimates"] == {"cpu": pytest.approx(0.7), "memory": 0.0}
    empty = index.node_pods("node-b", None).recent
    assert [type(v) for v in empty["estimates"].values()] == [float, float], "CEL adds doubles, not an int 0"
    index.forget(pod)
    index.apply("ADDED", {**pod, "spec": {**pod["spec"], "nodeName": "node-b"}})
    placed_before = index.node_pods("node-b", datetime.datetime.now(datetime.UTC)).recent["estimates"]
    assert [type(v) for v in placed_before.values()] == [float, float]


def test_a_pod_metrics_file_feeds_the_store_once() -> None:
    store = UsageStore()
    feed = FilePodMetrics(POD_METRICS, store, shop_pods())
    assert (feed.sampled, store.size(), store.polls) == (5, 3, 1)


def test_the_poller_learns_from_metrics_server_and_keeps_what_it_learnt_when_it_fails(
    api: KubeAPI, access: KubeAccess
) -> None:
    store = UsageStore(UsageOptions(quantile=1.0))
    pods = shop_pods()
    poller = PodMetricsPoller(access.api, store, lambda: pods, interval=60)
    for pod in pods:
        api.set_pod_usage("shop", pod["metadata"]["name"], "1200m", "64Mi")
    api.set_pod_usage("shop", "unknown-pod", "9", "1Gi")
    assert poller.poll()
    assert (poller.sampled, store.size()) == (5, 3)
    assert poller.seconds is not None
    new_batch = owned(make_pod("batch-new", "shop", None, {"cpu": "500m"}), "Job", "batch")
    assert store.estimate(new_batch) == {"cpu": 1.2, "memory": 64 * 2.0**20, "samples": 1.0}
    api.set_metrics_status(503)
    assert not poller.poll()
    assert store.estimate(new_batch)["cpu"] == 1.2, "a failed poll keeps what was learnt"
    api.set_metrics_status(200)
    assert poller.poll()
    assert store.estimate(new_batch)["samples"] == 2.0


ESTIMATE_RULES = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: light-pods-only
spec:
  filters:
  - name: uses-under-a-core
    expression: estimate.cpu < 1.0
    message: this pod will use a core or more
"""


def shop_settings(directory: Path, **more: Any) -> Settings:
    """Offline: the shop's pods on k8s-node1 (`--pods`), their usage (`--pod-metrics-file`), ESTIMATE_RULES."""
    rules = directory / "rules"
    rules.mkdir()
    (rules / "light.yaml").write_text(ESTIMATE_RULES)
    placed = [{**p, "spec": {**p["spec"], "nodeName": "k8s-node1"}} for p in shop_pods()]
    (directory / "pods.json").write_text(json.dumps({"kind": "PodList", "items": placed}))
    files = {"nodes_file": EXAMPLE_NODES, "pods_file": directory / "pods.json", "pod_metrics_file": POD_METRICS}
    return Settings(**{"rules_dir": rules, "cluster": "off", **files, **more})


def test_a_server_with_pod_metrics_gives_rules_the_estimate_and_explains_it(tmp_path: Path) -> None:
    settings = shop_settings(tmp_path, enable_explain=True)
    batch = owned(make_pod("batch-new", "shop", None, {"cpu": "500m"}), "Job", "batch")
    web = owned(
        make_pod("web-5d8f7c9b4-new", "shop", {"app": "web"}, {"cpu": "2"}), "ReplicaSet", "web-5d8f7c9b4", "5d8f7c9b4"
    )
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        rejected = client.post("/filter", json={"Pod": batch, "NodeNames": ["k8s-node1"]}).json()
        assert rejected["FailedAndUnresolvableNodes"] == {
            "k8s-node1": "this pod will use a core or more (rule light-pods-only/uses-under-a-core)"
        }
        passed = client.post("/filter", json={"Pod": web, "NodeNames": ["k8s-node1"]}).json()
        assert passed["NodeNames"] == ["k8s-node1"], "requests 2 cores, uses 0.3: the estimate decides"
        report = client.post("/explain", json={"Pod": batch, "NodeNames": ["k8s-node1"]}).json()
        assert report["estimate"]["samples"] == 1.0
        assert report["estimate"]["cpu"] == pytest.approx(1.521093117, rel=0.2)
        metrics = client.get("/metrics").text
        assert "rulesched_usage_workloads 3.0" in metrics
        assert "rulesched_usage_poll_seconds" in metrics


def test_the_poll_decodes_the_bytes_as_the_plain_reader_does_and_refuses_what_is_not_a_list() -> None:
    data = POD_METRICS.read_bytes()
    assert pod_usage(data) == parse_pod_metrics(json.loads(data))
    for broken in (b"not json", b'{"kind": "Status"}', b'{"items": [{"containers": 3}]}'):
        with pytest.raises(ValueError, match="not a PodMetricsList"):
            pod_usage(broken)
    with pytest.raises(ValueError, match="not a PodMetricsList"):
        parse_pod_metrics({"kind": "Status"})


def test_the_settings_choose_the_fallback_and_a_store_exists_without_pod_metrics(tmp_path: Path) -> None:
    settings = Settings(
        rules_dir=tmp_path, nodes_file=EXAMPLE_NODES, cluster="off", usage_fallback="limits", usage_fallback_factor=0.5
    )
    estimates = build_cluster(settings).estimates
    assert estimates is not None
    assert estimates.feed is None, "nothing to learn from: every pod gets the fallback"
    pod = make_pod("w-1", "shop", {"app": "w"}, {"cpu": "500m"})
    pod["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "3"}
    assert estimates.store.estimate(pod)["cpu"] == 1.5
    assert estimates.poll_seconds() == {}
