"""The MetricSource pollers against a loopback Prometheus replaying a real Prometheus 2.42's answers.

Values reach `metrics.custom` by node name or node address, NaN and infinities are absent, every error
answer (400, 422, 503 JSON and text), a timeout and a server that goes away show in the query's status and
only age that query's values out, and the pollers recover by themselves.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from rulesched.cluster.contexts import NodeContexts
from rulesched.cluster.metrics.custom import CustomValues
from rulesched.cluster.metrics.prometheus import PrometheusPollers, QueryStatus, drop_port
from rulesched.cluster.sources import FileNodeSource
from rulesched.rules.metricsource import MetricSource
from tests.kubeapi import wait_for
from tests.prometheus import PROMETHEUS_FIXTURES, Prometheus

CPU_BY_INSTANCE = '1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[1m]))'
CPU_BY_NODE = 'sum by (node) (rate(container_cpu_usage_seconds_total{id="/"}[1m]))'
NODES = ["node-a", "node-b", "node-c", "node-d", "node-e"]


def make_node(name: str, *addresses: str) -> dict[str, Any]:
    status = {"addresses": [{"type": "InternalIP", "address": a} for a in addresses], "allocatable": {"cpu": "4"}}
    return {"metadata": {"name": name, "resourceVersion": "1"}, "status": status}


def source(url: str, *queries: dict[str, str], **server: Any) -> MetricSource:
    prometheus = {"url": url, "interval": "1h", "timeout": "1s", "maxAge": "1h"} | server
    spec = {"prometheus": prometheus, "queries": list(queries)}
    document = {"apiVersion": "rulesched.io/v1alpha1", "kind": "MetricSource", "metadata": {"name": "prom"}}
    return MetricSource.model_validate(document | {"spec": spec})


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    with Prometheus() as server:
        yield server


@pytest.fixture
def pollers() -> Iterator[PrometheusPollers]:
    pollers = PrometheusPollers(CustomValues())
    yield pollers
    pollers.stop()


def custom_of(pollers: PrometheusPollers, *nodes: dict[str, Any]) -> dict[str, dict[str, float]]:
    contexts = NodeContexts(None, None, None, pollers.values).for_objects(list(nodes))
    return {c.name: c.metrics["custom"] for c in contexts}


def status_of(pollers: PrometheusPollers, query: str) -> QueryStatus:
    return next(s for s in pollers.status() if s.query == query)


@pytest.mark.parametrize(
    ("label", "expected"),
    [("10.0.0.5:9100", "10.0.0.5"), ("node-a:9100", "node-a"), ("[fd00::5]:9100", "fd00::5"), ("node-a", "node-a")],
)
def test_the_instance_label_loses_its_port(label: str, expected: str) -> None:
    assert drop_port(label) == expected


def test_node_exporter_instances_reach_the_rules_by_node_name(
    prometheus: Prometheus, pollers: PrometheusPollers
) -> None:
    prometheus.answer(CPU_BY_INSTANCE, "q01-cpu-busy-by-instance")
    pollers.configure([source(prometheus.url, {"name": "cpu", "query": CPU_BY_INSTANCE, "nodeLabel": "instance"})])
    pollers.poll()
    found = custom_of(pollers, *map(make_node, NODES))
    assert found == {
        "node-a": {"cpu": 0.07745454545454322},
        "node-b": {"cpu": 0.2774545454545474},
        "node-c": {"cpu": 0.47745454545454424},
        "node-d": {"cpu": 0.6774545454545473},
        "node-e": {"cpu": 0.8774545454545474},
    }
    assert status_of(pollers, "cpu").state == "ok"


def test_an_instance_address_matches_the_node_with_that_address(
    prometheus: Prometheus, pollers: PrometheusPollers
) -> None:
    """In real clusters node_exporter's instance is often `<InternalIP>:9100`."""
    prometheus.answer(CPU_BY_INSTANCE, "q01-cpu-busy-by-instance", **{"node-c:9100": "10.0.0.7:9100"})
    pollers.configure([source(prometheus.url, {"name": "cpu", "query": CPU_BY_INSTANCE, "nodeLabel": "instance"})])
    pollers.poll()
    found = custom_of(pollers, make_node("ip-10-0-0-7.internal", "10.0.0.7"), make_node("node-z", "10.0.0.9"))
    assert found == {"ip-10-0-0-7.internal": {"cpu": 0.47745454545454424}, "node-z": {}}


def test_the_node_label_of_cadvisor_and_kube_state_metrics_names_the_node(
    prometheus: Prometheus, pollers: PrometheusPollers
) -> None:
    prometheus.answer(CPU_BY_NODE, "q07-cadvisor-cpu-by-node")
    pollers.configure([source(prometheus.url, {"name": "used", "query": CPU_BY_NODE})])  # nodeLabel: node
    pollers.poll()
    recorded = json.loads((PROMETHEUS_FIXTURES / "q07-cadvisor-cpu-by-node.json").read_text())
    expected = {s["metric"]["node"]: {"used": float(s["value"][1])} for s in recorded["data"]["result"]}
    assert custom_of(pollers, *map(make_node, NODES)) == expected


