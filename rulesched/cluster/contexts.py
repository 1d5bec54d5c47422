"""Node contexts: each node's rule context, rebuilt only when the node or its metrics sample changes.

In names mode the nodes come from the node source; in full mode from the request itself. Either
way the metrics come from the metrics source, and a context is reused as long as the node's
resourceVersion and its metrics sample are the same.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from rulesched.cluster.sources import MetricsSource, NodeSource
from rulesched.rules.context import NodeContext, node_context, node_name

_MAX_CACHED = 20_000


class NodeContexts:
    """Builds and caches NodeContexts from a node source (names mode) and a metrics source."""

    def __init__(self, nodes: NodeSource | None, metrics: MetricsSource | None) -> None:
        self.nodes = nodes
        self.metrics = metrics
        self._cache: dict[str, NodeContext] = {}
        self._lock = threading.Lock()

    def context(self, node: Mapping[str, Any], name: str | None = None) -> NodeContext:
        """The context of a node object, reused while neither the node nor its metrics changed."""
        name = name if name is not None else node_name(node)
        usage = self.metrics.usage(name) if self.metrics else None
        cached = self._cache.get(name)
        if cached is not None:
            # The sources hand out the same objects until something changes: identity answers most
            # calls without comparing versions (this runs for every candidate of every request).
            if cached.node is node and cached.key[2] is usage:
                return cached
            version = (node.get("metadata") or {}).get("resourceVersion")
            if version and cached.key[1] == version and cached.key[2] == usage:
                return cached
        built = node_context(node, usage)
        if (node.get("metadata") or {}).get("resourceVersion"):  # without one, never reused
            with self._lock:
                if len(self._cache) >= _MAX_CACHED:
                    self._cache.clear()
                self._cache[name] = built
        return built

    def for_objects(self, nodes: Sequence[Mapping[str, Any]]) -> list[NodeContext]:
        """Full mode: contexts of the node objects the request carried."""
        return [self.context(n) for n in nodes]

    def for_names(self, names: Sequence[str]) -> tuple[list[NodeContext], list[str]]:
        """Names mode: contexts of the nodes the source knows, and the names it does not."""
        known: list[NodeContext] = []
        unknown: list[str] = []
        get = self.nodes.get if self.nodes else _nothing
        usage = self.metrics.usage if self.metrics else _nothing
        cache = self._cache
        for name in names:
            node = get(name)
            if node is None:
                unknown.append(name)
                continue
            # `context`'s identity check, inlined: this loop runs for every candidate of every request.
            cached = cache.get(name)
            if cached is not None and cached.node is node and cached.key[2] is usage(name):
                known.append(cached)
            else:
                known.append(self.context(node, name))
        return known, unknown


def _nothing(name: str) -> None:
    return None
