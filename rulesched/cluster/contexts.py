"""Node contexts: each node's rule context, rebuilt only when the node or its metrics sample changes.

In names mode the nodes come from the node source; in full mode from the request itself. Either
way the metrics come from the metrics source, and a context is reused as long as the node's
resourceVersion and its metrics sample are the same.

The pods on a node come from the pod source (`pods`, `allocated`, `recent`): a pod event changes only
that node's context, and a node's `recent` counts the pods placed after its metrics sample.

Custom metric values (`metrics.custom`, `cluster/metrics/custom.py`) are keyed by node name or address: a poll
that changes some keys forgets only the contexts of the nodes with those names or addresses.

Names mode runs for every candidate of every request, so it does not ask the sources about each node:
contexts found current are kept by name until a source's generation says that node (or, for metrics,
any node) may have changed. An unchanged candidate is one dictionary lookup.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from rulesched.cluster.metrics.custom import CustomValues
from rulesched.cluster.pods.index import PodSource
from rulesched.cluster.sources import MetricsSource, NodeSource
from rulesched.rules.context import (
    EMPTY_PODS,
    NO_CUSTOM,
    NodeContext,
    NodeCustom,
    NodePods,
    NodeUsage,
    node_addresses,
    node_context,
    node_name,
    with_custom,
    with_sample,
)

_MAX_CACHED = 20_000


class NodeContexts:
    """Builds and caches NodeContexts from a node source (names mode) and a metrics source."""

    def __init__(
        self,
        nodes: NodeSource | None,
        metrics: MetricsSource | None,
        pods: PodSource | None = None,
        custom: CustomValues | None = None,
    ) -> None:
        self.nodes = nodes
        self.metrics = metrics
        self.pods = pods
        self.custom = custom
        self._custom_generation = custom.generation() if custom else 0
        self._addresses: dict[str, str] = {}
        """A node address → the node's name, for every context built: custom values may be keyed by address."""
        self._checked: dict[str, int] = {}
        """The custom values' generation each node's were last looked up at (a lookup costs a few µs)."""
        self._pod_generation = pods.generation() if pods else 0
        self._cache: dict[str, NodeContext] = {}
        self._lock = threading.Lock()
        self._current: dict[str, NodeContext] = {}
        """Names mode: contexts known current at the sources' generations below."""
        self._stale: dict[str, None] = {}
        """Names mode: the names whose contexts new metrics samples made stale (`take_stale`), in order."""
        self._node_generation = nodes.generation() if nodes else 0
        self._metrics_generation: Hashable = metrics.generation() if metrics else 0

    def context(self, node: Mapping[str, Any], name: str | None = None) -> NodeContext:
        """The context of a node object, reused while neither the node, its metrics nor its custom values changed."""
        name = name if name is not None else node_name(node)
        usage = self.metrics.usage(name) if self.metrics else None
        pods = self.pods.version_of(name) if self.pods else 0
        cached = self._cache.get(name)
        custom = self._custom_of(node, name, cached)
        if cached is not None and cached.key.pods == pods and cached.key.custom == custom:
            # The sources hand out the same objects until something changes: identity answers most
            # calls without comparing versions (this runs for every candidate of every request).
            if cached.node is node and cached.key.usage is usage:
                return cached
            version = (node.get("metadata") or {}).get("resourceVersion")
            if version and cached.key.version == version and cached.key.usage == usage:
                return cached
        same_object = cached is not None and cached.node is node and cached.key.pods == pods
        if same_object and cached is not None and cached.key.usage is usage:
            built = with_custom(cached, custom)  # only the custom values changed (a Prometheus poll)
        elif same_object and cached is not None:
            built = with_sample(cached, usage, self.node_pods(name, usage), custom=custom)  # a new sample
        else:
            built = node_context(node, usage, pods=self.node_pods(name, usage), custom=custom)
        if (node.get("metadata") or {}).get("resourceVersion"):  # without one, never reused
            with self._lock:
                if len(self._cache) >= _MAX_CACHED:
                    self._cache.clear()
                self._cache[name] = built
        return built

    def _custom_of(self, node: Mapping[str, Any], name: str, cached: NodeContext | None) -> NodeCustom:
        """The node's custom values, looked up by name then by address (remembered for invalidation); the
        cached context's when no custom value changed since it was looked up for this node object."""
        if self.custom is None:
            return NO_CUSTOM
        generation = self.custom.generation()
        if cached is not None and cached.node is node and self._checked.get(name) == generation:
            custom: NodeCustom = cached.key.custom
            return custom
        addresses = node_addresses(node)
        if len(self._addresses) >= 4 * _MAX_CACHED:
            self._addresses.clear()
        if len(self._checked) >= _MAX_CACHED:
            self._checked.clear()
        for address in addresses:
            self._addresses[address] = name
        self._checked[name] = generation
        return self.custom.custom(name, addresses)

    def custom_ages(self, context: NodeContext) -> dict[str, float | None]:
        """Seconds since each custom value of the node was received (for explain)."""
        if self.custom is None:
            return {}
        return self.custom.ages(context.name, node_addresses(context.node))

    def node_pods(self, name: str, usage: NodeUsage | None) -> NodePods:
        """The pods on the node, `recent` counted from its metrics sample's time."""
        if self.pods is None:
            return EMPTY_PODS
        return self.pods.node_pods(name, usage.timestamp if usage is not None else None)

    def last_seen(self, name: str) -> Mapping[str, Any] | None:
        """The node object of the latest version of `name` a context was made for (full mode's preempt)."""
        cached = self._cache.get(name)
        return cached.node if cached is not None else None

    def for_objects(self, nodes: Sequence[Mapping[str, Any]]) -> list[NodeContext]:
        """Full mode: contexts of the node objects the request carried."""
        return [self.context(n) for n in nodes]

    def for_names(self, names: Sequence[str]) -> tuple[list[NodeContext], list[str]]:
        """Names mode: contexts of the nodes the source knows, and the names it does not."""
        current = self._current_contexts()
        known = list(map(current.get, names))
        if all(known):  # contexts are always true: quicker than `None not in known`
            return known, []  # type: ignore[return-value]  # no None in it: checked just above
        found: list[NodeContext] = []
        unknown: list[str] = []
        for name, context in zip(names, known, strict=True):
            context = context or self._by_name(name, current)
            if context is None:
                unknown.append(name)
            else:
                found.append(context)
        return found, unknown

    def _current_contexts(self) -> dict[str, NodeContext]:
        """The contexts still current: those of nodes changed since the last request are forgotten."""
        metrics = self.metrics.generation() if self.metrics else 0
        if metrics != self._metrics_generation:
            self._stale.update(dict.fromkeys(self._current))
            if len(self._stale) > _MAX_CACHED:  # nobody takes them (no refresh ahead): keep the latest only
                self._stale = dict.fromkeys(self._current)
            self._current, self._metrics_generation = {}, metrics  # samples come and age together
        if self.nodes is not None:
            generation = self.nodes.generation()
            if generation != self._node_generation:
                self._forget(self.nodes.changed_since(self._node_generation))
                self._node_generation = generation
        if self.pods is not None:
            generation = self.pods.generation()
            if generation != self._pod_generation:
                self._forget(self.pods.changed_since(self._pod_generation))
                self._pod_generation = generation
        if self.custom is not None:
            generation = self.custom.generation()
            if generation != self._custom_generation:
                changed = self.custom.changed_since(self._custom_generation)
                addresses = self._addresses
                self._forget(None if changed is None else changed | {addresses.get(k, k) for k in changed})
                self._custom_generation = generation
        if len(self._current) >= _MAX_CACHED:
            self._current = {}
        return self._current

    def _forget(self, changed: set[str] | None) -> None:
        """Forget the current contexts of the nodes `changed` names (None: of every node)."""
        if changed is None or len(changed) >= len(self._current):
            self._current = {}
        else:
            for name in changed:
                self._current.pop(name, None)

    def take_stale(self) -> list[str]:
        """The names whose contexts a new metrics sample made stale since the last call (at most
        the contexts kept), not asked about since; forgotten once taken."""
        current = self._current_contexts()
        stale, self._stale = self._stale, {}
        return [name for name in stale if name not in current]

    def current_names(self) -> list[str]:
        """The names whose contexts are kept current (names mode)."""
        return list(self._current_contexts())

    def _by_name(self, name: str, current: dict[str, NodeContext]) -> NodeContext | None:
        node = self.nodes.get(name) if self.nodes else None
        if node is None:
            return None
        # Kept even without a resourceVersion: the source's generation says when the node changes. Keyed
        # by the context's own name string, which its verdicts carry too: one string to read, not two.
        context = self.context(node, name)
        current[context.name if context.name == name else name] = context
        return context