def test_nan_and_infinite_values_are_absent(prometheus: Prometheus, pollers: PrometheusPollers) -> None:
    prometheus.answer("temp", "q13-nan-from-exporter")  # node-c's temperature is NaN
    prometheus.answer("inf", "q12-nan-inf")  # -Inf, +Inf and NaN only
    queries = [{"name": "temp", "query": "temp", "nodeLabel": "instance"}, {"name": "inf", "query": "inf"}]
    pollers.configure([source(prometheus.url, *queries)])
    pollers.poll()
    found = custom_of(pollers, *map(make_node, NODES))
    assert found == {
        "node-a": {"temp": 42.0},
        "node-b": {"temp": 55.0},
        "node-c": {},
        "node-d": {"temp": 50.0},
        "node-e": {"temp": 61.5},
    }


def test_an_empty_answer_leaves_every_node_without_a_value(prometheus: Prometheus, pollers: PrometheusPollers) -> None:
    prometheus.answer("none", "q11-empty-vector")
    pollers.configure([source(prometheus.url, {"name": "none", "query": "none"})])
    pollers.poll()
    assert custom_of(pollers, make_node("node-a")) == {"node-a": {}}
    assert status_of(pollers, "none").state == "ok"


@pytest.mark.parametrize(
    ("recording", "error"),
    [
        ("q08-scalar", "the query gives a scalar, not an instant vector with one sample per node"),
        ("q09-string", "the query gives a string, not an instant vector with one sample per node"),
        ("q10-matrix-range-selector", "the query gives a matrix, not an instant vector with one sample per node"),
        (
            "e01-bad-syntax-400-post",
            'Prometheus answered HTTP 400: bad_data: invalid parameter "query": 1:22: parse error: unexpected "(" in '
            'grouping opts, expected "," or ")"',
        ),
        (
            "e04-many-to-many-422-post",
            "Prometheus answered HTTP 422: execution: found duplicate series for the match group",
        ),
        ("e03-timeout-503-post", "Prometheus answered HTTP 503: timeout: query timed out in expression evaluation"),
        (
            "z01-starting-query",
            "Prometheus answered HTTP 503 'Service Unavailable' (not JSON: text/plain; charset=utf-8)",
        ),
    ],
)
def test_a_query_that_gives_no_vector_is_a_clear_error_of_that_query_only(
    prometheus: Prometheus, pollers: PrometheusPollers, recording: str, error: str
) -> None:
    prometheus.answer("good", "q04-label-replace-instance-to-node")
    prometheus.answer("bad", recording)
    queries = [{"name": "good", "query": "good"}, {"name": "bad", "query": "bad"}]
    pollers.configure([source(prometheus.url, *queries)])
    pollers.poll()
    bad = status_of(pollers, "bad")
    assert (bad.state, bad.failures, bad.last_error[: len(error)]) == ("failing", 1, error)
    assert status_of(pollers, "good").state == "ok"
    assert custom_of(pollers, make_node("node-a")) == {"node-a": {"good": 0.07745454545454322}}


def test_prometheus_warnings_do_not_fail_the_query(prometheus: Prometheus, pollers: PrometheusPollers) -> None:
    prometheus.answer("load", "w01-warnings-remote-read-down")
    pollers.configure([source(prometheus.url, {"name": "load", "query": "load", "nodeLabel": "instance"})])
    pollers.poll()
    status = status_of(pollers, "load")
    assert status.state == "ok"
    assert status.warnings[0].startswith("remote_read: error sending request")
    assert custom_of(pollers, make_node("node-a")) == {"node-a": {"load": 0.3}}


def test_a_failing_query_keeps_its_values_until_max_age(prometheus: Prometheus, pollers: PrometheusPollers) -> None:
    prometheus.answer("cpu", "q04-label-replace-instance-to-node")
    pollers.configure([source(prometheus.url, {"name": "cpu", "query": "cpu"}, interval="1s", maxAge="1500ms")])
    pollers.poll()
    prometheus.answer("cpu", "e03-timeout-503-post")
    pollers.poll()
    assert status_of(pollers, "cpu").state == "failing"
    assert custom_of(pollers, make_node("node-a")) == {"node-a": {"cpu": 0.07745454545454322}}
    wait_for(lambda: custom_of(pollers, make_node("node-a")) == {"node-a": {}}, what="the value to age out")


