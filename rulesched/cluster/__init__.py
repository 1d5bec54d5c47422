"""Cluster state: where nodes and metrics come from (files or a live cluster) and the node contexts.

This package only reads the cluster: every write is in `rulesched.writes`, which stands on it. A binder
(`--enable-bind`) is made by a function the server gives `build_cluster` (`bind`), so that the Cluster it
builds carries one without this package knowing the writer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rulesched.cluster.metrics.custom import CustomValues
from rulesched.cluster.pods.index import FilePodSource, NamespaceSource, PodIndex, PodSource
from rulesched.cluster.pods.namespaces import FileNamespaceSource
from rulesched.cluster.pods.placement_view import PlacementViews
from rulesched.cluster.sources import Binder, FileMetricsSource, FileNodeSource, MetricsSource, NodeSource, items_of
from rulesched.settings import Settings

if TYPE_CHECKING:
    from rulesched.cluster.kube.access import KubeAccess, KubeEnvironment
    from rulesched.cluster.metrics.prometheus import PrometheusPollers
    from rulesched.cluster.usage.estimates import Estimates

log = logging.getLogger(__name__)


@dataclass
class Cluster:
    """The sources the extender reads; any may be None (no cluster, no metrics, no binding)."""

    nodes: NodeSource | None
    metrics: MetricsSource | None
    binder: Binder | None
    description: str
    access: KubeAccess | None = None
    """The API client behind the live sources, closed by stop(); None without a cluster."""
    pods: PodSource | None = None
    namespaces: NamespaceSource | None = None
    custom: CustomValues | None = None
    """`metrics.custom`: from the metrics file, or filled by `prometheus`; None when neither."""
    prometheus: PrometheusPollers | None = None
    """The MetricSources' query pollers (configured with each rule book); None when not polling."""
    estimates: Estimates | None = None
    """The usage store `estimate` and `recent.estimates` read, and its feed (pod metrics)."""
    placements: PlacementViews | None = None
    """The descheduler's views of the live pods (`--deschedule` with a cluster); None otherwise."""

    def _sources(
        self,
    ) -> list[NodeSource | MetricsSource | PodSource | NamespaceSource | PrometheusPollers | Estimates]:
        sources = (self.nodes, self.metrics, self.pods, self.namespaces, self.prometheus, self.estimates)
        return [s for s in sources if s is not None]

    def start(self) -> None:
        for source in self._sources():
            source.start()

    def stop(self) -> None:
        for source in self._sources():
            if source is not None:
                source.stop()
        if self.access is not None:
            self.access.close()


MakeBinder = Callable[[Any], Binder]
"""Makes the Binder of `--enable-bind` from the API client (`writes.bind.ApiBinder`)."""


def build_cluster(settings: Settings, env: KubeEnvironment | None = None, *, bind: MakeBinder | None = None) -> Cluster:
    """The sources `settings` ask for: a live cluster, offline files, or none at all (full mode only).

    A file wins over the cluster for what it provides (`--metrics` is taken as current). `env` says where
    credentials are looked for (default: this process's environment, home directory and service account);
    `bind` makes the binder `--enable-bind` asks for, given the API client (without it, no binding).
    Raises SourceError (ClusterConfigError for credentials) when something asked for cannot be used.
    """
    nodes: NodeSource | None = FileNodeSource(settings.nodes_file) if settings.nodes_file else None
    metrics: MetricsSource | None = FileMetricsSource(settings.metrics_file) if settings.metrics_file else None
    pods: PodSource | None = None
    if settings.pods_file:
        pods = FilePodSource(settings.pods_file, recent_seconds=settings.recent_seconds, max_pods=settings.max_pods)
    namespaces: NamespaceSource | None = None
    if settings.namespaces_file:
        namespaces = FileNamespaceSource(settings.namespaces_file)
    access = None
    if settings.cluster != "off":
        # Imported only when a cluster may be used: the kubernetes client takes a third of a second and
        # about 30 MB to import, and the offline tools and `--cluster off` never need it.
        from rulesched.cluster.kube.access import cluster_access

        access = cluster_access(settings, env)
    parts = [access.describe() if access else "no cluster"]
    binder: Binder | None = None
    if access is not None:
        nodes, metrics = _live_sources(settings, access, nodes, metrics, parts)
        binder = _binder(settings, access, bind, parts)
    elif settings.enable_bind:
        parts.append("no binding (--enable-bind needs a cluster)")
    if settings.nodes_file:
        parts.append(f"nodes from {settings.nodes_file}")
    elif nodes is None:
        parts.append("no node source (full mode only)")
    if settings.metrics_file:
        parts.append(f"metrics from {settings.metrics_file}")
    elif metrics is None:
        parts.append("no metrics")
    for path, what in ((settings.pods_file, "pods"), (settings.namespaces_file, "namespaces")):
        if path:
            parts.append(f"{what} from {path}")
    placements = _file_placements(settings)
    if access is not None:
        pods, namespaces, live = _live_pods(settings, access, pods, namespaces, parts)
        placements = placements or live
    custom, prometheus = _custom_values(settings, metrics, parts)
    from rulesched.cluster.usage.estimates import build_estimates

    estimates = build_estimates(settings, access, pods, parts, prometheus)
    return Cluster(
        placements=placements,
        nodes=nodes,
        metrics=metrics,
        binder=binder,
        description=", ".join(parts),
        access=access,
        pods=pods,
        namespaces=namespaces,
        custom=custom,
        prometheus=prometheus,
        estimates=estimates,
    )


