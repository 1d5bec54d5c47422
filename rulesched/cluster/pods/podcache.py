"""Live pods and namespaces: list+watch caches with the node cache's resilience.

`PodCache` keeps the assigned, non-terminal pods of the cluster (kube-scheduler's informer selects
`status.phase!=Succeeded,status.phase!=Failed`; this cache also selects `spec.nodeName!=`, since only
assigned pods count on a node) in a `PodIndex`, as trimmed views, and with `--deschedule` the descheduler's
views of them (`placement_view.PlacementViews`). `NamespaceCache` keeps every
Namespace trimmed to what `namespaceObject` shows. Both reuse `NodeCache`'s thread: paged list, watch
with bookmarks, a 410 answered by a relist that replaces the view in one swap, capped backoff while the
API is away (readers keep the last view).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from rulesched.cluster.loop import BackgroundLoop, LoopStatus
from rulesched.cluster.nodes.nodecache import NodeCache, NodeCacheOptions
from rulesched.cluster.pods.index import PodIndex
from rulesched.cluster.pods.namespaces import namespaces_by_name
from rulesched.cluster.pods.placement_view import PlacementViews
from rulesched.rules.pod_values import namespace_view

log = logging.getLogger(__name__)

POD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
"""Assigned (`spec.nodeName!=`) and non-terminal (kube-scheduler's own pod informer selector) pods."""


class _ListWatchCache(NodeCache):
    """NodeCache's list+watch loop over another kind of object; subclasses say how to list and store."""

    what = "objects"

    def __init__(self, api: Any, **options: Any) -> None:
        super().__init__(api, NodeCacheOptions(**options))
        self.loop = BackgroundLoop(self._round, replace(self.loop._options, name=f"rulesched-{self.what}-cache"))

    def _store(self, items: Iterable[Mapping[str, Any]]) -> int:
        """Replace everything with `items` (a list); how many are kept."""
        raise NotImplementedError

    def get(self, name: str) -> Mapping[str, Any] | None:
        return None

    def fetch(self, name: str) -> Mapping[str, Any] | None:
        return None

    def _relist(self) -> None:
        items: list[Mapping[str, Any]] = []
        token: str | None = None
        while True:
            page = self._list_page(token)
            items.extend(i for i in page.get("items") or [] if isinstance(i, dict))
            metadata = page.get("metadata") or {}
            token = metadata.get("continue") or None
            if token is None:
                break
        rv = str(metadata.get("resourceVersion") or "")
        with self._lock:
            kept = self._store(items)  # one swap: readers see the old or the new view, never a mix
            self._rv = rv
        self._relists += 1
        self.loop.succeeded()
        state = "synced" if not self._synced.is_set() else "relisted"
        log.info("%s cache %s: %d %s at resourceVersion %s", self.what, state, kept, self.what, rv)
        self._synced.set()

    def _log_change(self, before: LoopStatus, after: LoopStatus) -> None:
        what = self.what
        if after.state == "failing":
            log.warning(
                "%s cache: Kubernetes API failing (%s); serving the last known %s", what, after.last_error, what
            )
        elif before.state == "failing":
            log.info("%s cache: Kubernetes API reachable again (%d %s)", what, self.size(), what)


class PodCache(_ListWatchCache):
    """A PodSource backed by the API: the assigned non-terminal pods, list+watch, kept in a `PodIndex`."""

    what = "pods"

    def __init__(self, api: Any, index: PodIndex, placements: PlacementViews | None = None, **options: Any) -> None:
        super().__init__(api, **options)
        self.index = index
        self.placements = placements
        """The descheduler's views of the same pods (`--deschedule`), kept beside the rules' views."""

    def _call(self, **kwargs: Any) -> Any:
        return self._core.list_pod_for_all_namespaces(field_selector=POD_SELECTOR, **kwargs)

    def _store(self, items: Iterable[Mapping[str, Any]]) -> int:
        self.index.replace(items)
        if self.placements is not None:
            self.placements.replace(items)
        return self.index.size()

    def _event(self, kind: str, obj: Mapping[str, Any]) -> None:
        self.index.apply(kind, obj)
        if self.placements is not None:
            self.placements.apply(kind, obj)

    # -- PodSource, by the index --------------------------------------------------------------------------

    def size(self) -> int:
        return self.index.size()

    def node_pods(self, node: str, sampled: Any) -> Any:
        return self.index.node_pods(node, sampled)

    def version_of(self, node: str) -> Any:
        return self.index.version_of(node)

    def generation(self) -> int:
        return self.index.generation()

    def changed_since(self, generation: int) -> set[str] | None:
        return self.index.changed_since(generation)

    def reserve(self, pod: Mapping[str, Any], node: str) -> None:
        self.index.reserve(pod, node)

    def forget(self, pod: Mapping[str, Any]) -> None:
        self.index.forget(pod)

    def ranked(self, pod: Mapping[str, Any]) -> None:
        self.index.ranked(pod)


class NamespaceCache(_ListWatchCache):
    """A NamespaceSource backed by the API: every Namespace, trimmed, list+watch. At most `max_namespaces`."""

    what = "namespaces"

    def __init__(self, api: Any, *, max_namespaces: int = 100_000, **options: Any) -> None:
        super().__init__(api, **options)
        self._namespaces: dict[str, Mapping[str, Any]] = {}
        self._max = max_namespaces

    def _call(self, **kwargs: Any) -> Any:
        return self._core.list_namespace(**kwargs)

    def _store(self, items: Iterable[Mapping[str, Any]]) -> int:
        found = namespaces_by_name(items)
        self._namespaces = dict(list(found.items())[: self._max])
        return len(self._namespaces)

    def _event(self, kind: str, obj: Mapping[str, Any]) -> None:
        view = namespace_view({}, obj)
        name = view["metadata"]["name"]
        if not name:
            return
        if kind == "DELETED":
            self._namespaces.pop(name, None)
        elif name in self._namespaces or len(self._namespaces) < self._max:
            self._namespaces[name] = view

    def get(self, name: str) -> Mapping[str, Any] | None:
        return self._namespaces.get(name)

    def size(self) -> int:
        return len(self._namespaces)
