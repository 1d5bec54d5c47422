"""deploy/components/monitoring: the Grafana dashboard, the PrometheusRule and the ServiceMonitor.

Every PromQL expression parses (promql-parser) and names only metrics and labels that a running rulesched
exports: a real server is started with rules that reject, fail and run into the deadline, a MetricSource
against the loopback Prometheus, shadow rules and a recording, is called, and its /metrics is read. The
overlay renders with kustomize; its Kubernetes objects validate against the Kubernetes schemas and the
Prometheus Operator's objects against the schema of their fields kept in tests/crds/.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]
import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from rulesched.settings import Settings
from rulesched.tools.dashboard import dashboard, queries, render
from tests.builders import write_rules
from tests.deschedule_setup import controlled
from tests.deschedule_setup import rules as deschedule_rules
from tests.kubeapi import KubeAPI, wait_for
from tests.paths import EXAMPLE_NODES, EXAMPLES, REPO
from tests.prometheus import Prometheus
from tests.rules.test_bounds import NESTED_300
from tests.rules.test_reload import BROKEN, metric, reject
from tests.server import running_server
from tests.test_deploy import KUBERNETES_VERSION, kubectl
from tests.test_deploy import render as render_variant
from tests.test_docs import anchors

MONITORING = REPO / "deploy" / "components" / "monitoring"
OVERLAY = REPO / "deploy" / "overlays" / "monitoring"
OBSERVABILITY = REPO / "docs" / "operations" / "observability.md"
CRD_SCHEMAS = REPO / "tests" / "crds" / "monitoring.coreos.com-v1.yaml"
CPU = '1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[1m]))'
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "endpoint", "container"}
"""What Prometheus (with a ServiceMonitor) adds to every series it scrapes."""
PROMETHEUS_OWN = {"up": {"job", "instance", *TARGET_LABELS}}
"""Series Prometheus itself writes for every target."""
GRAFANA = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m"}


# --- the queries --------------------------------------------------------------------------------


def prometheus_rules() -> list[dict[str, Any]]:
    rule: dict[str, Any] = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def label_values_metric(definition: str) -> str:
    """The metric of a Grafana `label_values(metric, label)` variable."""
    match = re.fullmatch(r"label_values\((\w+), (\w+)\)", definition)
    assert match, definition
    return match[1]


def expressions() -> list[str]:
    variables = [v for v in dashboard()["templating"]["list"] if v["type"] == "query"]
    return [
        *queries(),
        *(label_values_metric(v["definition"]) for v in variables),
        *(r["expr"] for r in prometheus_rules()),
    ]


def grafana_free(expression: str) -> str:
    for variable, value in GRAFANA.items():
        expression = expression.replace(variable, value)
    return expression


def reads(expression: str) -> tuple[dict[str, set[str]], set[str]]:
    """(metric → the labels its selectors match on, every label grouped or matched on) of an expression."""
    selectors: dict[str, set[str]] = {}
    grouped: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            names = {m.name for m in node.matchers.matchers}
            selectors.setdefault(node.name or "", set()).update(names)
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouped.update(node.modifier.labels)
        elif isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
            if node.modifier.matching is not None:
                grouped.update(node.modifier.matching.labels)
            grouped.update(node.modifier.group_labels or ())

    promql_parser.walk(promql_parser.parse(grafana_free(expression)), pre_visit=visit)
    return selectors, grouped


def unknown_reads(expression: str, exported: dict[str, set[str]]) -> list[str]:
    """What `expression` reads that the exported series (name → label names) lack."""
    known = exported | PROMETHEUS_OWN
    selectors, grouped = reads(expression)
    problems = [f"metric {name}" for name in selectors if name not in known]
    for name, labels in selectors.items():
        problems += [f"label {name}{{{label}}}" for label in labels - known.get(name, set()) - TARGET_LABELS]
    available = set().union(*(known.get(name, set()) for name in selectors)) | TARGET_LABELS
    problems += [f"grouping label {label}" for label in grouped - available]
    return problems


@pytest.mark.parametrize("expression", expressions())
def test_every_expression_parses(expression: str) -> None:
    promql_parser.parse(grafana_free(expression))


def test_a_broken_expression_does_not_parse() -> None:
    with pytest.raises(ValueError, match=r".+"):
        promql_parser.parse("sum by (verb (rate(rulesched_requests_total[5m]))")


# A rules directory that makes every series of the dashboard: a filter that rejects, an Audit filter, a
# rule that fails on some nodes, and (for one pod only) a rule too slow for the request deadline.
RULES = f"""\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata: {{name: observed}}
spec:
  filters:
  - name: labelled
    expression: "'filter.xy.com' in node.metadata.labels"
  - name: audited
    expression: "node.metadata.name.startsWith('k8s-node')"
    mode: Audit
  - name: fails
    expression: "node.metadata.labels['filter.xy.com'] != ''"
    failurePolicy: Ignore
  scores:
  - name: custom
    expression: "has(metrics.custom.cpu) ? metrics.custom.cpu : 0.0"
