"""The audit controller's surface: `GET /audit` and the audit's Prometheus metrics, read from the `Auditor`.

`GET /audit?offset=N&limit=M` answers the counts per rule and a page of the violations (sorted by
namespace, pod, rule set and rule), `limit` at most `MAX_PAGE`; `next` is the offset of the next page.
`rulesched_audit_violations{rule_set,rule}` counts the violating pods of each audited filter (0 for one
with none, so a series goes to 0 rather than stale), and `rulesched_audit_age_seconds` the seconds since
the audit was last complete (NaN before its first pass). The answers are JSON as the HTTP edge writes them
(`extender/responses.py`): the same body, status and headers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from rulesched.controllers.audit.audit import report
from rulesched.controllers.audit.auditor import Auditor

DEFAULT_PAGE = 100
MAX_PAGE = 1000
"""Most violations one GET /audit answers."""


def install(routes: list[BaseRoute], registry: CollectorRegistry, auditor: Auditor | None) -> None:
    """Add GET /audit to `routes` and the audit's metrics to `registry`."""

    async def audit(request: Request) -> Response:
        if auditor is None:
            return _error(404, "no audit: it needs a node source and a pod source (a cluster, or --nodes and --pods)")
        page = _page(request.query_params.get("offset", "0"), request.query_params.get("limit", str(DEFAULT_PAGE)))
        if isinstance(page, str):
            return _error(400, page)
        return _json(status(auditor) | report(auditor.violations(), offset=page[0], limit=page[1]))

    routes.append(Route("/audit", audit))
    if auditor is not None:
        registry.register(_AuditCollector(auditor))


def _json(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code, media_type="application/json")


def _error(status_code: int, message: str) -> Response:
    return _json({"error": message}, status_code)


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
