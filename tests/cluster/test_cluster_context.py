"""The four cluster-context names over HTTP, offline: `--pods` and `--namespaces` files, the shipped rules.

`pods` (batch-spread), `namespaceObject` (team-pools), preemption that evaluates each node without its
victims, explain showing what each node's pods add up to, and the sources' state in /readyz, /rules and
/metrics.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rulesched.cluster import build_cluster
from rulesched.settings import Settings
from tests.builders import make_node, make_pod
from tests.paths import EXAMPLE_METRICS, EXAMPLE_NODES, EXAMPLES, RULES
from tests.server import running_server

EXAMPLE_PODS = EXAMPLES / "cluster" / "pods.yaml"
EXAMPLE_NAMESPACES = EXAMPLES / "cluster" / "namespaces.yaml"
NODES = ["k8s-master", "k8s-node1", "k8s-node2", "gpu-node1"]


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    settings = Settings(
        rules_dir=RULES,
        nodes_file=EXAMPLE_NODES,
        metrics_file=EXAMPLE_METRICS,
        pods_file=EXAMPLE_PODS,
        namespaces_file=EXAMPLE_NAMESPACES,
        cluster="off",
        enable_explain=True,
    )
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def batch_pod(name: str = "etl-3") -> dict[str, Any]:
    pod = make_pod(name=name, labels={"app": "etl", "workload.xy.com/class": "batch"}, requests={"cpu": "500m"})
    pod["metadata"]["uid"] = f"uid-{name}"
    return pod


def uid_of(name: str) -> str:
    items = yaml.safe_load(EXAMPLE_PODS.read_text())["items"]
    return str(next(p["metadata"]["uid"] for p in items if p["metadata"]["name"] == name))


def test_a_rule_over_pods_rejects_the_full_node(client: httpx.Client) -> None:
    answer = client.post("/filter", json={"Pod": batch_pod(), "NodeNames": NODES}).json()
    assert answer["NodeNames"] == ["k8s-node2"]  # the others: founding label, gpu reserve
    assert answer["FailedNodes"]["k8s-node1"] == (
        "node already runs 2 batch pods (rule batch-spread/at-most-two-batch-pods)"
    )


def test_a_rule_over_the_namespace_keeps_the_team_in_its_pool(client: httpx.Client) -> None:
    pod = make_pod(name="train-1", namespace="ml-team", requests={"cpu": "1", "nvidia.com/gpu": "1"})
    answer = client.post("/filter", json={"Pod": pod, "NodeNames": NODES}).json()
    assert answer["NodeNames"] == ["gpu-node1"]
    assert answer["FailedAndUnresolvableNodes"]["k8s-node2"] == (
        "not in node pool gpu (namespace ml-team) (rule team-pools/nodes-of-the-team-pool)"
    )
    other = make_pod(name="train-1", namespace="web-team", requests={"cpu": "1", "nvidia.com/gpu": "1"})
    assert client.post("/filter", json={"Pod": other, "NodeNames": NODES}).json()["NodeNames"] == [
        "k8s-node1",
        "k8s-node2",
        "gpu-node1",
    ]


def test_preempt_evaluates_each_node_without_its_victims(client: httpx.Client) -> None:
    victims = {
        "k8s-node1": {"Pods": [{"UID": uid_of("etl-0")}], "NumPDBViolations": 0},  # one batch pod gone: room
        "k8s-node2": {"Pods": [], "NumPDBViolations": 0},
    }
    body = {"Pod": batch_pod(), "NodeNameToVictims": None, "NodeNameToMetaVictims": victims}
    assert client.post("/preempt", json=body).json() == {"NodeNameToMetaVictims": victims}
    web = {"k8s-node1": {"Pods": [{"UID": uid_of("web-0")}], "NumPDBViolations": 0}}  # not on k8s-node1
    body = {"Pod": batch_pod(), "NodeNameToVictims": None, "NodeNameToMetaVictims": web}
    assert client.post("/preempt", json=body).json() == {"NodeNameToMetaVictims": {}}


def test_explain_shows_the_pods_allocated_recent_and_namespace(client: httpx.Client) -> None:
    pod = make_pod(name="train-1", namespace="ml-team", requests={"cpu": "1"})
    report = client.post("/explain", json={"Pod": pod, "NodeNames": NODES}).json()
    assert report["namespaceObject"]["metadata"]["labels"]["pool.xy.com/target"] == "gpu"
    node2 = report["nodeContext"]["k8s-node2"]
    assert node2["pods"] == ["default/etl-2", "default/web-0"]  # report-0 Succeeded: not counted
    assert node2["allocated"]["cpu"] == pytest.approx(0.75)
    assert node2["allocated"]["pods"] == 2
    assert node2["recent"] == {"count": 0, "requests": {"cpu": 0, "memory": 0}, "estimates": {"cpu": 0, "memory": 0}}


def test_offline_placements_are_not_counted(client: httpx.Client) -> None:
    """A file is a fixed snapshot: the same request gets the same answer, whatever was asked before."""
    pod = make_pod(name="web-9", labels={"app": "web"}, requests={"cpu": "1"})
    first = client.post("/prioritize", json={"Pod": pod, "NodeNames": NODES}).json()
    other = make_pod(name="web-10", labels={"app": "web"}, requests={"cpu": "1"})
    client.post("/prioritize", json={"Pod": other, "NodeNames": NODES})
    assert client.post("/prioritize", json={"Pod": pod, "NodeNames": NODES}).json() == first


def test_sources_state_in_readyz_rules_and_metrics(client: httpx.Client) -> None:
    checks = client.get("/readyz").json()["checks"]
    assert (checks["podCache"], checks["namespaceCache"]) == (True, True)
    sources = client.get("/rules").json()["sources"]
    assert sources["pods"]["objects"] == 5
    assert sources["pods"]["pendingPlacements"] == 0
    assert sources["namespaces"] == {"ready": True, "objects": 4}
    exposition = client.get("/metrics").text
    assert 'rulesched_source_objects{source="pods"} 5.0' in exposition
    assert 'rulesched_source_objects{source="namespaces"} 4.0' in exposition
    assert 'rulesched_source_failing{source="pods"} 0.0' in exposition


FIT_RULES = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: fit
spec:
  filters:
  - name: requests-fit
    expression: allocated.cpu + requests.cpu <= allocatable.cpu
    message: no room for the requests
    resolvableByPreemption: true
  - name: burst-estimate-fits
    expression: recent.requests.cpu + requests.cpu <= 3.0
    message: too much placed since the sample
    resolvableByPreemption: true
"""


