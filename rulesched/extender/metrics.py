"""Prometheus metrics (prometheus-client), one registry per app so that several apps can coexist.

Counters follow decisions and reloads; gauges that describe a state (rules generation, seconds since
the last good reload, node cache size, metrics sample age) are computed when scraped.
"""

from __future__ import annotations

import collections
import datetime
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rulesched.controllers.shadow.metrics import ShadowMetrics
from rulesched.decide.decision import Decision
from rulesched.rules.book import RuleBook
from rulesched.rules.store import RejectedReload, ReloadOutcome, RuleStore

if TYPE_CHECKING:
    from rulesched.cluster.metrics.prometheus import QueryStatus

_CHILDREN_KEPT = 4096
"""Labelled metric children found again by `Metrics._child` (verbs, codes, rules: a few dozen in practice)."""
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
CANDIDATE_BUCKETS = (1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000)


class Metrics:
    """Every metric rulesched exports, registered in its own registry."""

    def __init__(self) -> None:
        self._children: dict[tuple[object, ...], Any] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "rulesched_requests", "HTTP requests by verb and status code", ["verb", "code"], registry=r
        )
        self.latency = Histogram(
            "rulesched_request_duration_seconds",
            "Request latency by verb",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.candidates = Histogram(
            "rulesched_candidate_nodes", "Candidate nodes per request", ["verb"], buckets=CANDIDATE_BUCKETS, registry=r
        )
        rule = ["rule_set", "rule"]
        self.rejections = Counter("rulesched_filter_rejections", "Nodes rejected, by filter rule", rule, registry=r)
        self.errors = Counter("rulesched_rule_errors", "Rule evaluation errors, by rule", rule, registry=r)
        self.deadlines = Counter(
            "rulesched_deadline_exceeded",
            "Requests whose deadline passed before every rule was evaluated, by verb",
            ["verb"],
            registry=r,
        )
        self.audit = Counter(
            "rulesched_audit_rejections", "Nodes an Audit-mode filter would have rejected, by rule", rule, registry=r
        )
        self.refreshed = Counter(
            "rulesched_refreshed_nodes",
            "Nodes made ready ahead of requests after a metrics poll or a rules reload",
            registry=r,
        )
        self.refreshed_calls = Counter(
            "rulesched_refreshed_calls",
            "Prioritize calls evaluated again ahead of requests after a metrics poll or a rules reload (the last one)",
            registry=r,
        )
        self.reloads = Counter(
            "rulesched_reloads", "Rule reloads by result (loaded, unchanged, rejected)", ["result"], registry=r
        )
        self.generation = Gauge("rulesched_rules_generation", "Generation of the active rule book", registry=r)
        self.rule_sets = Gauge(
            "rulesched_rule_sets", "Rule sets in the active rule book (0: no rules, every node passes)", registry=r
        )
        self.since_reload = Gauge(
            "rulesched_seconds_since_last_reload", "Seconds since the rules were last loaded successfully", registry=r
        )
        self.rules_rejected = Gauge(
            "rulesched_rules_rejected",
            "1 while the newest rules change was rejected and the last good rules keep serving",
            registry=r,
        )
        self.cache_nodes = Gauge("rulesched_node_cache_nodes", "Nodes in the node source", registry=r)
        self.sample_age = Gauge(
            "rulesched_metrics_sample_age_seconds", "Age of the newest node metrics sample", registry=r
        )

        self.source_objects = Gauge(
            "rulesched_source_objects",
            "Objects kept by each context source (pods, pending placements, namespaces)",
            ["source"],
            registry=r,
        )
        self.source_failing = Gauge(
            "rulesched_source_failing", "1 while a live source's API requests fail (an outage)", ["source"], registry=r
        )

        self.shadow = ShadowMetrics(r)
        """The shadow rules' (`controllers/shadow/metrics.py`), registered here in the order /metrics lists them."""
        self.recorded = Counter(
            "rulesched_recording_calls", "Calls written to the recording (written) or left out (dropped)", ["result"],
            registry=r,
        )  # fmt: skip
        self.recording_bytes = Gauge(
            "rulesched_recording_bytes", "Bytes the recording directory's segments take", registry=r
        )
        self.usage_workloads = Gauge(
            "rulesched_usage_workloads", "Workloads whose usage summary the estimates are made from", registry=r
        )

    def watch_usage(
        self, workloads: Callable[[], float], poll_seconds: Callable[[], Mapping[str, float | None]]
    ) -> None:
        """Report the usage store's workloads and, by source, its feeds' last poll's duration, read when scraped
        (a MetricSource's podUsage comes and goes with the rules)."""
        self.usage_workloads.set_function(workloads)
        self.registry.register(_UsagePollCollector(poll_seconds))

    def watch_source(self, name: str, size: Callable[[], float], failing: Callable[[], float]) -> None:
        """Report a pod or namespace source's size and whether it is failing, computed when scraped."""
        self.source_objects.labels(name).set_function(size)
        self.source_failing.labels(name).set_function(failing)

    def watch_queries(self, status: Callable[[], list[QueryStatus]]) -> None:
        """Report every MetricSource query's polls, failures, state and values, read when scraped (the
        queries change with the rules)."""
        self.registry.register(_QueryCollector(status))

    def watch_store(self, store: RuleStore) -> None:
        """Count reloads and report the active generation and the time since the last good load."""

        def on_reload(outcome: ReloadOutcome, book: RuleBook | None, rejected: RejectedReload | None) -> None:
            self.reloads.labels(outcome).inc()

        store.listeners.append(on_reload)
        self.generation.set_function(lambda: store.book.generation if store.book else 0)
        self.rule_sets.set_function(lambda: len(store.book.rule_sets) if store.book else 0)

        def since() -> float:
            if store.last_success is None:
                return float("nan")
            return (datetime.datetime.now(datetime.UTC) - store.last_success).total_seconds()

        self.since_reload.set_function(since)

        def rejected() -> float:
            failed, good = store.last_rejected, store.last_success
            return float(failed is not None and (good is None or failed.at > good))

        self.rules_rejected.set_function(rejected)

    def watch_sources(self, cache_size: Callable[[], float] | None, sample_age: Callable[[], float] | None) -> None:
        if cache_size is not None:
            self.cache_nodes.set_function(cache_size)
        if sample_age is not None:
            self.sample_age.set_function(sample_age)

    def decision(
        self, verb: str, decision: Decision, candidates: int, failures: Mapping[tuple[str, str, bool], int]
    ) -> None:
        """Count one decision; `failures` is `decision.failures()`, counted once by the caller."""
        self._child(self.candidates, verb).observe(candidates)
        if decision.deadline_exceeded:
            self.deadlines.labels(verb).inc()
        if decision.errors:
            for (rule_set, rule), count in collections.Counter((e.rule_set, e.rule) for e in decision.errors).items():
                self._child(self.errors, rule_set, rule).inc(count)
        for (rule_set, rule, enforce), count in failures.items():
            self._child(self.rejections if enforce else self.audit, rule_set, rule).inc(count)

    def request(self, verb: str, code: int, seconds: float) -> None:
        self._child(self.requests, verb, str(code)).inc()
        self._child(self.latency, verb).observe(seconds)

    def _child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, found again without prometheus-client's checks and lock: counted on every
        filter and prioritize call (the children are kept by the metric anyway; at most `_CHILDREN_KEPT` here)."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            if len(self._children) >= _CHILDREN_KEPT:
                self._children.clear()
            child = self._children[key] = metric.labels(*labels)
        return child

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _QueryCollector(Collector):
    """The Prometheus queries' counters and gauges, from their statuses at scrape time."""

    def __init__(self, status: Callable[[], list[QueryStatus]]) -> None:
        self._status = status

    def collect(self) -> Iterable[Metric]:
        labels = ["source", "query"]
        polls = CounterMetricFamily(
            "rulesched_prometheus_queries", "Prometheus query polls by result (ok, error)", labels=[*labels, "result"]
        )
        failing = GaugeMetricFamily("rulesched_prometheus_query_failing", "1 while the query fails", labels=labels)
        nodes = GaugeMetricFamily(
            "rulesched_prometheus_query_nodes", "Nodes the query's last good answer gave a value for", labels=labels
        )
        since = GaugeMetricFamily(
            "rulesched_prometheus_query_seconds_since_success",
            "Seconds since the query last answered (NaN before its first answer)",
            labels=labels,
        )
        now = time.time()
        for query in self._status():
            names = [query.source, query.query]
            polls.add_metric([*names, "ok"], query.polls - query.failures)
            polls.add_metric([*names, "error"], query.failures)
            failing.add_metric(names, 1.0 if query.state == "failing" else 0.0)
            nodes.add_metric(names, query.nodes)
            since.add_metric(names, now - query.last_success if query.last_success is not None else float("nan"))
        return [polls, failing, nodes, since]


class _UsagePollCollector(Collector):
    """`rulesched_usage_poll_seconds` by source (metrics-server, prometheus): only the sources polled."""

    def __init__(self, poll_seconds: Callable[[], Mapping[str, float | None]]) -> None:
        self._poll_seconds = poll_seconds

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(
            "rulesched_usage_poll_seconds",
            "Seconds the last poll of the pods' usage took, by source (NaN: none yet)",
            labels=["source"],
        )
        for source, seconds in sorted(self._poll_seconds().items()):
            gauge.add_metric([source], seconds if seconds is not None else float("nan"))
        return [gauge]
