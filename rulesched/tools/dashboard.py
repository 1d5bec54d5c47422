"""The Grafana dashboard of deploy/components/monitoring/dashboard.json, made from the table PANELS.

A panel is one line of the table: its title, unit and PromQL queries (with their legends); rows start a
new section. The layout (two panels a line, stats four a line) is computed, so adding a panel is adding
one `Panel(...)` where it belongs and running `rulesched config dashboard > deploy/components/monitoring/
dashboard.json` (tests/test_monitoring.py fails until the committed file is what this makes, and checks
that every query parses and names only metrics and labels a running rulesched exports).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

UID = "rulesched"
SELECTOR = '{job=~"$job"}'
"""Every query's selector: the rulesched targets chosen in the dashboard's `job` variable."""
RATE = "[$__rate_interval]"


@dataclass(frozen=True)
class Query:
    """One PromQL expression of a panel and the legend of its series (`{{label}}` names a label)."""

    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    """A time series (or, `stat=True`, a single number) panel."""

    title: str
    queries: tuple[Query, ...]
    unit: str = "short"
    description: str = ""
    stat: bool = False
    mappings: tuple[tuple[str, str], ...] = ()
    """For a stat: (value, text) shown instead of the number."""


@dataclass(frozen=True)
class Row:
    """A section heading; the panels after it belong to it."""

    title: str


def rate(metric: str, by: str) -> str:
    """Per-second rate of a counter, summed by the labels in `by`."""
    return f"sum by ({by}) (rate({metric}{SELECTOR}{RATE}))"


def quantile(q: float, histogram: str, by: str) -> str:
    return f"histogram_quantile({q}, sum by ({by}, le) (rate({histogram}_bucket{SELECTOR}{RATE})))"


PANELS: tuple[Panel | Row, ...] = (
    Row("Decisions"),
    Panel(
        "Decisions per second by verb and outcome",
        (Query(rate("rulesched_requests_total", "verb, code"), "{{verb}} {{code}}"),),
        unit="reqps",
        description="HTTP calls by verb (filter, prioritize, preempt, bind, explain) and status code.",
    ),
    Panel(
        "Latency by verb (p50, p99)",
        (
            Query(quantile(0.5, "rulesched_request_duration_seconds", "verb"), "p50 {{verb}}"),
            Query(quantile(0.99, "rulesched_request_duration_seconds", "verb"), "p99 {{verb}}"),
        ),
        unit="s",
    ),
    Panel(
        "Rejections per rule",
        (Query(rate("rulesched_filter_rejections_total", "rule_set, rule"), "{{rule_set}}/{{rule}}"),),
        unit="short",
        description="Nodes rejected per second by each Enforce filter.",
    ),
    Panel(
        "Audit-mode rejections per rule",
        (Query(rate("rulesched_audit_rejections_total", "rule_set, rule"), "{{rule_set}}/{{rule}}"),),
        description="Nodes an Audit filter would have rejected: what enforcing it would change.",
    ),
    Panel(
        "Evaluation errors per rule",
        (Query(rate("rulesched_rule_errors_total", "rule_set, rule"), "{{rule_set}}/{{rule}}"),),
        description="Rules that could not be evaluated; each followed its failurePolicy.",
    ),
    Panel(
        "Deadline hits by verb",
        (Query(rate("rulesched_deadline_exceeded_total", "verb"), "{{verb}}"),),
        description="Calls whose --request-deadline passed before every rule was evaluated.",
    ),
    Panel(
        "Candidate nodes per call (p50, p99)",
        (
            Query(quantile(0.5, "rulesched_candidate_nodes", "verb"), "p50 {{verb}}"),
            Query(quantile(0.99, "rulesched_candidate_nodes", "verb"), "p99 {{verb}}"),
        ),
    ),
    Row("Rules"),
    Panel("Rules generation", (Query(f"max(rulesched_rules_generation{SELECTOR})"),), stat=True),
    Panel(
        "Last reload",
        (Query(f"max(rulesched_rules_rejected{SELECTOR})"),),
        stat=True,
        mappings=(("0", "loaded"), ("1", "rejected: last good rules serving")),
    ),
    Panel(
        "Since the last good load",
        (Query(f"min(rulesched_seconds_since_last_reload{SELECTOR})"),),
        unit="s",
        stat=True,
    ),
    Panel("Nodes known", (Query(f"max(rulesched_node_cache_nodes{SELECTOR})"),), stat=True),
    Panel("Reloads by result", (Query(rate("rulesched_reloads_total", "result"), "{{result}}"),), unit="ops"),
    Row("Cluster state"),
    Panel(
        "Metrics age per source",
        (
            Query(f"max(rulesched_metrics_sample_age_seconds{SELECTOR})", "metrics-server"),
            Query(
                f"max by (source, query) (rulesched_prometheus_query_seconds_since_success{SELECTOR})",
                "{{source}}/{{query}}",
            ),
        ),
        unit="s",
        description="A value older than its maxAge (--metrics-max-age for metrics-server) counts as absent.",
    ),
    Panel(
        "Failing sources",
        (
            Query(f"max by (source, query) (rulesched_prometheus_query_failing{SELECTOR})", "{{source}}/{{query}}"),
            Query(f"max by (source) (rulesched_source_failing{SELECTOR})", "{{source}}"),
        ),
        description="1 while a MetricSource query or a pod or namespace watch fails.",
    ),
    Panel(
        "Objects kept by the context sources",
        (Query(f"max by (source) (rulesched_source_objects{SELECTOR})", "{{source}}"),),
    ),
    Row("Shadow rules and recording"),
    Panel(
        "Shadow comparisons by verb and outcome",
        (Query(rate("rulesched_shadow_comparisons_total", "verb, outcome"), "{{verb}} {{outcome}}"),),
        unit="ops",
        description="With --shadow-rules: calls decided again by the shadow rules (same, differs, dropped).",
    ),
    Panel(
        "Rejections per rule: live and shadow",
        (
            Query(rate("rulesched_filter_rejections_total", "rule_set, rule"), "live {{rule_set}}/{{rule}}"),
            Query(rate("rulesched_shadow_filter_rejections_total", "rule_set, rule"), "shadow {{rule_set}}/{{rule}}"),
        ),
    ),
    Row("After the answer: requeue, audit, descheduling, estimates"),
    Panel(
        "Rejected pods remembered for requeue",
        (Query(f"sum(rulesched_requeue_remembered_pods{SELECTOR})"),),
        description="With --requeue: pods rejected everywhere, waiting for a change that lets them through.",
    ),
    Panel(
        "Requeue nudges by outcome",
        (
            Query(rate("rulesched_requeue_nudges_total", "outcome"), "{{outcome}}"),
            Query(rate("rulesched_requeue_reevaluations_total", "job"), "re-evaluations"),
        ),
        unit="ops",
        description="Annotation patches that make kube-scheduler retry a pod; forbidden means the overlay is missing.",
    ),
    Panel(
        "From the change to the nudge (p50, p99)",
        (
            Query(quantile(0.5, "rulesched_requeue_nudge_delay_seconds", "job"), "p50"),
            Query(quantile(0.99, "rulesched_requeue_nudge_delay_seconds", "job"), "p99"),
        ),
        unit="s",
    ),
    Panel(
        "Running pods in violation per rule",
        (Query(f"max by (rule_set, rule) (rulesched_audit_violations{SELECTOR})", "{{rule_set}}/{{rule}}"),),
        description="The audit of running pods: pods an Enforce filter rejects on the node they run on.",
    ),
    Panel(
        "Audit age",
        (Query(f"max(rulesched_audit_age_seconds{SELECTOR})"),),
        unit="s",
        stat=True,
    ),
    Panel(
        "Evictions by rule set and outcome",
        (Query(rate("rulesched_evictions_total", "rule_set, outcome"), "{{rule_set}} {{outcome}}"),),
        unit="ops",
        description="With --deschedule: evictions asked for (dry-run: those that would be).",
    ),
    Panel(
        "Workloads with a usage estimate",
        (Query(f"max(rulesched_usage_workloads{SELECTOR})"),),
        stat=True,
    ),
    Panel(
        "Last pod usage poll by source",
        (Query(f"max by (source) (rulesched_usage_poll_seconds{SELECTOR})", "{{source}}"),),
        unit="s",
        description="How long each source's last poll of the pods' usage took: metrics-server, prometheus (podUsage).",
        stat=True,
    ),
    Row("Recording"),
    Panel(
        "Recorded calls by result",
        (Query(rate("rulesched_recording_calls_total", "result"), "{{result}}"),),
        unit="ops",
        description="With --record: calls written to the recording, or dropped.",
    ),
)

_FULL, _HALF, _STAT = 24, 12, 6


def queries() -> list[str]:
    """Every PromQL expression of the dashboard."""
    return [q.expr for p in PANELS if isinstance(p, Panel) for q in p.queries]


def dashboard() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model."""
    panels: list[dict[str, Any]] = []
    x = y = height = 0
    for number, item in enumerate(PANELS, 1):
        if isinstance(item, Row):
            y += height
            panels.append(_row(number, item, y))
            x, height = 0, 1
            continue
        width = _STAT if item.stat else _HALF
        if x + width > _FULL:
            x, y, height = 0, y + height, 0
        if x == 0:
            y, height = y + height, 0
        panels.append(_panel(number, item, {"x": x, "y": y, "w": width, "h": 4 if item.stat else 8}))
        height = max(height, 4 if item.stat else 8)
        x += width
    return {
        "uid": UID,
        "title": "rulesched",
        "description": "The rulesched scheduler extender: decisions, rules, cluster state, shadow rules, requeue, "
        "audit, descheduling and usage estimates.",
        "tags": ["rulesched", "kubernetes", "scheduler"],
        "schemaVersion": 39,
        "editable": True,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {"list": _variables()},
        "panels": panels,
    }


