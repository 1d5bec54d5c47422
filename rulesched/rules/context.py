"""The numbers rules read of a node, computed once: its allocatable and live usage, the pods on it.

A `NodeContext` is a frozen snapshot of one node (its object, allocatable resources, metrics and the
pods on it: `pods`, `allocated`, `recent`); it is rebuilt only when the node's resourceVersion, its
metrics sample or its pods change. What rules read of the pod itself is in `rules/pod_values.py`.
"""

from __future__ import annotations

import datetime
import enum
import functools
import hashlib
import pickle
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rulesched.rules.pod_values import namespace_view
from rulesched.rules.quantity import QuantityError, quantity_value


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One metrics sample of a node: CPU in cores, memory in bytes, and when it was taken."""

    cpu: float | None
    memory: float | None
    timestamp: datetime.datetime | None = None


@dataclass(frozen=True, slots=True)
class NodeCustom:
    """A node's custom metric values (`metrics.custom`, from MetricSource queries or a metrics file), by
    query name: only finite values, only fresh ones. Compared by value: equal values, same context."""

    values: Mapping[str, float] = field(default_factory=dict)


NO_CUSTOM = NodeCustom()


_ALLOCATED_ZERO: Mapping[str, float] = {"cpu": 0.0, "memory": 0.0}
_RECENT_ZERO: Mapping[str, float] = {"cpu": 0.0, "memory": 0.0}


def _recent_zero() -> dict[str, Any]:
    return {"count": 0.0, "requests": dict(_RECENT_ZERO), "estimates": dict(_RECENT_ZERO)}


@dataclass(frozen=True, slots=True, eq=False)
class NodePods:
    """What the rules see of the pods on one node: `pods` (trimmed views), `allocated` and `recent`."""

    pods: Sequence[Mapping[str, Any]] = field(default_factory=list)
    allocated: Mapping[str, float] = field(default_factory=lambda: {**_ALLOCATED_ZERO, "pods": 0.0})
    recent: Mapping[str, Any] = field(default_factory=_recent_zero)
    version: Hashable = 0
    """Changes whenever anything above changes (the node's entry in the pod source's change log)."""
    recent_uids: frozenset[str] = frozenset()
    """The uids of `pods` counted in `recent` (pending placements are counted but not in `pods`)."""
    recent_estimates: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """The estimate each pod of `recent_uids` was counted with in `recent.estimates`, by uid."""

    def without(self, uids: Collection[str]) -> NodePods:
        """These pods with the pods `uids` gone (preemption's victims): from `pods`, `allocated` and `recent`."""
        kept = [p for p in self.pods if _uid(p) not in uids]
        gone = [p for p in self.pods if _uid(p) in uids]
        allocated = total_requests(kept, _ALLOCATED_ZERO)
        allocated["pods"] = float(len(kept))
        count = float(self.recent.get("count", 0.0))
        requests: dict[str, float] = dict(self.recent.get("requests") or {})
        estimates: dict[str, float] = dict(self.recent.get("estimates") or {})
        for pod in gone:
            if _uid(pod) in self.recent_uids:
                count -= 1.0
                _subtract(requests, pod.get("requests") or {})
                _subtract(estimates, self.recent_estimates.get(_uid(pod)) or {})
        recent = {"count": count, "requests": requests, "estimates": estimates}
        left = self.recent_uids - set(uids)
        estimated = {uid: e for uid, e in self.recent_estimates.items() if uid in left}
        return NodePods(kept, allocated, recent, (self.version, tuple(sorted(uids))), left, estimated)


def _subtract(total: dict[str, float], gone: Mapping[str, float]) -> None:
    for name, value in gone.items():
        if name in total:
            total[name] -= value


def _uid(view: Mapping[str, Any]) -> str:
    return str((view.get("metadata") or {}).get("uid") or "")


def total_requests(views: Iterable[Mapping[str, Any]], zero: Mapping[str, float]) -> dict[str, float]:
    """The sum of the `requests` of pod views, with `zero`'s resources always present."""
    total = dict(zero)
    for view in views:
        for name, value in (view.get("requests") or {}).items():
            total[name] = total.get(name, 0.0) + value
    return total


def node_pods(
    views: Sequence[Mapping[str, Any]],
    recent: Sequence[Mapping[str, Any]],
    version: Hashable,
    estimates: Sequence[Mapping[str, float]] | None = None,
) -> NodePods:
    """The `NodePods` of a node with these pod views, of which (or beside which, when not yet seen
    bound) `recent` were placed after the node's metrics sample; `estimates`, one per pod of `recent`,
    are what each was expected to use (their requests when not given: the default fallback)."""
    allocated = total_requests(views, _ALLOCATED_ZERO)
    allocated["pods"] = float(len(views))
    recent_requests = total_requests(recent, _RECENT_ZERO)
    expected = list(estimates) if estimates is not None else [v.get("requests") or {} for v in recent]
    recent_estimates = {name: sum((float(e.get(name, 0.0)) for e in expected), 0.0) for name in _RECENT_ZERO}
    uids = frozenset(_uid(v) for v in recent) & frozenset(_uid(v) for v in views)
    by_uid = {_uid(v): {n: float(e.get(n, 0.0)) for n in _RECENT_ZERO} for v, e in zip(recent, expected, strict=True)}
    summary = {"count": float(len(recent)), "requests": recent_requests, "estimates": recent_estimates}
    return NodePods(list(views), allocated, summary, version, uids, {u: by_uid[u] for u in uids})


EMPTY_PODS = NodePods()


class Change(enum.Enum):
    """What changed from one context of a node to its next: what the fast path kept for the first still
    holds for the second as far as the change allows."""

    PODS = "pods"
    """Only the node's pods (`pods`, `allocated`, `recent`): what reads none of them holds."""
    SAMPLE = "sample"
    """Only the metrics sample (`metrics`, custom values included): what reads no `metrics` holds."""
    OTHER = "other"
    """The node itself (a new version, another node), or more than one of the above: nothing holds."""


class ContextKey(NamedTuple):
    """What a node context is made of: a newer context of the node differs in at least one part."""

    name: str
    version: Hashable
    """The node's resourceVersion (a string), or the `content_digest` of a node object that has none (bytes:
    never equal to a resourceVersion)."""
    usage: NodeUsage | None
    """The metrics sample (None: none yet)."""
    pods: Hashable
    """The version of the node's pods (`NodePods.version`)."""
    custom: NodeCustom
    """The custom metric values (`metrics.custom`)."""

    def change(self, newer: ContextKey) -> Change:
        """What changed from this context of the node to `newer`."""
        if self.name != newer.name or self.version != newer.version:
            return Change.OTHER
        if self.usage == newer.usage and self.custom == newer.custom:
            return Change.PODS
        return Change.SAMPLE if self.pods == newer.pods else Change.OTHER


@dataclass(frozen=True, slots=True, eq=False)
class NodeContext:
    """What the rules see of one node. `key` changes whenever anything in it changes.

    Compared and hashed by identity: contexts are cache entries, and what the fast engine derives from one
    (its engine values, its rules' results) is kept by the rule book's plan, keyed by the context."""

    name: str
    node: Mapping[str, Any]
    allocatable: Mapping[str, float]
    metrics: Mapping[str, Any]
    key: ContextKey
    pods: NodePods = field(default_factory=lambda: EMPTY_PODS)


def resource_numbers(resources: object) -> dict[str, float]:
    """A resource list (`{"cpu": "250m", "memory": "1Gi"}`) as numbers; invalid entries are skipped."""
    if not isinstance(resources, Mapping):
        return {}
    numbers: dict[str, float] = {}
    for name, value in resources.items():
        try:
            numbers[str(name)] = quantity_value(value)
        except QuantityError:
            continue
    return numbers


def _dig(obj: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def node_name(node: Mapping[str, Any]) -> str:
    name = _dig(node, "metadata", "name")
    return name if isinstance(name, str) else ""


def metrics_map(usage: NodeUsage | None, allocatable: Mapping[str, float], now: datetime.datetime) -> dict[str, Any]:
    """The `metrics` variable without `custom`: keys present only for what is known."""
    if usage is None:
        return {}
    metrics: dict[str, Any] = {}
    for resource, value in (("cpu", usage.cpu), ("memory", usage.memory)):
        if value is None:
            continue
        entry = {"usage": float(value)}
        capacity = allocatable.get(resource, 0.0)
        if capacity > 0:
            entry["utilization"] = float(value) / capacity
        metrics[resource] = entry
    if usage.timestamp is not None:
        metrics["age"] = max(0.0, (now - usage.timestamp).total_seconds())
    return metrics


def allocatable_numbers(resources: object) -> Mapping[str, float]:
    """`resource_numbers` of a node's allocatable, shared by the nodes that have the same (an instance
    type's): parsing quantities is most of the cost of a context, which every new metrics sample rebuilds.
    The map is shared, so it must not be changed."""
    if not isinstance(resources, Mapping):
        return {}
    try:
        return _allocatable(tuple(resources.items()))
    except TypeError:  # an unhashable value: not a quantity anyway
        return resource_numbers(resources)


@functools.lru_cache(maxsize=1024)
def _allocatable(items: tuple[tuple[Any, Any], ...]) -> Mapping[str, float]:
    return resource_numbers(dict(items))


def node_context(
    node: Mapping[str, Any],
    usage: NodeUsage | None,
    now: datetime.datetime | None = None,
    pods: NodePods = EMPTY_PODS,
    *,
    custom: NodeCustom = NO_CUSTOM,
) -> NodeContext:
    """The context of `node` with its metrics sample (or none), its pods (none by default) and its custom
    metric values (`metrics.custom`, always a map so that `has(metrics.custom.x)` can ask)."""
    allocatable = allocatable_numbers(_dig(node, "status", "allocatable"))
    metrics = metrics_map(usage, allocatable, now or datetime.datetime.now(datetime.UTC))
    metrics["custom"] = dict(custom.values)
    version = _dig(node, "metadata", "resourceVersion")
    identity = ContextKey(node_name(node), version if version else content_digest(node), usage, pods.version, custom)
    return NodeContext(
        name=node_name(node), node=node, allocatable=allocatable, metrics=metrics, key=identity, pods=pods
    )


def content_digest(node: Mapping[str, Any]) -> bytes:
    """What a node object without a resourceVersion is known by: a digest of all of it, so that two different
    bodies under one name never share a context's key (an object's `id` is reused once it is freed).

    Pickled rather than JSON-encoded, the cheaper of the two, and as safe: equal bytes are equal content, as
    unpickling is a function; equal content may give other bytes (another key order), which costs a cache
    miss, never a wrong answer. A node with a resourceVersion (every node kube-scheduler sends) never pays it."""
    return hashlib.blake2b(pickle.dumps(node, pickle.HIGHEST_PROTOCOL), digest_size=16).digest()


def with_custom(context: NodeContext, custom: NodeCustom) -> NodeContext:
    """`context` with other custom values and nothing else changed: a Prometheus poll rebuilds only this much
    (no quantities parsed again), so the first request after one is cheaper than after a metrics poll."""
    metrics = {**context.metrics, "custom": dict(custom.values)}
    key = context.key._replace(custom=custom)
    return NodeContext(context.name, context.node, context.allocatable, metrics, key, context.pods)


def with_sample(
    context: NodeContext,
    usage: NodeUsage | None,
    pods: NodePods,
    *,
    custom: NodeCustom = NO_CUSTOM,
    now: datetime.datetime | None = None,
) -> NodeContext:
    """The context of the same node object with a new metrics sample (and `pods`, whose `recent` counts
    from the sample's time, and `custom` values): `node_context`'s result, without parsing the node again."""
    metrics = metrics_map(usage, context.allocatable, now or datetime.datetime.now(datetime.UTC))
    metrics["custom"] = dict(custom.values)
    key = context.key._replace(usage=usage, pods=pods.version, custom=custom)
    return NodeContext(context.name, context.node, context.allocatable, metrics, key, pods)


def with_pods(context: NodeContext, pods: NodePods) -> NodeContext:
    """`context` with other pods (preemption's victims removed): a new context, never cached."""
    key = context.key._replace(pods=pods.version)
    return NodeContext(context.name, context.node, context.allocatable, context.metrics, key, pods)


Ages = Callable[[NodeContext], Mapping[str, float | None]]
"""Seconds since each custom value of a node's context was last confirmed (None: taken as current)."""


def context_report(
    pod: Mapping[str, Any],
    namespace: Mapping[str, Any] | None,
    contexts: Sequence[NodeContext],
    ages: Ages | None = None,
    estimate: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """What an explanation adds about the cluster context: the pod's `namespaceObject` and `estimate` (when
    given), and each node's pods (names), `allocated`, `recent` and custom metric values with their ages
    (`nodeContext`)."""
    nodes = {}
    for context in contexts:
        names = [f"{p['metadata'].get('namespace', '')}/{p['metadata'].get('name', '')}" for p in context.pods.pods]
        nodes[context.name] = {"pods": names, "allocated": context.pods.allocated, "recent": context.pods.recent}
        values = context.metrics.get("custom") or {}
        known = ages(context) if ages is not None else {}
        nodes[context.name]["custom"] = {k: {"value": v, "age": known.get(k)} for k, v in sorted(values.items())}
    report = {"namespaceObject": namespace_view(pod, namespace), "nodeContext": nodes}
    return report if estimate is None else report | {"estimate": dict(estimate)}


def node_addresses(node: Mapping[str, Any]) -> tuple[str, ...]:
    """The node's `status.addresses` (InternalIP, Hostname, ExternalIP, …), as strings, in order."""
    status = node.get("status")
    found = status.get("addresses") if isinstance(status, dict) else None
    if not isinstance(found, list):
        return ()
    # dict, not Mapping: decoded JSON and YAML, and an ABC check per address is most of this function's time
    return tuple(a["address"] for a in found if type(a) is dict and type(a.get("address")) is str)
