"""The health of one Prometheus query of a MetricSource, for /rules and /metrics (cluster/metrics/prometheus.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class QueryStatus:
    """One query's health, for /rules and /metrics."""

    source: str
    query: str
    url: str
    state: str
    """"starting" before the first answer, "ok" or "failing"."""
    last_success: float | None
    last_error: str
    """The last failure's message (kept after recovery, with its time)."""
    last_error_at: float | None
    nodes: int
    """Keys (nodes) the last successful answer gave values for."""
    polls: int
    failures: int
    warnings: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "query": self.query,
            "url": self.url,
            "state": self.state,
            "lastSuccess": _iso(self.last_success),
            "lastError": self.last_error,
            "lastErrorAt": _iso(self.last_error_at),
            "nodes": self.nodes,
            "polls": self.polls,
            "failures": self.failures,
            "warnings": list(self.warnings),
        }


def _iso(at: float | None) -> str | None:
    if at is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
