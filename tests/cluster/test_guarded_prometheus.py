"""A running rulesched whose rules read a custom metric only behind guards, against the loopback Prometheus.

The shipped `rules/cpu-window.yaml` (its MetricSource pointed at the loopback Prometheus) and a rule set
guarding the way careful authors do (`has(metrics.custom)`, optional selection, `'cpu5m' in …` inside
`cel.bind`) decide on five nodes, one of which Prometheus has no value for: that node is neither
rejected nor scored by an evaluation error, on either engine, and the others are decided by their values.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rulesched.rules.cel import ENGINE_NAMES
from rulesched.settings import Settings
from tests.kubeapi import wait_for
from tests.paths import RULES
from tests.prometheus import Prometheus
from tests.server import running_server

SHIPPED = RULES / "cpu-window.yaml"
QUERY = '1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[5m]))'
NODES = ["node-a", "node-b", "node-c", "node-d", "node-e"]
POD = {
    "metadata": {"name": "web-1", "namespace": "default", "labels": {"workload.xy.com/class": "latency"}},
    "spec": {"containers": [{"name": "web"}]},
}
SLOW = 20.0
"""Seconds the first poll may take to show: generous, since the suite shares two cores."""

GUARDED = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata: {name: guarded}
spec:
  filters:
  - name: issue-23
    expression: "!has(metrics.custom) || !has(metrics.custom.cpu5m) || metrics.custom.cpu5m < 0.6"
  - name: optional
    expression: "metrics.?custom.?cpu5m.orValue(0.0) < 0.6"
  - name: bound
    expression: "cel.bind(c, metrics.custom, !('cpu5m' in c) || c['cpu5m'] < 0.6)"
  scores:
  - name: idle
    expression: "10.0 * (1.0 - metrics.custom[?'cpu5m'].orValue(1.0))"
    normalize: Clamp
"""
"""Guards in three forms, each failing a node above 0.6 and passing a node without a value (failurePolicy Fail)."""


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    with Prometheus() as server:
        # node-e's series is renamed to a node that is not a candidate: Prometheus has no value for node-e.
        server.answer(QUERY, "q01-cpu-busy-by-instance", **{"node-e:9100": "node-z:9100"})
        yield server


@pytest.fixture(params=ENGINE_NAMES)
def client(request: pytest.FixtureRequest, tmp_path: Path, prometheus: Prometheus) -> Iterator[httpx.Client]:
    rules = tmp_path / "rules"
    rules.mkdir()
    shipped = SHIPPED.read_text().replace("http://prometheus-k8s.monitoring.svc:9090", prometheus.url)
    (rules / "cpu-window.yaml").write_text(shipped)
    (rules / "guarded.yaml").write_text(GUARDED)
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"items": [{"metadata": {"name": n}} for n in NODES]}))
    settings = Settings(
        rules_dir=rules,
        nodes_file=nodes,
        cluster="off",
        prometheus="on",
        enable_explain=True,
        cel_engine=request.param,
    )
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def passing(client: httpx.Client) -> list[str]:
    names: list[str] = client.post("/filter", json={"Pod": POD, "NodeNames": NODES}).json()["NodeNames"]
    return names


def test_a_node_without_a_value_passes_the_guards_and_scores_lowest(client: httpx.Client) -> None:
    wait_for(lambda: passing(client) == ["node-a", "node-b", "node-c", "node-e"], timeout=SLOW, what="the first poll")
    scores = client.post("/prioritize", json={"Pod": POD, "NodeNames": NODES}).json()
    assert scores == [
        {"Host": "node-a", "Score": 9},
        {"Host": "node-b", "Score": 7},
        {"Host": "node-c", "Score": 5},
        {"Host": "node-d", "Score": 3},
        {"Host": "node-e", "Score": 0},
    ]
    report = client.post("/explain", json={"Pod": POD, "NodeNames": NODES}).json()
    assert report["appliedRuleSets"] == ["cpu-window", "guarded"]
    assert report["nodeContext"]["node-e"]["custom"] == {}
    verdicts = {node["name"]: node for node in report["nodes"]}
    errors = [rule["error"] for node in verdicts.values() for rule in node["filters"] + node["scores"]]
    assert errors == [None] * 28  # 4 filters on 5 nodes, 2 scores on the 4 that pass
    failed = [f["rule"] for f in verdicts["node-d"]["filters"] if f["outcome"] == "fail"]
    assert failed == ["issue-23", "optional", "bound"]
