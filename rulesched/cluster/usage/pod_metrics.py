"""The pods' usage from metrics-server (`pods.metrics.k8s.io`), polled beside the node metrics: it feeds the
usage store (`cluster/usage/store.py`) the estimates come from.

Every `interval` seconds a thread (a `cluster/loop.py` loop) lists `/apis/metrics.k8s.io/v1beta1/pods`,
finds each sampled pod's workload among the pods the pod source knows (by namespace and name: a
PodMetrics names its pod, not its owner), and records one poll in the store. A failed poll only means no
new samples: the store keeps what it learnt, and polling goes on at the usual pace. While a MetricSource's
`podUsage` answers (cluster/usage/prometheus_pods.py), the polls give way to it and list nothing.

metrics-server answers the whole list at once (it serves no `limit`/`continue` pages), so the read is
bounded in bytes (`--pod-metrics-max-bytes`), as the Prometheus path is: a larger answer fails the poll
while it arrives, before anything is decoded, and its connection is closed rather than read to the end.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kubernetes.client import CustomObjectsApi

from rulesched.cluster.kube.access import discard
from rulesched.cluster.kube.errors import api_errors
from rulesched.cluster.loop import BackgroundLoop, Backoff, LoopOptions, LoopStatus, Outcome
from rulesched.cluster.metrics.metrics_server import describe_failure
from rulesched.cluster.usage.pod_metrics_wire import pod_usage
from rulesched.cluster.usage.store import UsageStore, Views, record_usage
from rulesched.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES: int = Settings.model_fields["pod_metrics_max_bytes"].default
_CHUNK = 1024 * 1024


class AnswerTooLargeError(Exception):
    """metrics-server's PodMetricsList is larger than the bound; the message names the setting."""


def read_bounded(response: Any, most: int) -> bytes:
    """The body of a raw (unread) response, decompressed, at most `most` bytes; AnswerTooLargeError past that, its
    connection closed (a half-read body cannot be reused)."""
    declared = response.headers.get("Content-Length")
    body = bytearray()
    try:
        if declared is not None and declared.isdigit() and int(declared) > most:
            raise AnswerTooLargeError(
                f"the PodMetricsList has {declared} bytes, more than --pod-metrics-max-bytes={most}"
            )
        for chunk in response.stream(_CHUNK, decode_content=True):
            body += chunk
            if len(body) > most:
                raise AnswerTooLargeError(f"the PodMetricsList is larger than --pod-metrics-max-bytes={most} bytes")
    except BaseException:
        discard(response)
        raise
    response.release_conn()
    return bytes(body)


class PodMetricsPoller:
    """Polls `pods.metrics.k8s.io` into a `UsageStore`; `seconds` is what the last poll took."""

    def __init__(
        self,
        api: Any,
        store: UsageStore,
        views: Views,
        *,
        interval: float = 15.0,
        timeouts: tuple[float, float] = (5.0, 10.0),
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        """`timeouts`: seconds to connect, and for each read."""
        self._custom = CustomObjectsApi(api)
        self.max_bytes = max_bytes
        self.store = store
        self._views = views
        self._timeout = timeouts
        self.seconds: float | None = None
        """How long the last successful poll took (the list, its parsing and the store's update)."""
        self.sampled = 0
        options = LoopOptions(
            "rulesched-pod-metrics",
            interval=interval,
            backoff=Backoff(interval, interval),
            describe=describe_failure,
            on_change=self._log_change,
            join_timeout=sum(timeouts) + 1.0,
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
        data = read_bounded(response, self.max_bytes)
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
