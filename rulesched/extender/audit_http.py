"""The audit in the HTTP edge: `GET /audit` and the audit's Prometheus metrics, read from the `Auditor`.

`GET /audit?offset=N&limit=M` answers the counts per rule and a page of the violations (sorted by
namespace, pod, rule set and rule), `limit` at most `MAX_PAGE`; `next` is the offset of the next page.
`rulesched_audit_violations{rule_set,rule}` counts the violating pods of each audited filter (0 for one
with none, so a series goes to 0 rather than stale), and `rulesched_audit_age_seconds` the seconds since
the audit was last complete (NaN before its first pass).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rulesched.cluster import Cluster
from rulesched.cluster.audit import report
from rulesched.cluster.auditor import Auditor, AuditPace, AuditSources
from rulesched.cluster.descheduler import build_descheduler
from rulesched.extender.metrics import Metrics
from rulesched.extender.responses import error_response, json_response
from rulesched.rules.store import RuleStore
from rulesched.settings import Settings

DEFAULT_PAGE = 100
MAX_PAGE = 1000
"""Most violations one GET /audit answers."""


def build_auditor(settings: Settings, store: RuleStore, cluster: Cluster) -> Auditor | None:
    """The continuous audit over the server's sources; None without a node source and a pod source."""
    if cluster.nodes is None or cluster.pods is None:
        return None
    sources = AuditSources(
        cluster.nodes, cluster.pods, cluster.metrics, cluster.namespaces, cluster.custom, cluster.placements
    )
    pace = AuditPace(settings.audit_interval, settings.audit_nodes_per_step, settings.audit_max_violations)
    auditor = Auditor(store, sources, pace)
    auditor.descheduler = build_descheduler(settings, cluster.access)
    return auditor


def install(routes: list[BaseRoute], metrics: Metrics, auditor: Auditor | None) -> None:
    """Add GET /audit to `routes` and the audit's metrics to `metrics`."""

    async def audit(request: Request) -> Response:
        if auditor is None:
            return error_response(
                404, "no audit: it needs a node source and a pod source (a cluster, or --nodes and --pods)"
            )
        page = _page(request.query_params.get("offset", "0"), request.query_params.get("limit", str(DEFAULT_PAGE)))
        if isinstance(page, str):
            return error_response(400, page)
        return json_response(status(auditor) | report(auditor.violations(), offset=page[0], limit=page[1]))

    routes.append(Route("/audit", audit))
    if auditor is not None:
        metrics.registry.register(_AuditCollector(auditor))


def status(auditor: Auditor) -> dict[str, Any]:
    """What GET /audit says of the audit itself."""
    age = auditor.age()
    return {
        "complete": age is not None,
        "ageSeconds": None if age is None else round(age, 3),
        "generation": auditor.generation(),
        "overflowed": auditor.overflowed,
    }


def _page(offset: str, limit: str) -> tuple[int, int] | str:
    """(offset, limit) from the query, or what is wrong with it."""
    try:
        first, count = int(offset), int(limit)
    except ValueError:
        return "offset and limit must be integers"
    if first < 0 or not 1 <= count <= MAX_PAGE:
        return f"offset must be >= 0 and limit between 1 and {MAX_PAGE}"
    return first, count


class _AuditCollector(Collector):
    def __init__(self, auditor: Auditor) -> None:
        self._auditor = auditor

    def collect(self) -> Iterable[Metric]:
        violations = GaugeMetricFamily(
            "rulesched_audit_violations", "Running pods a filter rejects on their own node", labels=["rule_set", "rule"]
        )
        counted = Counter((v.rule_set, v.rule) for v in self._auditor.violations())
        for key in sorted(set(self._auditor.audited()) | set(counted)):
            violations.add_metric(list(key), counted.get(key, 0))
        age = self._auditor.age()
        seconds = GaugeMetricFamily(
            "rulesched_audit_age_seconds", "Seconds since the audit of running pods was last complete (NaN before)"
        )
        seconds.add_metric([], float("nan") if age is None else age)
        found: list[Metric] = [violations, seconds]
        descheduler = self._auditor.descheduler
        if descheduler is not None:
            evictions = CounterMetricFamily(
                "rulesched_evictions", "Evictions asked for, by rule set and outcome", labels=["rule_set", "outcome"]
            )
            for (rule_set, outcome), count in sorted(descheduler.counts().items()):
                evictions.add_metric([rule_set, outcome], count)
            found.append(evictions)
        return found