---
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata: {{name: slow}}
spec:
  matchConditions:
  - name: slow-pod
    expression: "pod.metadata.name == 'slow'"
  filters:
  - name: nested
    expression: "pod.metadata.name == 'slow' && {NESTED_300}"
    failurePolicy: Ignore
---
apiVersion: rulesched.io/v1alpha1
kind: MetricSource
metadata: {{name: prometheus}}
spec:
  prometheus: {{url: "URL", interval: 500ms, timeout: 500ms, maxAge: 1m}}
  queries:
  - {{name: cpu, query: '{CPU}', nodeLabel: instance}}
"""
POD = json.loads((EXAMPLES / "pod.json").read_text())
NAMES = ["k8s-master", "k8s-node1", "k8s-node2", "gpu-node1"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Every series name a running rulesched exported after some calls, with its label names."""
    directory = tmp_path_factory.mktemp("monitoring")
    rules = directory / "rules"
    rules.mkdir()
    with Prometheus() as prometheus:
        prometheus.answer(CPU, "q01-cpu-busy-by-instance")
        (rules / "rules.yaml").write_text(RULES.replace("URL", prometheus.url))
        settings = Settings(
            rules_dir=rules,
            shadow_rules_dir=rules,
            record_dir=directory / "recording",
            nodes_file=EXAMPLES / "cluster" / "nodes.yaml",
            metrics_file=EXAMPLES / "cluster" / "metrics.yaml",
            pods_file=EXAMPLES / "cluster" / "pods.yaml",
            namespaces_file=EXAMPLES / "cluster" / "namespaces.yaml",
            cluster="off",
            prometheus="on",
            cel_engine="celpy",  # cel-cpp's iteration limit would end the slow rule before the deadline
            request_deadline=0.5,
        )
        with running_server(settings) as url, httpx.Client(base_url=url, timeout=30) as client:
            slow = {**POD, "metadata": {**POD["metadata"], "name": "slow"}}
            for pod in (POD, slow):
                for verb in ("filter", "prioritize"):
                    assert client.post(f"/{verb}", json={"Pod": pod, "NodeNames": NAMES}).status_code == 200
            wait_for(lambda: "rulesched_shadow_filter_rejections_total{" in client.get("/metrics").text, what="shadow")
            wait_for(lambda: "rulesched_recording_calls_total{" in client.get("/metrics").text, what="a call recorded")
            wait_for(lambda: 'result="ok",source="prometheus"} 0' not in client.get("/metrics").text, what="a poll")
            text = client.get("/metrics").text
    found: dict[str, set[str]] = {}
    for scrape in (text, _cluster_scrape(directory)):
        for family in text_string_to_metric_families(scrape):
            for sample in family.samples:
                found.setdefault(sample.name, set()).update(sample.labels)
    return found


def _cluster_scrape(directory: Path) -> str:
    """/metrics of a server on the loopback API with --requeue and --deschedule dry-run, once the audit
    found a pod to evict (the requeue, audit, eviction and usage series exist only with a cluster)."""
    rules = directory / "cluster-rules"
    write_rules(rules, deschedule_rules())
    api = KubeAPI()
    try:
        controlled(api, "fx-alpha", "web-1")
        settings = Settings(
            rules_dir=rules,
            kubeconfig=api.kubeconfig(directory / "kubeconfig"),
            cluster="on",
            requeue=True,
            deschedule="dry-run",
            audit_interval=0.05,
            metrics_interval=0.2,
        )
        with running_server(settings) as url, httpx.Client(base_url=url, timeout=30) as client:
            seen = lambda: 'rulesched_evictions_total{outcome="dry-run"' in client.get("/metrics").text  # noqa: E731
            wait_for(seen, timeout=15, what="a dry-run eviction counted")
            return client.get("/metrics").text
    finally:
        api.close()


def test_the_test_server_exports_what_the_alerts_need(exported: dict[str, set[str]]) -> None:
    assert exported["rulesched_deadline_exceeded_total"] == {"verb"}
    assert exported["rulesched_rule_errors_total"] == {"rule_set", "rule"}
    assert "rulesched_prometheus_query_failing" in exported
    assert exported["rulesched_rules_rejected"] == set()
    assert exported["rulesched_requeue_nudges_total"] == {"outcome"}
    assert exported["rulesched_audit_violations"] == {"rule_set", "rule"}
    assert exported["rulesched_evictions_total"] == {"rule_set", "outcome"}


@pytest.mark.parametrize("expression", expressions())
def test_every_expression_reads_only_what_rulesched_exports(expression: str, exported: dict[str, set[str]]) -> None:
    assert unknown_reads(expression, exported) == []


def test_the_check_sees_an_unknown_metric_or_label(exported: dict[str, set[str]]) -> None:
    assert unknown_reads('sum by (zone) (rate(rulesched_requests_total{verb="filter"}[5m]))', exported) == [
        "grouping label zone"
    ]
    assert unknown_reads("rulesched_decisions_total", exported) == ["metric rulesched_decisions_total"]
    assert unknown_reads('rulesched_rules_generation{rule="x"}', exported) == ["label rulesched_rules_generation{rule}"]


