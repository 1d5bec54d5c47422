"""The pods' usage from metrics-server (`pods.metrics.k8s.io`), polled beside the node metrics: it feeds the
usage store (`cluster/usage.py`) the estimates come from.

Every `interval` seconds a thread (a `cluster/loop.py` loop) lists `/apis/metrics.k8s.io/v1beta1/pods`,
finds each sampled pod's workload among the pods the pod source knows (by namespace and name: a
PodMetrics names its pod, not its owner), and records one poll in the store. A failed poll only means no
new samples: the store keeps what it learnt, and polling goes on at the usual pace. While a MetricSource's
`podUsage` answers (cluster/prometheus_pods.py), the polls give way to it and list nothing.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kubernetes.client import CustomObjectsApi

from rulesched.cluster.errors import api_errors
from rulesched.cluster.loop import BackgroundLoop, Backoff, LoopOptions, LoopStatus, Outcome
from rulesched.cluster.metrics_server import describe_failure
from rulesched.cluster.pod_metrics_wire import pod_usage
from rulesched.cluster.usage import UsageStore, Views, record_usage

log = logging.getLogger(__name__)


class PodMetricsPoller:
    """Polls `pods.metrics.k8s.io` into a `UsageStore`; `seconds` is what the last poll took."""

    def __init__(
        self,
        api: Any,
        store: UsageStore,
        views: Views,
        *,
        interval: float = 15.0,
        connect_timeout: float = 5.0,
        read_timeout: float = 10.0,
    ) -> None:
        self._custom = CustomObjectsApi(api)
        self.store = store
        self._views = views
        self._timeout = (connect_timeout, read_timeout)
        self.seconds: float | None = None
        """How long the last successful poll took (the list, its parsing and the store's update)."""
        self.sampled = 0
        options = LoopOptions(
            "rulesched-pod-metrics",
            interval=interval,
            backoff=Backoff(interval, interval),
            describe=describe_failure,
            on_change=self._log_change,
            join_timeout=connect_timeout + read_timeout + 1.0,
        )
        self.loop = BackgroundLoop(self._poll, options)

    def poll(self) -> bool:
        """Poll once now (the thread does this every interval); True when it worked."""
        return self.loop.run_once() == "ok"

    def _poll(self) -> Outcome:
        if time.time() < self.store.preferred_until:
            return "ok"  # a MetricSource's podUsage answers: one kind of sample in a workload's window
        started = time.perf_counter()
        with api_errors():
            response: Any = self._custom.list_cluster_custom_object(
                "metrics.k8s.io", "v1beta1", "pods", _preload_content=False, _request_timeout=self._timeout
            )
        try:
            data = response.data
        finally:
            response.release_conn()
        self.sampled = record_usage(self.store, pod_usage(data), self._views())
        self.seconds = time.perf_counter() - started
        return "ok"

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def _log_change(self, before: LoopStatus, after: LoopStatus) -> None:
        if after.state == "ok":
            state = "is back" if before.state == "failing" else "answers"
            log.info("pod metrics %s: %d workloads learnt", state, self.store.size())
        else:
            log.warning("pod metrics unavailable (%s): estimates keep what they learnt", after.last_error)