def placed_pod(name: str, seconds_ago: float) -> dict[str, Any]:
    pod = make_pod(name=name, requests={"cpu": "1500m"})
    stamp = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    pod["spec"]["nodeName"] = "node-a"
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": f"{stamp:%Y-%m-%dT%H:%M:%SZ}"}],
    }
    return pod


def test_preempt_takes_the_victims_out_of_allocated_and_recent(tmp_path: Path) -> None:
    # node-a (4 CPU) runs `old` (placed 10 min ago) and `new` (placed just now, so in `recent`: the
    # sample file has no time, so `recent` is the last --recent-seconds), 1.5 CPU each. A pod asking 2 CPU
    # fits once either is evicted (allocated 1.5 + 2 <= 4), but the burst estimate (recent + 2 <= 3)
    # only once `new` is: the victims leave `allocated` and `recent` alike.
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "fit.yaml").write_text(FIT_RULES)
    node = make_node("node-a", allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"})
    (tmp_path / "nodes.json").write_text(json.dumps({"items": [node]}))
    pods = [placed_pod("old", 600), placed_pod("new", 2)]
    (tmp_path / "pods.json").write_text(json.dumps({"items": pods}))
    settings = Settings(
        rules_dir=tmp_path / "rules",
        nodes_file=tmp_path / "nodes.json",
        pods_file=tmp_path / "pods.json",
        cluster="off",
    )
    pod = make_pod(name="big", requests={"cpu": "2"})

    old, new = (p["metadata"]["uid"] for p in pods)
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as server:

        def kept(*victims: str) -> bool:
            chosen = {"node-a": {"Pods": [{"UID": uid} for uid in victims], "NumPDBViolations": 0}}
            body = {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": chosen}
            return "node-a" in server.post("/preempt", json=body).json()["NodeNameToMetaVictims"]

        rejected = server.post("/filter", json={"Pod": pod, "NodeNames": ["node-a"]}).json()["FailedNodes"]
        assert rejected == {"node-a": "no room for the requests (rule fit/requests-fit)"}
        assert not kept()
        assert not kept(old), "`new` still counts in recent"
        assert kept(new)
        assert kept(old, new)


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_pod_and_namespace_files_are_json_or_yaml(tmp_path: Path, suffix: str) -> None:
    dump = json.dumps if suffix == "json" else yaml.safe_dump
    for name, example in (("pods", EXAMPLE_PODS), ("namespaces", EXAMPLE_NAMESPACES)):
        (tmp_path / f"{name}.{suffix}").write_text(dump(yaml.safe_load(example.read_text())))
    settings = Settings(
        rules_dir=RULES,
        pods_file=tmp_path / f"pods.{suffix}",
        namespaces_file=tmp_path / f"namespaces.{suffix}",
        cluster="off",
    )
    cluster = build_cluster(settings)
    assert cluster.pods is not None
    assert cluster.namespaces is not None
    assert (cluster.pods.size(), cluster.namespaces.size()) == (5, 4)
    assert [p["metadata"]["name"] for p in cluster.pods.node_pods("k8s-node1", None).pods] == ["etl-0", "etl-1"]
    assert (cluster.namespaces.get("ml-team") or {})["metadata"]["labels"]["pool.xy.com/target"] == "gpu"