def test_an_answer_later_than_the_timeout_is_a_failure(prometheus: Prometheus, pollers: PrometheusPollers) -> None:
    prometheus.answer("slow", "q04-label-replace-instance-to-node")
    prometheus.delay("slow", 2.0)
    pollers.configure([source(prometheus.url, {"name": "slow", "query": "slow"}, timeout="300ms")])
    started = time.monotonic()
    pollers.poll()
    assert time.monotonic() - started < 1.5
    assert status_of(pollers, "slow").last_error.startswith("no answer in time")
    form = prometheus.requests()[0].form
    assert form == {"query": "slow", "timeout": "0.3"}  # Prometheus gives up on its side too


def test_queries_run_concurrently(prometheus: Prometheus, pollers: PrometheusPollers) -> None:
    prometheus.answer("slow", "q04-label-replace-instance-to-node")
    prometheus.answer("fast", "q07-cadvisor-cpu-by-node")
    prometheus.delay("slow", 3.0)
    pollers.configure([source(prometheus.url, {"name": "slow", "query": "slow"}, {"name": "fast", "query": "fast"})])
    pollers.start()
    wait_for(lambda: "fast" in custom_of(pollers, make_node("node-a"))["node-a"], timeout=2.0, what="the fast query")
    assert status_of(pollers, "slow").state == "starting"


def test_a_prometheus_that_goes_away_and_returns_is_survived(
    prometheus: Prometheus, pollers: PrometheusPollers, caplog: pytest.LogCaptureFixture
) -> None:
    prometheus.answer(CPU_BY_INSTANCE, "q01-cpu-busy-by-instance")
    query = {"name": "cpu", "query": CPU_BY_INSTANCE, "nodeLabel": "instance"}
    pollers.configure([source(prometheus.url, query, interval="100ms", timeout="100ms", maxAge="1h")])
    pollers.start()
    wait_for(lambda: status_of(pollers, "cpu").state == "ok", what="the first answer")
    prometheus.go_down()
    wait_for(lambda: status_of(pollers, "cpu").state == "failing", what="the outage")
    failures = status_of(pollers, "cpu").failures
    wait_for(lambda: status_of(pollers, "cpu").failures >= failures + 2, what="retries")
    assert status_of(pollers, "cpu").last_error.startswith("cannot connect")
    prometheus.come_back()
    wait_for(lambda: status_of(pollers, "cpu").state == "ok", what="the recovery")
    assert custom_of(pollers, make_node("node-a")) == {"node-a": {"cpu": 0.07745454545454322}}
    changes = [r.getMessage() for r in caplog.records if r.name == "rulesched.cluster.metrics.prometheus"]
    shown = [m.replace(f" ({prometheus.url})", "").split(" (")[0] for m in changes]
    assert [m for m in shown if "failing" in m or "recovered" in m] == [
        "Prometheus query prom/cpu failing",
        "Prometheus query prom/cpu recovered: values for 5 nodes",
    ]


def test_credentials_and_headers_are_sent(prometheus: Prometheus, pollers: PrometheusPollers, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    prometheus.answer("q", "q11-empty-vector")
    server = {"bearerTokenFile": str(token), "headers": {"X-Scope-OrgID": "team-a"}}
    pollers.configure([source(prometheus.url, {"name": "q", "query": "q"}, **server)])
    pollers.poll()
    token.write_text("rotated")  # a projected token is replaced in place: read on every poll
    pollers.poll()
    sent = [(r.method, r.path, r.headers["authorization"], r.headers["x-scope-orgid"]) for r in prometheus.requests()]
    assert sent == [
        ("POST", "/api/v1/query", "Bearer s3cret", "team-a"),
        ("POST", "/api/v1/query", "Bearer rotated", "team-a"),
    ]


def test_a_missing_token_file_is_a_query_error(prometheus: Prometheus, pollers: PrometheusPollers) -> None:
    pollers.configure([source(prometheus.url, {"name": "q", "query": "q"}, bearerTokenFile="/nonexistent/token")])
    pollers.poll()
    assert status_of(pollers, "q").last_error == "FileNotFoundError: No such file or directory"


def test_a_poll_rebuilds_only_the_contexts_of_the_nodes_it_changed(
    prometheus: Prometheus, pollers: PrometheusPollers, tmp_path: Path
) -> None:
    """Names mode: an unchanged node keeps its context (and the rule results memoized on it)."""
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"items": [make_node(n) for n in NODES]}))
    contexts = NodeContexts(FileNodeSource(nodes), None, None, pollers.values)
    prometheus.answer("cpu", "q04-label-replace-instance-to-node")
    pollers.configure([source(prometheus.url, {"name": "cpu", "query": "cpu"})])
    pollers.poll()
    before, _ = contexts.for_names(NODES)
    prometheus.answer("cpu", "q04-label-replace-instance-to-node", **{"0.2774545454545474": "0.5"})
    pollers.poll()
    after, _ = contexts.for_names(NODES)
    assert [a is b for a, b in zip(before, after, strict=True)] == [True, False, True, True, True]
    assert after[1].metrics["custom"] == {"cpu": 0.5}
    assert (after[1].node, after[1].allocatable) == (before[1].node, before[1].allocatable)


