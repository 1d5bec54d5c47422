"""A running rulesched with a MetricSource against the loopback Prometheus: the values reach the rules'
decisions and explain, each query shows in /rules and /metrics, a bad query breaks nothing else, and a
MetricSource change is hot-reloaded like a rule change (a rejected one keeps the running queries)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rulesched.settings import Settings
from tests.kubeapi import wait_for
from tests.prometheus import Prometheus
from tests.server import running_server

CPU = '1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[1m]))'
NODES = ["node-a", "node-b", "node-c", "node-d", "node-e"]
POD = {"metadata": {"name": "web-1", "namespace": "default"}, "spec": {"containers": [{"name": "web"}]}}


SLOW = 20.0
"""Seconds a change may take to show: generous, since the suite shares two cores with everything else."""


def metric_source(url: str, query: str, name: str = "cpu") -> str:
    return json.dumps(
        {
            "apiVersion": "rulesched.io/v1alpha1",
            "kind": "MetricSource",
            "metadata": {"name": "prometheus"},
            "spec": {
                "prometheus": {"url": url, "interval": "500ms", "timeout": "500ms", "maxAge": "1m"},
                "queries": [{"name": name, "query": query, "nodeLabel": "instance"}],
            },
        }
    )


RULES = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata: {name: windowed}
spec:
  filters:
  - name: not-busy
    expression: "!has(metrics.custom.cpu) || metrics.custom.cpu < 0.5"
    message: CPU busy over the window
  scores:
  - name: idle
    expression: "has(metrics.custom.cpu) ? 1.0 - metrics.custom.cpu : 0.0"
"""


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    with Prometheus() as server:
        server.answer(CPU, "q01-cpu-busy-by-instance")
        server.answer("broken", "e01-bad-syntax-400-post")
        yield server


@pytest.fixture
def rules(tmp_path: Path, prometheus: Prometheus) -> Path:
    directory = tmp_path / "rules"
    directory.mkdir()
    (directory / "source.yaml").write_text(metric_source(prometheus.url, CPU))
    (directory / "rules.yaml").write_text(RULES)
    nodes = {"items": [{"metadata": {"name": n, "resourceVersion": "1"}} for n in NODES]}
    (tmp_path / "nodes.json").write_text(json.dumps(nodes))
    return directory


@pytest.fixture
def client(rules: Path) -> Iterator[httpx.Client]:
    settings = Settings(
        rules_dir=rules,
        nodes_file=rules.parent / "nodes.json",
        cluster="off",
        prometheus="on",
        enable_explain=True,
        reload_debounce=0.05,
    )
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client


def queries(client: httpx.Client) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.get("/rules").json()["sources"]["customMetrics"]["queries"]
    return found


def passing(client: httpx.Client) -> list[str]:
    answer = client.post("/filter", json={"Pod": POD, "NodeNames": NODES}).json()
    names: list[str] = answer["NodeNames"]
    return names


def test_values_from_prometheus_decide_filter_and_prioritize(client: httpx.Client) -> None:
    wait_for(lambda: passing(client) == ["node-a", "node-b", "node-c"], timeout=SLOW, what="the first answer")
    scores = client.post("/prioritize", json={"Pod": POD, "NodeNames": ["node-a", "node-b", "node-c"]}).json()
    assert scores == [{"Host": "node-a", "Score": 10}, {"Host": "node-b", "Score": 5}, {"Host": "node-c", "Score": 0}]


def test_explain_shows_each_custom_value_and_its_age(client: httpx.Client) -> None:
    wait_for(lambda: passing(client) == ["node-a", "node-b", "node-c"], timeout=SLOW, what="the first answer")
    report = client.post("/explain", json={"Pod": POD, "NodeNames": ["node-a"]}).json()
    custom = report["nodeContext"]["node-a"]["custom"]
    assert list(custom) == ["cpu"]
    assert custom["cpu"]["value"] == 0.07745454545454322
    assert 0 <= custom["cpu"]["age"] < 30


def test_rules_and_metrics_show_each_query(client: httpx.Client, prometheus: Prometheus) -> None:
    wait_for(lambda: queries(client)[0]["state"] == "ok", timeout=SLOW, what="the first answer")
    (query,) = queries(client)
    assert {k: query[k] for k in ("source", "query", "url", "state", "nodes", "lastError")} == {
        "source": "prometheus",
        "query": "cpu",
        "url": prometheus.url,
        "state": "ok",
        "nodes": 5,
        "lastError": "",
    }
    assert query["lastSuccess"] is not None
    exposition = client.get("/metrics").text
    assert 'rulesched_prometheus_query_failing{query="cpu",source="prometheus"} 0.0' in exposition
    assert 'rulesched_prometheus_query_nodes{query="cpu",source="prometheus"} 5.0' in exposition
    assert 'rulesched_prometheus_queries_total{query="cpu",result="ok",source="prometheus"}' in exposition


def test_a_metric_source_change_is_hot_reloaded(client: httpx.Client, rules: Path, prometheus: Prometheus) -> None:
    wait_for(lambda: queries(client)[0]["state"] == "ok", timeout=SLOW, what="the first answer")
    (rules / "source.yaml").write_text(metric_source(prometheus.url, "broken"))
    wait_for(lambda: queries(client)[0]["state"] == "failing", timeout=SLOW, what="the new query")
    (query,) = queries(client)
    assert query["lastError"].startswith('Prometheus answered HTTP 400: bad_data: invalid parameter "query"')
    assert client.get("/healthz").status_code == 200
    wait_for(
        lambda: 'failing{query="cpu",source="prometheus"} 1.0' in client.get("/metrics").text,
        timeout=SLOW,
        what="metric",
    )


def test_a_rejected_metric_source_change_keeps_the_running_queries(
    client: httpx.Client, rules: Path, prometheus: Prometheus
) -> None:
    wait_for(lambda: queries(client)[0]["state"] == "ok", timeout=SLOW, what="the first answer")
    (rules / "source.yaml").write_text(metric_source("not a url", CPU))
    wait_for(lambda: client.get("/rules").json()["lastRejected"] is not None, timeout=SLOW, what="the rejected change")
    assert [q["url"] for q in queries(client)] == [prometheus.url]
    assert passing(client) == ["node-a", "node-b", "node-c"]


def test_the_offline_run_does_not_poll(rules: Path, prometheus: Prometheus) -> None:
    settings = Settings(rules_dir=rules, nodes_file=rules.parent / "nodes.json", cluster="off")
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert client.get("/rules").json()["sources"]["customMetrics"] == {"from": "none", "values": 0, "queries": []}
        assert passing(client) == NODES
    assert prometheus.requests() == []


def test_a_new_value_changes_the_next_decision(client: httpx.Client, prometheus: Prometheus) -> None:
    """The rule results memoized on a node's context do not outlive its custom values."""
    wait_for(lambda: passing(client) == ["node-a", "node-b", "node-c"], timeout=SLOW, what="the first answer")
    prometheus.answer(CPU, "q01-cpu-busy-by-instance", **{"0.07745454545454322": "0.95"})
    wait_for(lambda: passing(client) == ["node-b", "node-c"], timeout=SLOW, what="node-a busy")
    prometheus.answer(CPU, "q01-cpu-busy-by-instance")
    wait_for(lambda: passing(client) == ["node-a", "node-b", "node-c"], timeout=SLOW, what="node-a idle again")
