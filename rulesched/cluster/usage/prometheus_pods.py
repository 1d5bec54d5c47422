"""The pods' usage from Prometheus: a MetricSource's `podUsage` queries, polled into the usage store the
estimates come from (docs/guides/usage-estimates.md), beside (and before) metrics-server's pod metrics.

Every `interval` of its MetricSource, one thread asks the `cpu` query, then the `memory` query; each must
give an instant vector with at most one series per pod, named by its `namespaceLabel` and `podLabel`
(series without them are skipped; NaN and ±Inf too), and at most `max_series` series (the pods the pod
cache may hold). A pod with both values is a sample; the pods are found among those the pod source knows
(their workload is what is learnt, as for metrics-server) and one poll is recorded in the store. While
these answers are fresh (within the source's `maxAge`), metrics-server's pod polls give way
(`UsageStore.preferred_until`): one kind of sample per window. A failed poll records nothing and keeps
what was learnt; metrics-server takes over once the last answer is older than `maxAge`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rulesched.cluster.loop import Outcome
from rulesched.cluster.metrics.prometheus import Poller, QueryError, QueryStatus, sample_value, vector_of
from rulesched.cluster.usage.store import PodUsage, UsageStore, Views, record_usage
from rulesched.rules.metricsource import MetricSource
from rulesched.rules.metricsource import PodUsage as PodUsageQueries

log = logging.getLogger(__name__)

STATUS_NAME = "spec.podUsage"
"""The name the pod usage queries have in /rules and /metrics (and their thread's): never a query name."""


def pod_samples(result: list[Any], queries: PodUsageQueries, max_series: int) -> dict[tuple[str, str], float]:
    """The values by pod (namespace, name) of one answer's series; QueryError when it cannot be read so."""
    if len(result) > max_series:
        raise QueryError(f"{len(result)} series, more than {max_series} (--max-pods): aggregate by pod")
    namespace_label, pod_label = queries.namespaceLabel, queries.podLabel
    values: dict[tuple[str, str], float] = {}
    labelled = 0
    for sample in result:
        metric = sample.get("metric") if isinstance(sample, Mapping) else None
        namespace = metric.get(namespace_label) if isinstance(metric, Mapping) else None
        pod = metric.get(pod_label) if isinstance(metric, Mapping) else None
        if not isinstance(namespace, str) or not isinstance(pod, str) or not namespace or not pod:
            continue  # a series without both labels names no pod (a node's or the root cgroup's)
        labelled += 1
        if (namespace, pod) in values:
            raise QueryError(f"several series for pod {namespace}/{pod}: aggregate by {namespace_label}, {pod_label}")
        value = sample_value(sample.get("value"))
        if value is not None:
            values[(namespace, pod)] = value
    if result and not labelled:
        labels = sorted({k for s in result if isinstance(s, Mapping) for k in (s.get("metric") or {})})
        shown = ", ".join(labels) or "none"
        raise QueryError(f"no series has the labels {namespace_label!r} and {pod_label!r}; their labels: {shown}")
    return values


class PodUsagePoll(Poller):
    """One MetricSource's `podUsage`, polled in its own thread into the usage store; its status's `nodes` are
    the pods sampled."""

    def __init__(self, source: MetricSource, store: UsageStore, views: Views, max_series: int) -> None:
        assert source.spec.podUsage is not None
        self.queries = source.spec.podUsage
        self.store, self._views, self.max_series = store, views, max_series
        self.seconds: float | None = None
        """How long the last successful poll took (both queries, their parsing and the store's update)."""
        super().__init__(source.metadata.name, source.spec.prometheus, STATUS_NAME)

    FOUND = "%d pods sampled"
    MEANWHILE = "the estimates keep what they learnt, metrics-server's pod metrics (if polled) take over after %gs"

    def _values(self, promql: str) -> tuple[dict[tuple[str, str], float], list[str]]:
        result, warnings = vector_of(self._connection.query(promql), "pod")
        return pod_samples(result, self.queries, self.max_series), warnings

    def _poll(self) -> Outcome:
        self.polls += 1
        started = time.perf_counter()
        cpu, cpu_warnings = self._values(self.queries.cpu)
        memory, memory_warnings = self._values(self.queries.memory)
        usages: dict[tuple[str, str], PodUsage] = {pod: (c, memory[pod]) for pod, c in cpu.items() if pod in memory}
        if self.loop.stopping:
            return "ok"  # replaced by a MetricSource change meanwhile: its samples are no longer wanted
        record_usage(self.store, usages, self._views())
        self.store.preferred_until = time.time() + self.server.maxAge
        self.nodes = len(usages)
        self.seconds = time.perf_counter() - started
        self._warn(cpu_warnings + memory_warnings)
        return "ok"


def _key(source: MetricSource) -> str:
    """What identifies a poll: a MetricSource change that leaves it the same keeps it running."""
    spec = source.spec
    return json.dumps([source.metadata.name, spec.prometheus.model_dump(), spec.model_dump()["podUsage"]])


class PodUsageFeed:
    """The `podUsage` of the rule book's MetricSources (at most one declares it): `configure` with each book."""

    def __init__(self, store: UsageStore, views: Views, max_series: int) -> None:
        self.store, self._views, self.max_series = store, views, max_series
        self._poll: PodUsagePoll | None = None
        self._key = ""
        self._started = False
        self._lock = threading.Lock()

    def configure(self, sources: Sequence[MetricSource]) -> None:
        """Poll the podUsage of these sources: a new or changed declaration replaces the running one."""
        source = next((s for s in sources if s.spec.podUsage is not None), None)
        key = _key(source) if source is not None else ""
        with self._lock:
            if key == self._key:
                return
            old, self._key = self._poll, key
            self._poll = PodUsagePoll(source, self.store, self._views, self.max_series) if source else None
            new, started = self._poll, self._started
        if old is not None:
            old.stop()  # a stopped poll records nothing more
        if source is None:
            self.store.preferred_until = 0.0  # metrics-server's pod metrics at once
        if new is not None and started:
            new.start()

    def status(self) -> list[QueryStatus]:
        poll = self._poll
        return [poll.status()] if poll is not None else []

    def poll_seconds(self) -> float | None:
        """How long the declared podUsage's last successful poll took; None before one (a changed declaration
        starts anew). Only meaningful while `polling`."""
        poll = self._poll
        return poll.seconds if poll is not None else None

    @property
    def polling(self) -> bool:
        """Whether a MetricSource of the rules declares podUsage (and so is polled)."""
        return self._poll is not None

    def poll(self) -> None:
        """Poll once now, in this thread (tests and tools)."""
        poll = self._poll
        if poll is not None:
            poll.loop.run_once()

    def start(self) -> None:
        with self._lock:
            self._started = True
            poll = self._poll
        if poll is not None:
            poll.start()

    def stop(self) -> None:
        with self._lock:
            self._started = False
            poll = self._poll
        if poll is not None:
            poll.stop()