def test_a_metric_source_change_replaces_only_the_changed_queries(
    prometheus: Prometheus, pollers: PrometheusPollers
) -> None:
    prometheus.answer("a", "q04-label-replace-instance-to-node")
    prometheus.answer("b", "q07-cadvisor-cpu-by-node")
    pollers.configure([source(prometheus.url, {"name": "a", "query": "a"}, {"name": "b", "query": "b"})])
    pollers.poll()
    kept = next(p for p in pollers.pollers() if p.query.name == "a")
    pollers.configure([source(prometheus.url, {"name": "a", "query": "a"})])
    assert pollers.pollers() == [kept]
    assert custom_of(pollers, make_node("node-a")) == {"node-a": {"a": 0.07745454545454322}}


def test_sample_age_is_reported_per_value(prometheus: Prometheus, pollers: PrometheusPollers) -> None:
    prometheus.answer("cpu", "q04-label-replace-instance-to-node")
    pollers.configure([source(prometheus.url, {"name": "cpu", "query": "cpu"})])
    pollers.poll()
    contexts = NodeContexts(None, None, None, pollers.values)
    (context,) = contexts.for_objects([make_node("node-a")])
    ages = contexts.custom_ages(context)
    assert list(ages) == ["cpu"]
    assert ages["cpu"] is not None
    assert 0 <= ages["cpu"] < 5


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="rulesched.cluster.metrics.prometheus")


def test_tls_with_a_ca_and_a_client_certificate(pollers: PrometheusPollers, tmp_path: Path) -> None:
    """caFile verifies Prometheus; certFile/keyFile answer a Prometheus that requires client certificates."""
    ca = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    ca.configure_trust(tls)
    tls.verify_mode = ssl.CERT_REQUIRED
    client = ca.issue_cert("rulesched")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    client.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    client.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    files = {
        "caFile": str(tmp_path / "ca.crt"),
        "certFile": str(tmp_path / "tls.crt"),
        "keyFile": str(tmp_path / "tls.key"),
    }
    with Prometheus(tls) as prometheus:
        prometheus.answer("cpu", "q04-label-replace-instance-to-node")
        pollers.configure([source(prometheus.url, {"name": "cpu", "query": "cpu"}, **files)])
        pollers.poll()
        assert custom_of(pollers, make_node("node-a")) == {"node-a": {"cpu": 0.07745454545454322}}
        without = {"caFile": files["caFile"]}
        pollers.configure([source(prometheus.url, {"name": "cpu", "query": "cpu"}, **without)])
        pollers.poll()
        assert status_of(pollers, "cpu").state == "failing"


def test_the_node_uname_info_join_names_nodes_by_nodename(prometheus: Prometheus, pollers: PrometheusPollers) -> None:
    prometheus.answer("memory", "q05-mem-available-ratio-join-nodename")
    pollers.configure([source(prometheus.url, {"name": "memory", "query": "memory", "nodeLabel": "nodename"})])
    pollers.poll()
    found = custom_of(pollers, *map(make_node, NODES))
    assert sorted(found) == NODES
    assert all(0 < values["memory"] < 1 for values in found.values())


def test_a_node_missing_from_the_next_answer_has_no_value_at_once(
    prometheus: Prometheus, pollers: PrometheusPollers
) -> None:
    """Prometheus drops a series that left the scrape (a staleness marker): its node loses its value at the
    next poll, not after maxAge."""
    prometheus.answer("load", "v01-stale-instant-vector-gone", **{"node-e:9100": "node-f:9100"})
    pollers.configure([source(prometheus.url, {"name": "load", "query": "load", "nodeLabel": "instance"})])
    pollers.poll()
    assert "load" in custom_of(pollers, make_node("node-f"))["node-f"]
    prometheus.answer("load", "v01-stale-instant-vector-gone")  # node-f's series is gone
    pollers.poll()
    assert custom_of(pollers, make_node("node-f")) == {"node-f": {}}
    assert "load" in custom_of(pollers, make_node("node-e"))["node-e"]


def test_a_node_label_no_series_has_is_an_error_not_an_empty_answer(
    prometheus: Prometheus, pollers: PrometheusPollers
) -> None:
    prometheus.answer(CPU_BY_INSTANCE, "q01-cpu-busy-by-instance")
    pollers.configure([source(prometheus.url, {"name": "cpu", "query": CPU_BY_INSTANCE})])  # nodeLabel: node
    pollers.poll()
    status = status_of(pollers, "cpu")
    assert (status.state, status.last_error) == (
        "failing",
        "no series has the label 'node' (nodeLabel); their labels: instance",
    )