def polls_prometheus(settings: Settings) -> bool:
    """Whether the MetricSources' queries are polled: on, or auto with a cluster possible and no metrics file
    (offline, the file's `custom` values stand in for Prometheus)."""
    if settings.prometheus == "auto":
        return settings.cluster != "off" and settings.metrics_file is None
    return settings.prometheus == "on"


def _custom_values(
    settings: Settings, metrics: MetricsSource | None, parts: list[str]
) -> tuple[CustomValues | None, PrometheusPollers | None]:
    """Where `metrics.custom` comes from: the MetricSources' queries, polled, or the metrics file."""
    if polls_prometheus(settings):
        from rulesched.cluster.metrics.prometheus import PrometheusPollers

        parts.append("custom metrics from the MetricSources' Prometheus queries")
        values = CustomValues()
        return values, PrometheusPollers(values)
    custom = metrics.custom if isinstance(metrics, FileMetricsSource) else None
    if custom is not None:
        parts.append(f"custom metrics from {settings.metrics_file}")
    else:
        parts.append("MetricSource queries not polled (--prometheus on polls them)")
    return custom, None


def _file_placements(settings: Settings) -> PlacementViews | None:
    """The descheduler's views of the pods of `--pods` (`--deschedule dry-run` offline); None without either."""
    if settings.pods_file is None or settings.deschedule == "off":
        return None

    placements = PlacementViews(settings.max_pods)
    placements.replace(items_of(settings.pods_file, "PodList"))
    return placements


def _live_pods(
    settings: Settings,
    access: KubeAccess,
    pods: PodSource | None,
    namespaces: NamespaceSource | None,
    parts: list[str],
) -> tuple[PodSource | None, NamespaceSource | None, PlacementViews | None]:
    """The API-backed pod and namespace caches for what no file provides, described in `parts`, and the
    descheduler's views of the pods beside them (`--deschedule`)."""
    from rulesched.cluster.pods.podcache import NamespaceCache, PodCache

    placements = None
    if pods is None:
        index = PodIndex(
            recent_seconds=settings.recent_seconds,
            max_pods=settings.max_pods,
            max_pending=settings.max_pending_placements,
        )
        placements = PlacementViews(settings.max_pods) if settings.deschedule != "off" else None
        pods = PodCache(access.api, index, placements)
        parts.append("pods from the API (list+watch)")
    if namespaces is None:
        namespaces = NamespaceCache(access.api, max_namespaces=settings.max_namespaces)
        parts.append("namespaces from the API (list+watch)")
    return pods, namespaces, placements


def _live_sources(
    settings: Settings, access: KubeAccess, nodes: NodeSource | None, metrics: MetricsSource | None, parts: list[str]
) -> tuple[NodeSource | None, MetricsSource | None]:
    """The API-backed sources for what no file provides, described in `parts`."""
    from rulesched.cluster.metrics.metrics_server import MetricsServerSource
    from rulesched.cluster.nodes.nodecache import NodeCache, NodeCacheOptions

    if nodes is None:
        options = NodeCacheOptions(
            fetch_timeout=settings.node_fetch_timeout,
            unknown_ttl=settings.unknown_node_ttl,
            unknown_kept=settings.unknown_nodes_kept,
        )
        nodes = NodeCache(access.api, options)
        parts.append("nodes from the API (list+watch)")
    if metrics is None:
        metrics = MetricsServerSource(access.api, interval=settings.metrics_interval, max_age=settings.metrics_max_age)
        parts.append(f"metrics from metrics-server every {settings.metrics_interval:g}s")
    return nodes, metrics


def _binder(settings: Settings, access: KubeAccess, bind: MakeBinder | None, parts: list[str]) -> Binder | None:
    """The binder `--enable-bind` asks for, made by `bind` (the writer, given by the server), described in `parts`."""
    if not settings.enable_bind or bind is None:
        return None
    parts.append("binding through the API")
    return bind(access.api)
