"""Where the usage estimates come from, as the settings say: the usage store, fed by metrics-server's pod
metrics (polled) or a PodMetricsList file, and by a MetricSource's `podUsage` when one declares it (polled
with the MetricSources, preferred while it answers), and tied to the pod source so that `recent.estimates` counts
each placed pod with its estimate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rulesched.cluster.pods.index import FilePodSource, PodIndex, PodSource
from rulesched.cluster.sources import items_of
from rulesched.cluster.usage.store import FilePodMetrics, UsageOptions, UsageStore
from rulesched.rules.estimate import Fallback
from rulesched.settings import Settings

if TYPE_CHECKING:
    from rulesched.cluster.kube.access import KubeAccess
    from rulesched.cluster.metrics.prometheus import PrometheusPollers
    from rulesched.cluster.usage.prometheus_pods import PodUsageFeed

METRICS_SERVER, PROMETHEUS = "metrics-server", "prometheus"
"""The sources of the pods' usage whose polls are timed (`rulesched_usage_poll_seconds{source}`)."""


class UsageFeed(Protocol):
    """What feeds the store: `seconds`, the last poll's duration (None: none timed)."""

    seconds: float | None

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class Estimates:
    """The usage store the estimates are read from, and what feeds it (None: nothing, the fallback only)."""

    store: UsageStore
    feed: UsageFeed | None = None
    polled: str | None = None
    """The source `feed` polls (`METRICS_SERVER`); None when it is not polled (a file, read once)."""
    pod_usage: PodUsageFeed | None = None
    """A MetricSource's `podUsage`, polled with the MetricSources into the store, when the estimates use it."""

    def poll_seconds(self) -> dict[str, float | None]:
        """How long each source's last poll of the pods' usage took (list or queries, parse and record), by
        source: metrics-server while its pod metrics are polled, Prometheus while a MetricSource declares
        `podUsage`; None before a source's first poll."""
        seconds: dict[str, float | None] = {}
        if self.feed is not None and self.polled is not None:
            seconds[self.polled] = self.feed.seconds
        pod_usage = self.pod_usage
        if pod_usage is not None and pod_usage.polling:
            seconds[PROMETHEUS] = pod_usage.poll_seconds()
        return seconds

    def start(self) -> None:
        if self.feed is not None:
            self.feed.start()

    def stop(self) -> None:
        if self.feed is not None:
            self.feed.stop()


def _index(pods: PodSource | None) -> PodIndex | None:
    """The index behind a pod source (a file source is one; a pod cache holds one)."""
    if isinstance(pods, PodIndex):
        return pods
    index = getattr(pods, "index", None)
    return index if isinstance(index, PodIndex) else None


def build_estimates(
    settings: Settings,
    access: KubeAccess | None,
    pods: PodSource | None,
    parts: list[str],
    prometheus: PrometheusPollers | None = None,
) -> Estimates:
    """The store, its feed as the settings ask, and the pod source's estimator; described in `parts`. With
    `prometheus` (the MetricSources polled), a MetricSource's `podUsage` feeds the store too."""
    options = UsageOptions(settings.usage_window, settings.usage_quantile, settings.usage_workloads)
    store = UsageStore(options, Fallback(settings.usage_fallback, settings.usage_fallback_factor))
    index = _index(pods)
    feed: UsageFeed | None = None
    polled: str | None = None
    pod_usage: PodUsageFeed | None = None
    if index is not None:
        index.estimator = store.estimate
    if settings.pod_metrics_file is not None:
        feed = FilePodMetrics(settings.pod_metrics_file, store, index.views() if index is not None else [])
        parts.append(f"pod usage from {settings.pod_metrics_file}")
        if isinstance(pods, FilePodSource):  # its pods were read before the store knew their usage
            pods.replace(items_of(pods.path, "PodList"))
    elif _polls(settings, access, index):
        from rulesched.cluster.usage.pod_metrics import PodMetricsPoller

        assert access is not None
        assert index is not None
        feed = PodMetricsPoller(
            access.api, store, index.views, interval=settings.metrics_interval, max_bytes=settings.pod_metrics_max_bytes
        )
        polled = METRICS_SERVER
        parts.append(f"pod usage from metrics-server every {settings.metrics_interval:g}s")
    if prometheus is not None and index is not None:
        from rulesched.cluster.usage.prometheus_pods import PodUsageFeed

        # Not in the description: whether a MetricSource declares podUsage changes with the rules (/rules says).
        prometheus.pod_usage = pod_usage = PodUsageFeed(store, index.views, settings.max_pods)
    return Estimates(store, feed, polled, pod_usage)


def _polls(settings: Settings, access: KubeAccess | None, index: PodIndex | None) -> bool:
    """Whether pod metrics are polled: on, or auto with a cluster and pods from it (not from a file)."""
    if settings.pod_metrics == "off" or access is None or index is None:
        return False
    return settings.pod_metrics == "on" or settings.pods_file is None
