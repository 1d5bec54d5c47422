"""The requeue controller's Prometheus metrics, registered in the server's registry (a Grafana dashboard reads
these names): the pods remembered, the evaluations again, the nudges by outcome and their delay."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from rulesched.writes.nudge import NudgeOutcome

DELAY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class RequeueMetrics:
    """The four requeue metrics, in the app's registry (a Grafana dashboard reads these names)."""

    def __init__(self, r: CollectorRegistry, remembered: Callable[[], float]) -> None:
        self.remembered = Gauge("rulesched_requeue_remembered_pods", "Rejected pods remembered for requeue", registry=r)
        self.remembered.set_function(remembered)
        self.reevaluations = Counter(
            "rulesched_requeue_reevaluations", "Remembered pods evaluated again after a change", registry=r
        )
        self.nudges = Counter(
            "rulesched_requeue_nudges",
            "Nudges (annotation patches) by outcome: patched, forbidden, gone, conflict, raced, throttled, failed,"
            " dropped",
            ["outcome"],
            registry=r,
        )
        for outcome in get_args(NudgeOutcome):  # every outcome from the start: rates and alerts see a 0, not nothing
            self.nudges.labels(outcome)
        self.delay = Histogram(
            "rulesched_requeue_nudge_delay_seconds",
            "Seconds from the change that let a pod through to its accepted nudge",
            buckets=DELAY_BUCKETS,
            registry=r,
        )