def test_the_rejected_gauge_follows_the_newest_change(tmp_path: Path) -> None:
    """`rulesched_rules_rejected` (RuleschedRulesRejected): 1 once a change is rejected, 0 once one loads."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a.yaml").write_text(reject("a", "k8s-node1"))
    settings = Settings(rules_dir=rules, nodes_file=EXAMPLE_NODES, cluster="off", reload_debounce=0.05)
    with running_server(settings) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert metric(client, "rulesched_rules_rejected") == 0.0
        (rules / "a.yaml").write_text(BROKEN)
        wait_for(lambda: metric(client, "rulesched_rules_rejected") == 1.0, timeout=10, what="the rejection")
        assert metric(client, "rulesched_rules_generation") == 1.0  # the last good rules keep serving
        (rules / "a.yaml").write_text(reject("a", "k8s-node2"))
        wait_for(lambda: metric(client, "rulesched_rules_rejected") == 0.0, timeout=10, what="the next good load")
        assert metric(client, "rulesched_rules_generation") == 2.0


# --- the dashboard and the alerts -------------------------------------------------------------------


def test_the_committed_dashboard_is_what_the_table_makes() -> None:
    assert (MONITORING / "dashboard.json").read_text() == render(), "run: rulesched config dashboard > …"


def test_the_dashboard_panels_do_not_overlap_and_have_unique_ids() -> None:
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = [
        (x, y)
        for p in panels
        for g in [p["gridPos"]]
        for x in range(g["x"], g["x"] + g["w"])
        for y in range(g["y"], g["y"] + g["h"])
    ]
    assert len(cells) == len(set(cells))
    assert all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in panels)


def test_every_alert_has_a_runbook_section_and_a_severity() -> None:
    sections = anchors(OBSERVABILITY)
    for rule in prometheus_rules():
        path, _, section = rule["annotations"]["runbook_url"].partition("#")
        assert (REPO / path) == OBSERVABILITY
        assert section in sections, rule["alert"]
        assert section == rule["alert"].lower()
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]


def test_the_alerts_cover_what_the_issue_asks() -> None:
    alerts = {r["alert"]: r["expr"] for r in prometheus_rules()}
    assert "rulesched_rules_rejected" in alerts["RuleschedRulesRejected"]
    assert "rulesched_metrics_sample_age_seconds" in alerts["RuleschedMetricsStale"]
    assert "rulesched_prometheus_query_failing" in alerts["RuleschedMetricSourceStale"]
    assert "rulesched_rule_errors_total" in alerts["RuleschedRuleErrors"]
    assert "rulesched_deadline_exceeded_total" in alerts["RuleschedDeadlineExceeded"]
    assert "up{" in alerts["RuleschedDown"]


# --- the manifests ------------------------------------------------------------------------------


def overlay() -> list[dict[str, Any]]:

    done = subprocess.run(
        [kubectl(), "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=120, check=True
    )
    return [o for o in yaml.safe_load_all(done.stdout) if o]


def test_the_overlay_is_the_default_install_and_the_monitoring_objects() -> None:
    names = {(o["kind"], o["metadata"]["name"]) for o in overlay()}
    default = {(o["kind"], o["metadata"]["name"]) for o in render_variant("default")}
    assert names - default == {
        ("ServiceMonitor", "rulesched"),
        ("PrometheusRule", "rulesched"),
        ("ConfigMap", "rulesched-dashboard"),
        ("NetworkPolicy", "rulesched-prometheus"),
    }
    assert default <= names


def test_the_kubernetes_objects_validate() -> None:
    for obj in overlay():
        if not obj["apiVersion"].startswith("monitoring.coreos.com/"):
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def crd_schema(kind: str) -> dict[str, Any]:
    schemas: dict[str, Any] = yaml.safe_load(CRD_SCHEMAS.read_text())
    return {**schemas[kind], "$defs": schemas["$defs"]}


def test_the_prometheus_operator_objects_validate() -> None:
    crds = [o for o in overlay() if o["apiVersion"].startswith("monitoring.coreos.com/")]
    assert sorted(o["kind"] for o in crds) == ["PrometheusRule", "ServiceMonitor"]
    for obj in crds:
        jsonschema.validate(obj, crd_schema(obj["kind"]))


def test_the_crd_check_refuses_a_misspelled_field() -> None:
    monitor = next(o for o in overlay() if o["kind"] == "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["scrapeInterval"] = "30s"
    with pytest.raises(jsonschema.ValidationError, match="scrapeInterval"):
        jsonschema.validate(monitor, crd_schema("ServiceMonitor"))


def test_the_service_monitor_scrapes_the_extender_service() -> None:
    objects = overlay()
    monitor = next(o for o in objects if o["kind"] == "ServiceMonitor")
    service = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "rulesched")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    dashboard_map = next(
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "rulesched-dashboard"
    )
    assert json.loads(dashboard_map["data"]["rulesched.json"]) == dashboard()


def test_prometheus_is_admitted_to_the_metrics_port() -> None:
    objects = overlay()
    policy = next(
        o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "rulesched-prometheus"
    )
    [port] = policy["spec"]["ingress"][0]["ports"]
    extender = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "rulesched")
    ports = {p["containerPort"] for c in extender["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
    assert port["port"] in ports
