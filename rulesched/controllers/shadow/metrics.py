"""The shadow rules' Prometheus metrics: the comparisons by verb and outcome, the nodes the shadow rules rejected
by filter rule, the shadow book's reloads and generation, and the calls waiting for their comparison.

Registered in the registry they are given: the server's (`extender/metrics.py` makes them with its own, so that
`/metrics` shows them whether or not the shadow rules are on, as it shows every metric), or one of their own
for a controller made in process.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge


class ShadowMetrics:
    """The shadow rules' counters and gauges; the gauges are computed when scraped (`Shadow` sets them)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.comparisons = Counter(
            "rulesched_shadow_comparisons",
            "Calls compared with the shadow rules, by verb and outcome (same, differs, dropped)",
            ["verb", "outcome"],
            registry=r,
        )
        self.rejections = Counter(
            "rulesched_shadow_filter_rejections",
            "Nodes the shadow rules rejected, by filter rule",
            ["rule_set", "rule"],
            registry=r,
        )
        self.reloads = Counter(
            "rulesched_shadow_reloads", "Shadow rule reloads by result (loaded, unchanged, rejected)", ["result"],
            registry=r,
        )  # fmt: skip
        self.generation = Gauge(
            "rulesched_shadow_rules_generation", "Generation of the shadow rule book (0: none)", registry=r
        )
        self.queue = Gauge(
            "rulesched_shadow_queue_calls", "Answered calls waiting for their shadow evaluation", registry=r
        )

    def decision(self, verb: str, outcome: str, failures: Mapping[tuple[str, str, bool], int]) -> None:
        """Count one comparison with the shadow rules; `failures` is the shadow decision's `failures()`."""
        self.comparisons.labels(verb, outcome).inc()
        for (rule_set, rule, enforce), count in failures.items():
            if enforce:
                self.rejections.labels(rule_set, rule).inc(count)