def _row(number: int, row: Row, y: int) -> dict[str, Any]:
    return {
        "id": number,
        "type": "row",
        "title": row.title,
        "collapsed": False,
        "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
    }


def _panel(number: int, panel: Panel, position: dict[str, int]) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit}
    if panel.mappings:
        options = {value: {"text": text, "index": i} for i, (value, text) in enumerate(panel.mappings)}
        defaults["mappings"] = [{"type": "value", "options": options}]
    return {
        "id": number,
        "type": "stat" if panel.stat else "timeseries",
        "title": panel.title,
        "description": panel.description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": position,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": q.expr, "legendFormat": q.legend or "__auto"}
            for i, q in enumerate(panel.queries)
        ],
    }


def _variables() -> list[dict[str, Any]]:
    source = {"type": "prometheus", "uid": "${datasource}"}
    return [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
        {
            "name": "job",
            "label": "Job",
            "type": "query",
            "datasource": source,
            "query": {"query": "label_values(rulesched_rules_generation, job)", "refId": "job"},
            "definition": "label_values(rulesched_rules_generation, job)",
            "includeAll": True,
            "multi": True,
            "refresh": 2,
        },
    ]


def render() -> str:
    """The dashboard as deploy/components/monitoring/dashboard.json holds it."""
    return json.dumps(dashboard(), indent=2) + "\n"
