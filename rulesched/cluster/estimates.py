"""Where the usage estimates come from, as the settings say: the usage store, fed by metrics-server's pod
metrics (polled) or a PodMetricsList file, and by a MetricSource's `podUsage` when one declares it (polled
with the MetricSources, preferred while it answers), and tied to the pod source so that `recent.estimates` counts
each placed pod with its estimate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rulesched.cluster.pods import FilePodSource, PodIndex, PodSource
from rulesched.cluster.sources import items_of
from rulesched.cluster.usage import FilePodMetrics, UsageOptions, UsageStore
from rulesched.rules.estimate import Fallback
from rulesched.settings import Settings

if TYPE_CHECKING:
    from rulesched.cluster.kube import KubeAccess
    from rulesched.cluster.prometheus import PrometheusPollers


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

    def poll_seconds(self) -> float | None:
        """How long the last poll of the pods' usage took; None before one (or without a feed)."""
        return self.feed.seconds if self.feed is not None else None

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
    if index is not None:
        index.estimator = store.estimate
    if settings.pod_metrics_file is not None:
        feed = FilePodMetrics(settings.pod_metrics_file, store, index.views() if index is not None else [])
        parts.append(f"pod usage from {settings.pod_metrics_file}")
        if isinstance(pods, FilePodSource):  # its pods were read before the store knew their usage
            pods.replace(items_of(pods.path, "PodList"))
    elif _polls(settings, access, index):
        from rulesched.cluster.pod_metrics import PodMetricsPoller

        assert access is not None
        assert index is not None
        feed = PodMetricsPoller(access.api, store, index.views, interval=settings.metrics_interval)
        parts.append(f"pod usage from metrics-server every {settings.metrics_interval:g}s")
    if prometheus is not None and index is not None:
        from rulesched.cluster.prometheus_pods import PodUsageFeed

        # Not in the description: whether a MetricSource declares podUsage changes with the rules (/rules says).
        prometheus.pod_usage = PodUsageFeed(store, index.views, settings.max_pods)
    return Estimates(store, feed)


def _polls(settings: Settings, access: KubeAccess | None, index: PodIndex | None) -> bool:
    """Whether pod metrics are polled: on, or auto with a cluster and pods from it (not from a file)."""
    if settings.pod_metrics == "off" or access is None or index is None:
        return False
    return settings.pod_metrics == "on" or settings.pods_file is None
